"""delta_store with real Spark and Delta tables: exactly-once streaming commits, SQL, maintenance.

A tiny counting source (ids ``0..n-1``, ``n`` read from a file, so restarts see the same data)
feeds :func:`delta_source.delta_rs_batch` (a ``foreachBatch`` body), which writes every id to
``replication_metrics`` and every third id to ``flow_events``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from mirror_lib.spark import delta_source
from mirror_lib.tables import delta_rs as store
from mirror_lib.tables import positions
from mirror_lib.tables.schemas import SCHEMAS

deltalake = pytest.importorskip("deltalake")

# Spark workers cannot import the tests package: ship this module's classes by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


class IdRange(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class CountReader(DataSourceStreamReader):
    """Offsets ``{"n": count}``; the count of available ids is read from a file."""

    def __init__(self, limit_file: str) -> None:
        self.limit_file = limit_file

    def initialOffset(self) -> dict[str, int]:
        return {"n": 0}

    def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, int]:
        return {"n": int(Path(self.limit_file).read_text())}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        lo, hi = start["n"], end["n"]
        mid = (lo + hi) // 2
        return [IdRange(a, b) for a, b in ((lo, mid), (mid, hi)) if b > a]

    def read(self, partition: IdRange) -> Iterator[tuple[int]]:
        for i in range(partition.start, partition.end):
            yield (i,)


class CountSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "dstest_count"

    def schema(self) -> str:
        return "id long"

    def streamReader(self, schema: Any) -> CountReader:
        return CountReader(self.options["limit_file"])


def two_tables(df: Any) -> dict[str, pa.Table]:
    """Every id -> replication_metrics; ids divisible by 3 -> flow_events."""
    ids = [r.id for r in df.collect()]
    metrics = [{"flow": "A->B", "kafka_offset": i, "records": 1, "record_ts": NOW} for i in ids]
    events = [{"type": "start", "kafka_offset": i, "record_ts": NOW} for i in ids if i % 3 == 0]
    return {
        "replication_metrics": pa.Table.from_pylist(metrics, SCHEMAS["replication_metrics"]),
        "flow_events": pa.Table.from_pylist(events, SCHEMAS["flow_events"]),
    }


@pytest.fixture
def dspark(spark):
    for source in (CountSource, delta_source.DeltaRsDataSource):
        spark.dataSource.register(source)
    return spark


def start(spark, tmp: Path, root: str):
    """An availableNow query of the ids < the number in the file ``limit`` into the two tables."""
    checkpoint = tmp / "checkpoint"
    return (
        spark.readStream.format("dstest_count")
        .option("limit_file", str(tmp / "limit"))
        .load()
        .writeStream.foreachBatch(delta_source.delta_rs_batch(root, checkpoint, two_tables))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def run_once(spark, tmp: Path, root: str, available: int) -> tuple[str, list[int]]:
    """One availableNow run over ids < available; returns (query id, batch ids that ran)."""
    (tmp / "limit").write_text(str(available))
    query = start(spark, tmp, root)
    assert query.awaitTermination(180), "availableNow query did not finish"
    assert query.exception() is None
    return str(query.id), [p["batchId"] for p in query.recentProgress]


def offsets(root: str, name: str) -> list[int]:
    return sorted(store.read_table(root, name).column("kafka_offset").to_pylist())


def table(root: str, name: str) -> Any:
    return deltalake.DeltaTable(store.table_path(root, name))


def test_streaming_commits_once_per_batch_across_restarts(dspark, tmp_path):
    root = str(tmp_path / "state")
    store.ensure_tables(root)
    query_id, batches = run_once(dspark, tmp_path, root, 10)
    for available in (25, 25, 26):  # each run restarts from the checkpoint
        qid, ran = run_once(dspark, tmp_path, root, available)
        assert qid == query_id
        assert delta_source.streaming_query_id(tmp_path / "checkpoint") == query_id
        batches += ran
    batches = sorted(set(batches))
    assert len(batches) >= 3
    assert offsets(root, "replication_metrics") == list(range(26))
    assert offsets(root, "flow_events") == list(range(0, 26, 3))
    metrics, events = table(root, "replication_metrics"), table(root, "flow_events")
    app_id = f"mirror:{query_id}"
    # version 0 = create; then one version per non-empty batch (three for metrics, two for events)
    assert metrics.version() == 3 and events.version() == 2
    assert metrics.transaction_version(app_id) == batches[-1]
    assert events.transaction_version(app_id) < batches[-1]  # the last batch had no event rows
    assert len(metrics.file_uris()) == 3  # the driver writes one file per batch and table
    # replaying the last commit (same app id and version) writes nothing
    replay = store.read_table(root, "flow_events").select(["kafka_offset", "record_ts"])
    tag = (app_id, batches[-1])
    assert positions.append_unseen(root, {"replication_metrics": replay}, "replay", tag=tag) == {
        "replication_metrics": "skipped",
        "metrics_per_minute": "skipped",
    }
    assert table(root, "replication_metrics").version() == 3
    assert len(offsets(root, "replication_metrics")) == 26


def test_batch_failing_between_files_and_commit_reruns_without_duplicates(
    dspark, tmp_path, monkeypatch
):
    def crash(*args: Any) -> None:
        raise RuntimeError("crashed before the commit")

    root = str(tmp_path / "state")
    (tmp_path / "limit").write_text("12")
    monkeypatch.setattr(positions, "commit_actions", crash)  # foreachBatch runs in this process
    query = start(dspark, tmp_path, root)
    with pytest.raises(Exception, match="crashed before the commit"):
        query.awaitTermination(180)
    monkeypatch.undo()
    written = list(Path(store.table_path(root, "replication_metrics")).glob("*.parquet"))
    assert written and store.read_table(root, "replication_metrics").num_rows == 0
    assert all(f.name.startswith(f"part-{query.id}-b0-") for f in written)
    run_once(dspark, tmp_path, root, 12)  # re-runs batch 0 from the checkpoint
    run_once(dspark, tmp_path, root, 12)
    assert offsets(root, "replication_metrics") == list(range(12))
    assert offsets(root, "flow_events") == [0, 3, 6, 9]
    assert table(root, "replication_metrics").version() == 1


def commit_metrics(root: str, first: int, n: int, batch: int, age_days: float = 0) -> None:
    ts = datetime.now(timezone.utc) - timedelta(days=age_days)
    rows = [{"kafka_offset": i, "record_ts": ts, "ts": ts} for i in range(first, first + n)]
    data = pa.Table.from_pylist(rows, SCHEMAS["replication_metrics"])
    tag = ("mirror:test", batch)
    result = positions.append_unseen(root, {"replication_metrics": data}, f"t{batch}", tag=tag)
    assert result == {"replication_metrics": "committed", "metrics_per_minute": "committed"}


def test_sql_views_time_travel_and_maintenance(dspark, tmp_path):
    root = str(tmp_path / "it's `odd`")  # quotes must be escaped in the OPTIONS clause
    views = delta_source.register_tables(dspark, root, prefix="ds_")
    assert "ds_replication_metrics" in views
    assert dspark.sql("SELECT count(*) AS n FROM ds_heartbeats").first().n == 0  # empty table
    count = "SELECT count(*) AS n, max(record_ts) AS ts FROM {}"
    commit_metrics(root, 0, 3, batch=0, age_days=60)
    assert dspark.sql(count.format("ds_replication_metrics")).first().n == 3
    time.sleep(0.2)
    between = datetime.now(timezone.utc).isoformat()
    time.sleep(0.2)
    commit_metrics(root, 3, 2, batch=1)
    row = dspark.sql(count.format("ds_replication_metrics")).first()
    assert row.n == 5 and row.ts is not None  # the unpinned view sees later commits
    path = store.table_path(root, "replication_metrics")
    old = dspark.read.format("deltars").option("path", path).option("versionAsOf", 1).load()
    assert old.count() == 3
    delta_source.register_tables(dspark, root, as_of_timestamp=between, prefix="at_")
    assert dspark.sql(count.format("at_replication_metrics")).first().n == 3

    report = store.maintain(root, retention_days=30, vacuum_hours=0)
    assert report["replication_metrics"]["deleted_rows"] == 3
    assert report["replication_metrics"]["vacuumed_files"] >= 1
    assert dspark.sql(count.format("ds_replication_metrics")).first().n == 2
    assert offsets(root, "replication_metrics") == [3, 4]


def test_failover_views_answer_each_query_from_the_latest_commits(dspark, tmp_path):
    """The answer is computed when a query is planned: a sorted query (whose sort samples its
    input first) answers once and consistently, and the next query sees a newer checkpoint."""
    root = str(tmp_path)
    delta_source.register_tables(dspark, root, prefix="fo_")

    def checkpoint(offset: int, kafka_offset: int) -> None:
        row = {"source": "A", "target": "B", "group_id": "g", "topic": "A.t", "partition": 0,
               "upstream_offset": offset, "downstream_offset": offset, "metadata": "",
               "cluster": "B", "kafka_topic": "A.checkpoints.internal", "kafka_partition": 0,
               "kafka_offset": kafka_offset, "record_ts": datetime.now(timezone.utc)}  # fmt: skip
        data = pa.Table.from_pylist([row], SCHEMAS["checkpoints"])
        positions.append_unseen(root, {"checkpoints": data}, f"c{kafka_offset}")

    query = "SELECT group_id, partition, offset FROM fo_offset_translation ORDER BY group_id"
    assert dspark.sql(query).collect() == []
    checkpoint(5, 0)
    assert [r.offset for r in dspark.sql(query).collect()] == [5]
    checkpoint(9, 1)
    assert [r.offset for r in dspark.sql(query).collect()] == [9]
    latest = "SELECT upstream_offset FROM fo_latest_checkpoints ORDER BY upstream_offset"
    assert [r.upstream_offset for r in dspark.sql(latest).collect()] == [9]
