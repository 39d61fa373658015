"""What a test run left in the working tree: files no test may write there (state folders,
warehouses, a URI taken for a relative path), found with ``git status`` before and after."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

#: Written by the tools themselves, never by the code under test.
TOOL_LEFTOVERS = (
    "__pycache__",
    ".hypothesis",
    ".pytest_cache",
    ".ruff_cache",
    ".import_linter_cache",
    ".egg-info",
    ".make-",
    ".venv",
)


def tree_entries(root: Path) -> set[str] | None:
    """``git status`` lines (untracked, ignored, changed) of ``root``; None outside a git clone."""
    git = shutil.which("git")
    if git is None:
        return None
    out = subprocess.run(
        [git, "status", "--porcelain", "--ignored", "--untracked-files=normal", "--", "."],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        return None
    return set(out.stdout.splitlines())


def left_behind(before: set[str], after: set[str]) -> list[str]:
    """The entries new since ``before``, without the test tools' own caches."""
    return sorted(
        line for line in after - before if not any(mark in line for mark in TOOL_LEFTOVERS)
    )
