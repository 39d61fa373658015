"""The guard that fails a test run which leaves files in the clone."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers.clean_tree import left_behind, tree_entries


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_a_new_file_or_folder_is_left_behind_and_tool_caches_are_not(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("spark-warehouse/\n__pycache__/\n")
    (tmp_path / "kept.txt").write_text("x")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    before = tree_entries(tmp_path)
    assert before == set()
    (tmp_path / "dbfs:" / "mnt").mkdir(parents=True)
    (tmp_path / "dbfs:" / "mnt" / "state.json").write_text("{}")
    (tmp_path / "spark-warehouse" / "db").mkdir(parents=True)
    (tmp_path / "spark-warehouse" / "db" / "part-0.parquet").write_text("")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.pyc").write_text("")
    (tmp_path / "kept.txt").write_text("changed")
    after = tree_entries(tmp_path)
    assert after is not None
    assert left_behind(before, after) == [" M kept.txt", "!! spark-warehouse/", "?? dbfs:/"]


def test_outside_a_clone_there_is_nothing_to_compare(tmp_path: Path) -> None:
    assert tree_entries(tmp_path) is None
