"""Per-minute rollups of the replication metrics, which the dashboards' time series read.

``replication_metrics`` holds a row per partition and commit: 2.4 million rows a day at
5,000 records/s over 4 partitions. Scanning a week of them takes seconds in Spark. Every
writer also appends ``metrics_per_minute``: one row per partition, minute and write, whatever
the rate (about two a minute, as the tables are written every 30 s). Each rollup row
re-aggregates exactly: ``records`` and ``bytes`` are sums, ``latency_ms_p50`` the
records-weighted mean, ``latency_ms_p99``/``latency_ms_max`` the maxima, and ``lag``,
``upstream_last`` and ``ts`` those of the minute's latest row, as the views use them
(:mod:`mirror_lib.spark.views`).

A rollup row carries the origin of the last metrics record it holds, so the table keeps
positions like every other (:mod:`mirror_lib.tables.positions`). Its rows are rolled up from
the metrics rows that the *rollup* table does not hold yet, so a replayed or overlapping batch
never counts a record twice.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mirror_lib.tables.schemas import SCHEMAS

#: Rollup table -> the table whose rows it rolls up.
ROLLUPS = {"metrics_per_minute": "replication_metrics"}

_ORIGIN_KEYS = ("cluster", "kafka_topic", "kafka_partition")
_KEYS = (*_ORIGIN_KEYS, "flow", "source", "target", "topic", "remote_topic", "partition", "minute")


def with_rollups(tables: dict[str, Any]) -> dict[str, Any]:
    """``tables`` with each rollup's entry replaced by its source's rows (a writer filters them
    by the rollup's positions, then :func:`rolled_up`): a rollup is only ever derived."""
    return {**tables, **{rollup: tables.get(source) for rollup, source in ROLLUPS.items()}}


def rolled_up(name: str, rows: pa.Table) -> pa.Table:
    """The rows to write to table ``name``: ``rows`` themselves, or their rollup."""
    return metrics_per_minute(rows) if name in ROLLUPS else rows


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
