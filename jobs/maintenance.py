"""Bundle task `maintenance`: retention delete, compaction and vacuum of the Delta tables; (re)create the views.

Named parameters (see `mirror_lib.tasks.TASKS`): --config-path PATH, and more per task.
"""

import sys

from mirror_lib.tasks import main

if __name__ == "__main__":
    sys.exit(main("maintenance"))
