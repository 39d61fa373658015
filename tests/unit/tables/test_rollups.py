"""``metrics_per_minute`` re-aggregates to what the raw metrics rows say, and a batch written
twice or overlapping an earlier one counts each record once."""

from __future__ import annotations

import random
import shutil
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")

from mirror_lib.tables import delta_rs as store
from mirror_lib.tables import positions
from mirror_lib.tables.rollups import heartbeats_per_minute, metrics_per_minute
from mirror_lib.tables.schemas import SCHEMAS

START = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def raw_rows(n: int, seed: int = 7) -> list[dict]:
    """``n`` metrics rows over 3 partitions and about 4 minutes, in metrics-topic order."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        part = rnd.randrange(3)
        records = rnd.choice([0, 1, 50, 180])
        rows.append({
            "flow": "A->B", "source": "A", "target": "B", "topic": "orders",
            "remote_topic": "A.orders", "partition": part,
            "ts": START + timedelta(milliseconds=250 * i + rnd.randrange(200)),
            "records": records, "bytes": records * 110, "lag": rnd.randrange(1000),
            "upstream_last": 1000 * part + i,
            "latency_ms_p50": None if records == 0 else rnd.uniform(1, 40),
            "latency_ms_p99": rnd.uniform(40, 90), "latency_ms_max": rnd.uniform(90, 200),
            "cluster": "B", "kafka_topic": "mm2-metrics.A.internal", "kafka_partition": i % 2,
            "kafka_offset": i // 2, "record_ts": START + timedelta(milliseconds=250 * i),
        })  # fmt: skip
    return rows


def table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMAS["replication_metrics"])


def by_minute(rows: list[dict]) -> dict[tuple, tuple]:
    """Per (partition, minute): records, bytes, weighted p50, max p99, max, latest lag."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        minute = r["ts"].replace(second=0, microsecond=0)
        groups[(r["partition"], minute)].append(r)
    out = {}
    for key, rs in groups.items():
        records = sum(r["records"] for r in rs)
        p50s = [r["latency_ms_p50"] * r["records"] for r in rs if r["latency_ms_p50"] is not None]
        weighted = sum(p50s)
        latest = max(rs, key=lambda r: (r["ts"], r["upstream_last"]))
        out[key] = (
            records, sum(r["bytes"] for r in rs),
            None if not records else round(weighted / records, 9),
            max(r["latency_ms_p99"] for r in rs), max(r["latency_ms_max"] for r in rs),
            latest["lag"], latest["upstream_last"],
        )  # fmt: skip
    return out


def test_a_rollup_re_aggregates_to_the_raw_rows():
    rows = raw_rows(900)
    rolled = metrics_per_minute(table(rows[:400])).to_pylist()
    rolled += metrics_per_minute(table(rows[400:])).to_pylist()  # a minute split over two writes
    assert len(rolled) < len(rows) / 10
    assert by_minute(rolled) == by_minute(rows)
    assert sum(r["batches"] for r in rolled) == len(rows)
    assert min(r["first_ts"] for r in rolled) == min(r["ts"] for r in rows)  # the span of a run
    assert max(r["ts"] for r in rolled) == max(r["ts"] for r in rows)


def test_overlapping_and_replayed_writes_count_each_record_once(tmp_path):
    root = str(tmp_path)
    store.ensure_tables(root)
    rows = raw_rows(600, seed=3)
    for n, (lo, hi) in enumerate([(0, 200), (0, 200), (100, 450), (300, 600), (0, 600)]):
        positions.append_unseen(root, {"replication_metrics": table(rows[lo:hi])}, f"w{n}")
    metrics = store.read_table(root, "replication_metrics").to_pylist()
    rolled = store.read_table(root, "metrics_per_minute").to_pylist()
    assert len(metrics) == len(rows)
    assert by_minute(rolled) == by_minute(rows)


def test_the_first_rollup_after_an_upgrade_rolls_up_the_history_too(tmp_path):
    root = str(tmp_path)
    rows = raw_rows(500, seed=11)
    positions.append_unseen(root, {"replication_metrics": table(rows[:320])}, "old")
    shutil.rmtree(store.table_path(root, "metrics_per_minute"))  # a version without rollups
    positions.append_unseen(root, {"replication_metrics": table(rows[300:])}, "new")
    rolled = store.read_table(root, "metrics_per_minute").to_pylist()
    assert by_minute(rolled) == by_minute(rows)


def test_decoded_tables_are_rolled_up_even_with_an_empty_rollup_beside_them(tmp_path):
    root = str(tmp_path)
    rows = raw_rows(50)
    decoded = {name: schema.empty_table() for name, schema in SCHEMAS.items()}  # as decode does
    decoded["replication_metrics"] = table(rows)
    positions.append_unseen(root, decoded, "decoded")
    assert by_minute(store.read_table(root, "metrics_per_minute").to_pylist()) == by_minute(rows)


def test_heartbeats_roll_up_to_their_count_and_latest_per_pair():
    rnd = random.Random(2)
    rows = [
        {"source": rnd.choice("AC"), "target": "B", "hops": rnd.randrange(2),
         "heartbeat_ts": START + timedelta(milliseconds=rnd.randrange(300_000)),
         "cluster": "B", "kafka_topic": "heartbeats", "kafka_partition": 0, "kafka_offset": i,
         "record_ts": START}
        for i in range(400)
    ]  # fmt: skip
    beats = pa.Table.from_pylist(rows, schema=SCHEMAS["heartbeats"])
    rolled = pa.concat_tables(
        [heartbeats_per_minute(beats.slice(0, 150)), heartbeats_per_minute(beats.slice(150))]
    ).to_pylist()
    assert len(rolled) < 60

    def freshness(rs: list[dict], count: str | None) -> dict[tuple, tuple]:
        out: dict[tuple, tuple] = {}
        for r in rs:
            key = (r["source"], r["target"], r["hops"])
            n, latest = out.get(key, (0, START))
            out[key] = (n + (r[count] if count else 1), max(latest, r["heartbeat_ts"]))
        return out

    assert freshness(rolled, "heartbeats") == freshness(rows, None)
