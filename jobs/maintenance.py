"""Bundle task `maintenance`: retention delete, OPTIMIZE and VACUUM of the tables; (re)create views.

Named parameters (see `mirror_lib.app.bundle_tasks.TASKS`): --config-path PATH, and more per task.
"""

import sys

from mirror_lib.app.bundle_tasks import main

if __name__ == "__main__":
    sys.exit(main("maintenance"))
