"""Bundle task `companions`: checkpoints, consumer-group offset sync and heartbeats of the flows.

Named parameters (see `mirror_lib.app.bundle_tasks.TASKS`): --config-path PATH, and more per task.
"""

import sys

from mirror_lib.app.bundle_tasks import main

if __name__ == "__main__":
    sys.exit(main("companions"))
