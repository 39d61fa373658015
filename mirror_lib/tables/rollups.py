"""Per-minute rollups of the metrics and heartbeats, which the dashboards read.

``replication_metrics`` holds a row per partition and commit (2.4 million rows a day at
5,000 records/s over 4 partitions) and ``heartbeats`` two rows a second per cluster pair.
Scanning a week of them takes seconds in Spark. Every writer also appends their rollups: one
row per partition (cluster pair), minute and write, whatever the rate (about two a minute, as
the tables are written every 30 s). Each rollup row re-aggregates exactly: in
``metrics_per_minute``, ``records`` and ``bytes`` are sums, ``latency_ms_p50`` the
records-weighted mean, ``latency_ms_p99``/``latency_ms_max`` the maxima, and ``lag``,
``upstream_last`` and ``ts`` those of the minute's latest row; in ``heartbeats_per_minute``,
``heartbeats`` is a count and ``heartbeat_ts`` the latest (:mod:`mirror_lib.spark.views`).

A rollup row carries the origin of the last source record it holds, so the table keeps
positions like every other (:mod:`mirror_lib.tables.positions`). Its rows are rolled up from
the source rows that the *rollup* table does not hold yet, so a replayed or overlapping batch
never counts a record twice.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mirror_lib.tables.schemas import SCHEMAS

#: Rollup table -> the table whose rows it rolls up.
ROLLUPS = {"metrics_per_minute": "replication_metrics", "heartbeats_per_minute": "heartbeats"}

_ORIGIN_KEYS = ("cluster", "kafka_topic", "kafka_partition")
_KEYS = (*_ORIGIN_KEYS, "flow", "source", "target", "topic", "remote_topic", "partition", "minute")


def with_rollups(tables: dict[str, Any]) -> dict[str, Any]:
    """``tables`` with each rollup's entry replaced by its source's rows (a writer filters them
    by the rollup's positions, then :func:`rolled_up`): a rollup is only ever derived."""
    kept = {name: rows for name, rows in tables.items() if name not in ROLLUPS}
    return {**kept, **{r: tables[source] for r, source in ROLLUPS.items() if source in tables}}


def rolled_up(name: str, rows: pa.Table) -> pa.Table:
    """The rows to write to table ``name``: ``rows`` themselves, or their rollup."""
    if name == "metrics_per_minute":
        return metrics_per_minute(rows)
    if name == "heartbeats_per_minute":
        return heartbeats_per_minute(rows)
    return rows


def heartbeats_per_minute(rows: pa.Table) -> pa.Table:
    """``heartbeats`` rows -> ``heartbeats_per_minute`` rows (one per origin partition, cluster
    pair, hops and minute)."""
    schema = SCHEMAS["heartbeats_per_minute"]
    if not rows.num_rows:
        return schema.empty_table()
    keys = [*_ORIGIN_KEYS, "source", "target", "hops", "minute"]
    t = rows.append_column("minute", pc.floor_temporal(rows["heartbeat_ts"], unit="minute"))
    g = t.group_by(keys, use_threads=False).aggregate([
        ("hops", "count", pc.CountOptions("all")), ("heartbeat_ts", "max"),
        ("kafka_offset", "max"), ("record_ts", "max"),
    ])  # fmt: skip
    columns = {
        **{k: g[k] for k in keys},
        "heartbeats": g["hops_count"], "heartbeat_ts": g["heartbeat_ts_max"],
        "kafka_offset": g["kafka_offset_max"], "record_ts": g["record_ts_max"],
    }  # fmt: skip
    return pa.table({f.name: pc.cast(columns[f.name], f.type) for f in schema}, schema=schema)


def metrics_per_minute(rows: pa.Table) -> pa.Table:
    """``replication_metrics`` rows -> ``metrics_per_minute`` rows (one per origin partition,
    replicated partition and minute)."""
    schema = SCHEMAS["metrics_per_minute"]
    if not rows.num_rows:
        return schema.empty_table()
    records = pc.fill_null(rows["records"], 0)
    weighted = pc.multiply(rows["latency_ms_p50"], pc.cast(records, pa.float64()))
    t = (
        rows.set_column(rows.schema.get_field_index("records"), "records", records)
        .append_column("minute", pc.floor_temporal(rows["ts"], unit="minute"))
        .append_column("weighted", weighted)
        .sort_by([(k, "ascending") for k in (*_KEYS[:-1], "ts", "upstream_last")])
    )
    last = pc.ScalarAggregateOptions(skip_nulls=False)
    g = t.group_by(list(_KEYS), use_threads=False).aggregate([
        ("records", "sum"), ("bytes", "sum"), ("records", "count"), ("weighted", "sum"),
        ("latency_ms_p99", "max"), ("latency_ms_max", "max"), ("lag", "last", last),
        ("upstream_last", "last", last), ("ts", "last", last), ("ts", "min"),
        ("kafka_offset", "max"), ("record_ts", "max"),
    ])  # fmt: skip
    total = g["records_sum"]
    p50 = pc.if_else(
        pc.greater(total, 0), pc.divide(g["weighted_sum"], pc.cast(total, pa.float64())), None
    )
    columns = {
        **{k: g[k] for k in _KEYS},
        "records": total, "bytes": g["bytes_sum"], "batches": g["records_count"],
        "latency_ms_p50": p50, "latency_ms_p99": g["latency_ms_p99_max"],
        "latency_ms_max": g["latency_ms_max_max"], "lag": g["lag_last"],
        "upstream_last": g["upstream_last_last"], "ts": g["ts_last"],
        "first_ts": g["ts_min"],
        "kafka_offset": g["kafka_offset_max"], "record_ts": g["record_ts_max"],
    }  # fmt: skip
    return pa.table({f.name: pc.cast(columns[f.name], f.type) for f in schema}, schema=schema)
