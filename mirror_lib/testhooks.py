"""Test-only hooks, inert unless their environment variable is set (tests kill inside them).

``MIRROR_TEST_HOLD_BEFORE_COMMIT=<file>``: once the process has committed
``MIRROR_TEST_HOLD_AFTER_COMMITS`` (default 0) transactions, the next commit creates ``<file>``
and blocks until the process is killed, so a test can land a SIGKILL inside an open transaction
deterministically instead of by luck.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_commits = 0


def hold_before_commit() -> None:
    """Block forever right before a transaction commit when the test asks for it."""
    global _commits
    marker = os.environ.get("MIRROR_TEST_HOLD_BEFORE_COMMIT")
    if not marker:
        return
    _commits += 1
    if _commits > int(os.environ.get("MIRROR_TEST_HOLD_AFTER_COMMITS", "0")):
        Path(marker).touch()
        while True:
            time.sleep(1)
