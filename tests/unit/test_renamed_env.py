"""A test setting renamed since: still set in a shell, it stops the run naming the new one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_old_name_of_the_external_clusters_flag_is_refused_naming_the_new_one() -> None:
    env = {**os.environ, "MIRROR_TEST_REAL_KAFKA": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
         "tests/unit/test_renamed_env.py"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert "MIRROR_TEST_REAL_KAFKA = '1' is no longer read" in done.stderr
    assert "MIRROR_TEST_EXTERNAL_CLUSTERS" in done.stderr
