#!/usr/bin/env python
"""A month of synthetic table history, and how long the readers take over it.

Writes ``--days`` days of rows into the delta-rs tables of a fresh ``mirror.state.dir`` (or of
``--state`` if it has none) at the rates the soak measured at 5,000 records/s over 4 partitions
(one file per table per day, as compaction leaves them; the rollups as a run writes them, every
30 s; checkpoints of 20 groups, 19 near the head and one a week behind), then times what an
on-call engineer runs: the health of ``mirror status``
(:func:`mirror_lib.tables.health.flow_health`), ``translate_group_as_of``, and with ``--views``
the SQL views of the dashboards in a local Spark session. With ``--maintain`` it first runs a
maintenance round (the default retention keeps 7 days).

    .venv/bin/python bench/history.py --days 30
    .venv/bin/python bench/history.py --days 30 --maintain --views
    .venv/bin/python bench/history.py --days 7 --scale 1.0 --views  # a month, maintained
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DAY_S = 86_400
WRITE_S = 30  # a run writes the tables every 30 s
#: Rows a day at 5,000 records/s over 4 partitions (the soak, docs/operations/state.md).
RATES = {
    "replication_metrics": 2_400_000,
    "offset_syncs": 2_400_000,
    "checkpoints": 115_000,
    "heartbeats": 172_800,
    "flow_events": 50,
}


def columns(name: str, n: int, day_start: float, base: int) -> dict[str, Any]:
    """``n`` rows of table ``name`` spread over one day from ``day_start`` (epoch s)."""
    import numpy as np
    import pyarrow as pa

    i = np.arange(n, dtype=np.int64)
    ts = pa.array(((day_start + i * DAY_S / n) * 1000).astype(np.int64), pa.timestamp("ms", "UTC"))
    part = (i % 4).astype(np.int32)
    offset = base + i
    origin = {
        "cluster": pa.array(["B"] * n),
        "kafka_partition": pa.array(np.zeros(n, np.int32)),
        "kafka_offset": pa.array(offset),
        "record_ts": ts,
    }
    common = {
        "flow": pa.array(["A->B"] * n),
        "source": pa.array(["A"] * n),
        "target": pa.array(["B"] * n),
        "topic": pa.array(["orders"] * n),
        "remote_topic": pa.array(["A.orders"] * n),
        "partition": pa.array(part),
    }
    if name == "replication_metrics":
        lat = np.abs(np.sin(i.astype(float))) * 50
        return {
            **common,
            "batch_id": pa.array(i // 1000),
            "query_id": pa.array(["q"] * n),
            "slot": pa.array(part % 2),
            "ts": ts,
            "records": pa.array(np.full(n, 180)),
            "bytes": pa.array(np.full(n, 19_800)),
            "upstream_first": pa.array(offset * 180),
            "upstream_last": pa.array(offset * 180 + 179),
            "downstream_first": pa.array(offset * 180),
            "downstream_last": pa.array(offset * 180 + 179),
            "lag": pa.array(i % 300),
            "latency_ms_p50": pa.array(lat),
            "latency_ms_p99": pa.array(lat * 2),
            "latency_ms_max": pa.array(lat * 3),
            **origin,
            "kafka_topic": pa.array(["mm2-metrics.A.internal"] * n),
        }
    if name == "offset_syncs":
        return {
            **common,
            "upstream_start": pa.array(offset * 180),
            "upstream_end": pa.array(offset * 180 + 179),
            "downstream_start": pa.array(offset * 181),
            "downstream_end": pa.array(offset * 181 + 179),
            "kind": pa.array(["segment"] * n),
            "batch_id": pa.array(i // 1000),
            **origin,
            "kafka_topic": pa.array(["mm2-metrics.A.internal"] * n),
        }
    if name == "checkpoints":
        # 20 groups: 19 inside a segment of their partition a few behind the offset syncs
        # written at the same time, and group-19 stopped at the history's first offsets
        group = i % 20
        synced = offset * RATES["offset_syncs"] // RATES["checkpoints"] // 4 * 4 + part
        upstream = np.where(group == 19, part, np.maximum(synced - 4 * group, part)) * 180 + 7
        return {
            "source": pa.array(["A"] * n),
            "target": pa.array(["B"] * n),
            "group_id": pa.array([f"group-{g}" for g in group]),
            "topic": pa.array(["A.orders"] * n),
            "partition": pa.array(part),
            "upstream_offset": pa.array(upstream),
            "downstream_offset": pa.array(upstream),
            "metadata": pa.array([""] * n),
            **origin,
            "kafka_topic": pa.array(["A.checkpoints.internal"] * n),
        }
    if name == "heartbeats":
        return {
            "source": pa.array(["A"] * n),
            "target": pa.array(["B"] * n),
            "heartbeat_ts": ts,
            "hops": pa.array(np.zeros(n, np.int32)),
            **origin,
            "kafka_topic": pa.array(["heartbeats"] * n),
        }
    return {
        "type": pa.array(["start"] * n),
        "flow": pa.array(["A->B"] * n),
        "ts": ts,
        "reason": pa.array(["run started"] * n),
        "action": pa.array(["started"] * n),
        **origin,
        "kafka_topic": pa.array(["mm2-metrics.A.internal"] * n),
    }


def generate(root: str, days: int, scale: float) -> dict[str, int]:
    """Write ``days`` days (ending now) of every table; rows written per table."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from mirror_lib.tables import delta_rs as store

    store.ensure_tables(root)
    now = datetime.now(timezone.utc).timestamp()
    written: dict[str, int] = {}
    for name, per_day in RATES.items():
        n = max(1, int(per_day * scale))
        dt = DeltaTable(store.table_path(root, name))
        for day in range(days):
            start = now - (days - day) * DAY_S
            batch = pa.table(columns(name, n, start, day * n))
            files = store.write_files(root, {name: batch}, f"history-{day}")
            store.commit_actions(dt, files[name], [], {"mirror.app_id": "bench-history"})
            dt = DeltaTable(store.table_path(root, name))
            for rollup, rows in rollups_of(name, batch).items():
                files = store.write_files(root, {rollup: rows}, f"history-{day}")
                rolled = DeltaTable(store.table_path(root, rollup))
                store.commit_actions(rolled, files[rollup], [], {"mirror.app_id": "bench-history"})
                written[rollup] = written.get(rollup, 0) + rows.num_rows
        written[name] = n * days
    return written


def rollups_of(name: str, rows: Any) -> dict[str, Any]:
    """The rollup rows a run writes beside a day of ``name``'s rows: the tables are written
    every 30 s (:data:`WRITE_S`), so each rolls up the rows of its 30 s (rows are in time
    order)."""
    import pyarrow as pa

    from mirror_lib.tables.rollups import ROLLUPS, rolled_up

    per_write = max(1, rows.num_rows * WRITE_S // DAY_S)
    return {
        rollup: pa.concat_tables(
            rolled_up(rollup, rows.slice(i, per_write)) for i in range(0, rows.num_rows, per_write)
        )
        for rollup, source in ROLLUPS.items()
        if source == name
    }


def timed(what: str, call: Callable[[], Any], out: dict[str, float]) -> Any:
    t0 = time.monotonic()
    result = call()
    out[what] = round(time.monotonic() - t0, 2)
    print(f"{what}: {out[what]} s", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--scale", type=float, default=1.0, help="times the soak's rates")
    p.add_argument("--maintain", action="store_true", help="a maintenance round first")
    p.add_argument("--views", action="store_true", help="also the dashboards' SQL, in Spark")
    p.add_argument("--state", type=Path, default=None, help="tables here (generated if none)")
    args = p.parse_args(argv)
    from mirror_lib.config.parse import parse_config
    from mirror_lib.replication.migration.failover import translate_group_as_of
    from mirror_lib.tables.health import flow_health

    state = args.state or Path(tempfile.mkdtemp(prefix="mirror-history-"))
    config = parse_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:2",
            "A->B.enabled": "true",
            "mirror.state.dir": str(state),
        }
    )
    times: dict[str, float] = {}
    if not (state / "tables").exists():
        rows = timed("generate", lambda: generate(str(state), args.days, args.scale), times)
        print(f"rows: {rows} in {state}")
    if args.maintain:
        from mirror_lib.spark.materialize import maintain_tables

        timed("maintain", lambda: maintain_tables(config), times)
    timed("mirror status (flow_health)", lambda: flow_health(config), times)
    timed(
        "translate_group_as_of (latest)",
        lambda: translate_group_as_of(config, "group-1", "A", "B"),
        times,
    )
    if args.views:
        from mirror_lib.spark.session import local_spark_session
        from mirror_lib.spark.views import create_views

        spark = local_spark_session("history", 2)
        try:
            timed("create_views", lambda: create_views(spark, config), times)
            for sql in sorted((Path(__file__).parents[1] / "dashboards" / "sql").glob("*.sql")):
                timed(f"dashboards/sql/{sql.name}", spark.sql(sql.read_text()).collect, times)
        finally:
            spark.stop()
    print(times)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
