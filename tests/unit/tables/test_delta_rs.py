"""delta_store without Spark: files, stats, idempotent commits, abort, read_table, maintain."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pyarrow as pa
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
    assert append(events(0), 3, "heartbeats") == {"heartbeats": "empty"}
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
