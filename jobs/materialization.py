"""Bundle task `materialization`: materialize the internal topics into the Delta tables.

Named parameters (see `mirror_lib.app.bundle_tasks.TASKS`): --config-path PATH, and more per task.
"""

import sys

from mirror_lib.app.bundle_tasks import main

if __name__ == "__main__":
    sys.exit(main("materialization"))
