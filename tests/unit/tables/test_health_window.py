"""``mirror status`` reads the last hour of metrics, pushed down to the files, and still finds
the newest checkpoint and heartbeat of a pair that has been quiet for longer."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")

from mirror_lib.config.parse import parse_config
from mirror_lib.tables import delta_rs as store
from mirror_lib.tables import positions
from mirror_lib.tables.health import flow_health, read_rows
from mirror_lib.tables.schemas import SCHEMAS

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
NOW_MS = NOW.timestamp() * 1000


def metrics(at: datetime, records: int, lag: int, first: int) -> pa.Table:
    row = {"flow": "A->B", "source": "A", "target": "B", "topic": "orders", "partition": 0,
           "remote_topic": "A.orders", "ts": at, "records": records, "lag": lag,
           "upstream_last": first, "latency_ms_p50": 5.0, "latency_ms_p99": 9.0,
           "latency_ms_max": 9.0, "cluster": "B", "kafka_topic": "mm2-metrics.A.internal",
           "kafka_partition": 0, "kafka_offset": first, "record_ts": at}  # fmt: skip
    return pa.Table.from_pylist([row], schema=SCHEMAS["replication_metrics"])


def checkpoint(at: datetime) -> pa.Table:
    row = {"source": "A", "target": "B", "group_id": "app", "topic": "A.orders", "partition": 0,
           "upstream_offset": 5, "downstream_offset": 5, "cluster": "B",
           "kafka_topic": "A.checkpoints.internal", "kafka_partition": 0, "kafka_offset": 0,
           "record_ts": at}  # fmt: skip
    return pa.Table.from_pylist([row], schema=SCHEMAS["checkpoints"])


def test_the_window_reads_recent_metrics_and_the_newest_quiet_checkpoint(tmp_path):
    state = tmp_path / "state"
    config = parse_config({"clusters": "A, B", "A.bootstrap.servers": "a:1",
                           "B.bootstrap.servers": "b:1", "A->B.enabled": "true",
                           "mirror.state.dir": str(state)})  # fmt: skip
    root = str(state)
    store.ensure_tables(root)
    old, recent = NOW - timedelta(hours=5), NOW - timedelta(minutes=10)
    positions.append_unseen(root, {"replication_metrics": metrics(old, 1000, 77, 0)}, "old")
    positions.append_unseen(root, {"replication_metrics": metrics(recent, 30, 3, 1)}, "new")
    positions.append_unseen(root, {"checkpoints": checkpoint(old)}, "cp")

    (health,) = flow_health(config, now_ms=NOW_MS)
    assert (health.records, health.lag) == (30, 3)  # the 5-hour-old row is outside the hour
    assert health.checkpoint_age_seconds == pytest.approx(5 * 3600)  # found beyond the window
    (everything,) = flow_health(config, now_ms=NOW_MS, history_s=None)
    assert everything.records == 1030

    since = read_rows(config, "replication_metrics", since_ms=NOW_MS - 3600_000,
                      columns=["records"])  # fmt: skip
    assert [(r["records"], set(r)) for r in since] == [(30, {"records", "ts", "_ms"})]
