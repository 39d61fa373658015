"""delta_store without Spark: files, stats, idempotent commits, abort, read_table, maintain."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")

from mirror_lib.tables import delta_rs as store  # noqa: E402
from mirror_lib.tables import positions  # noqa: E402
from mirror_lib.tables.schemas import SCHEMAS, TABLES  # noqa: E402

NOW = datetime.now(timezone.utc)


def events(n: int, start: int = 0, age_days: float = 0) -> pa.Table:
    ts = NOW - timedelta(days=age_days)
    rows = [
        {"type": "start", "flow": "A->B", "ts": ts, "kafka_offset": i, "record_ts": ts}
        for i in range(start, start + n)
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMAS["flow_events"])


def test_table_path_and_ensure(tmp_path):
    root = str(tmp_path)
    assert store.table_path(root + "/", "heartbeats") == f"{root}/tables/heartbeats"
    assert sorted(store.ensure_tables(root)) == sorted(TABLES)
    assert store.ensure_tables(root) == []
    dt = deltalake.DeltaTable(store.table_path(root, "checkpoints"))
    assert dt.protocol().min_reader_version == 1 and dt.protocol().min_writer_version == 2
    assert store.read_table(root, "checkpoints").num_rows == 0


def test_read_table_missing_is_empty(tmp_path):
    table = store.read_table(str(tmp_path), "heartbeats")
    assert table.num_rows == 0 and table.schema == SCHEMAS["heartbeats"]


def test_stats():
    stats = json.loads(store.file_stats(events(3, start=5)))
    assert stats["numRecords"] == 3
    assert stats["minValues"]["kafka_offset"] == 5 and stats["maxValues"]["kafka_offset"] == 7
    assert stats["nullCount"]["topic"] == 3 and "topic" not in stats["minValues"]
    assert stats["minValues"]["record_ts"].endswith("Z")
    nan = json.loads(store.file_stats(pa.table({"f": [1.0, float("nan")]})))
    assert "f" not in nan["minValues"]


def test_conform_rejects_unknown_columns(tmp_path):
    with pytest.raises(ValueError, match="unknown columns"):
        store.write_files(str(tmp_path), {"flow_events": pa.table({"bogus": [1]})}, "p")


def test_a_tagged_commit_is_idempotent_per_app_version(tmp_path):
    """Rows without a source position (a test source's ids) are made idempotent by the tag."""
    root = str(tmp_path)
    store.ensure_tables(root)

    def append(table: pa.Table, version: int, name: str = "flow_events") -> dict[str, str]:
        return positions.append_unseen(root, {name: table}, "t", tag=("mirror:q", version))

    assert append(events(4), 3) == {"flow_events": "committed"}
    assert append(events(0), 3, "heartbeats") == {
        "heartbeats": "empty",
        "heartbeats_per_minute": "empty",
    }
    dt = deltalake.DeltaTable(store.table_path(root, "flow_events"))
    assert dt.version() == 1 and dt.transaction_version("mirror:q") == 3
    history = dt.history(1)[0]
    assert history["mirror.version"] == "3" and history["mirror.rows"] == "4"
    # a replay (same or lower version) writes nothing
    assert append(events(4), 3) == {"flow_events": "skipped"}
    assert append(events(2, start=10), 2) == {"flow_events": "skipped"}
    dt = deltalake.DeltaTable(store.table_path(root, "flow_events"))
    assert dt.version() == 1 and dt.count() == 4
    assert append(events(2, start=10), 4) == {"flow_events": "committed"}
    assert store.read_table(root, "flow_events").num_rows == 6
    assert store.read_table(root, "flow_events", version=1).num_rows == 4


def test_abort_deletes_files(tmp_path):
    root = str(tmp_path)
    files = store.write_files(root, {"flow_events": events(2)}, "x")
    path = os.path.join(store.table_path(root, "flow_events"), files["flow_events"][0].path)
    assert os.path.exists(path)
    assert store.abort_files(root, files) == 1 and not os.path.exists(path)
    assert store.abort_files(root, files) == 0


def test_abort_keeps_files_the_table_references(tmp_path):
    """Spark may abort a batch whose Delta commit had already succeeded: its files stay."""
    root = str(tmp_path)
    store.ensure_tables(root)
    files = store.write_files(root, {"flow_events": events(2)}, "x")
    dt = deltalake.DeltaTable(store.table_path(root, "flow_events"))
    store.commit_actions(dt, files["flow_events"], [], {})
    assert store.abort_files(root, files) == 0
    assert store.read_table(root, "flow_events").num_rows == 2


def test_maintain_deletes_old_rows_and_vacuums(tmp_path):
    root = str(tmp_path)
    store.ensure_tables(root)
    for i, table in enumerate([events(3, age_days=60), events(2, start=3), events(1, start=5)]):
        positions.append_unseen(root, {"flow_events": table}, f"m{i}", tag=("mirror:m", i))
    report = store.maintain(root, retention_days=30, vacuum_hours=0)
    assert report["flow_events"]["deleted_rows"] == 3
    assert report["flow_events"]["vacuumed_files"] >= 1
    assert report["heartbeats"]["deleted_rows"] == 0
    offsets = sorted(store.read_table(root, "flow_events").column("kafka_offset").to_pylist())
    assert offsets == [3, 4, 5]
    with pytest.raises(Exception):  # noqa: B017 - vacuum under 168 h breaks old versions
        store.read_table(root, "flow_events", version=1).num_rows  # noqa: B018


def syncs(partitions: list[int], start: int) -> pa.Table:
    """offset_syncs rows of ``partitions`` in the order the tables thread decodes them."""
    rows = [
        {
            "flow": "A->B",
            "topic": "t",
            "partition": p,
            "upstream_start": start + i,
            "upstream_end": start + i + 1,
            "downstream_start": 2 * (start + i),
            "downstream_end": 2 * (start + i) + 1,
            "kind": "segment",
            "batch_id": start + i,
            "kafka_offset": start + i,
            "record_ts": NOW,
        }
        for i, p in enumerate(partitions)
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMAS["offset_syncs"])


def column_layout(path: str) -> dict[str, tuple[str, set[str]]]:
    """Per column of a parquet file: (compression, encodings)."""
    group = pq.ParquetFile(path).metadata.row_group(0)
    return {
        group.column(i).path_in_schema: (
            group.column(i).compression,
            set(group.column(i).encodings),
        )
        for i in range(group.num_columns)
    }


def three_syncs_files(root: str) -> str:
    """Three commits of five offset syncs each, rows out of order; the table's folder."""
    store.ensure_tables(root)
    for i in range(3):
        positions.append_unseen(
            root, {"offset_syncs": syncs([3, 0, 2, 0, 3], 10 * i)}, f"s{i}", tag=("mirror:s", i)
        )
    return store.table_path(root, "offset_syncs")


def test_offset_syncs_files_are_sorted_zstd_and_delta_encoded_after_compaction_too(tmp_path):
    """The busiest table's offsets climb by small steps per partition, stored as deltas: a
    sixth of the bytes of dictionary pages (docs/operations/state.md#file-layout)."""
    root = str(tmp_path)
    table = three_syncs_files(root)
    first = sorted(f for f in os.listdir(table) if f.startswith("s0"))[0]
    written = store.read_table(root, "offset_syncs", version=1)
    assert written.column("partition").to_pylist() == [0, 0, 2, 3, 3]
    assert written.column("upstream_start").to_pylist() == [1, 3, 2, 0, 4]
    layout = column_layout(os.path.join(table, first))
    assert layout["upstream_start"][0] == "ZSTD"
    assert "DELTA_BINARY_PACKED" in layout["downstream_end"][1]
    assert "DELTA_BINARY_PACKED" in layout["record_ts"][1]
    assert "DELTA_BINARY_PACKED" not in layout["topic"][1]

    report = store.maintain(root, retention_days=30, vacuum_hours=168)
    assert report["offset_syncs"]["compact"]["numFilesRemoved"] == 3
    (compacted,) = deltalake.DeltaTable(table).file_uris()
    layout = column_layout(compacted)
    assert layout["kafka_offset"][0] == "ZSTD"
    assert "DELTA_BINARY_PACKED" in layout["upstream_end"][1]
    assert store.read_table(root, "offset_syncs").num_rows == 15


def test_offset_syncs_row_groups_stay_small_after_compaction_too(tmp_path, monkeypatch):
    """Readers of a few segments decode whole row groups: the files keep them small."""
    monkeypatch.setitem(store.ROW_GROUP_ROWS, "offset_syncs", 4)
    root = str(tmp_path)
    table = three_syncs_files(root)
    for name in (f for f in os.listdir(table) if f.endswith(".parquet")):
        groups = pq.ParquetFile(os.path.join(table, name)).metadata
        assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [4, 1]
    store.maintain(root, retention_days=30, vacuum_hours=168)
    (compacted,) = deltalake.DeltaTable(table).file_uris()
    groups = pq.ParquetFile(compacted.removeprefix("file://")).metadata
    sizes = [groups.row_group(i).num_rows for i in range(groups.num_row_groups)]
    assert sum(sizes) == 15 and max(sizes) <= 4, sizes
