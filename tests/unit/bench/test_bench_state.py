"""The soak's reading of a Delta table: live files, replaced files awaiting vacuum, log."""

from __future__ import annotations

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")

from bench import state  # noqa: E402


def test_a_compacted_table_counts_its_replaced_files_apart_from_its_live_ones(tmp_path):
    path = tmp_path / "t"
    for i in range(3):
        deltalake.write_deltalake(
            str(path), pa.table({"x": list(range(i, i + 100))}), mode="append"
        )
    before = state.delta_table(path)
    assert before["files"] == 3 and before["replaced_bytes"] == 0
    assert before["bytes"] == before["disk_bytes"]
    deltalake.DeltaTable(str(path)).optimize.compact()
    after = state.delta_table(path)
    assert after["files"] == 1 and after["disk_files"] == 4
    assert after["replaced_bytes"] == before["bytes"]
    assert after["disk_bytes"] == after["bytes"] + after["replaced_bytes"]
    assert after["log_entries"] >= 4


def test_a_table_that_cannot_be_read_counts_no_replaced_files(tmp_path):
    """A read that fails (a commit raced it) knows no live files: all on disk is not replaced."""
    path = tmp_path / "t"
    path.mkdir()
    (path / "part-0.parquet").write_bytes(b"x" * 100)  # a file, and no Delta log to read
    read = state.delta_table(path)
    assert read["disk_bytes"] == 100 and read["bytes"] == 0
    assert "replaced_bytes" not in read
