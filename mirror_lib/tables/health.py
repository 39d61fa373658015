"""One health computation over the materialized tables, whichever writer holds them.

``mirror status``, notebook 02's status cell and :mod:`mirror_lib.tables.run_metrics` (MLflow) read
the
tables with :func:`read_rows` (delta-rs files locally; Delta's Spark writer, e.g. Unity Catalog
tables on Databricks) and aggregate with the functions below. The SQL views
(:mod:`mirror_lib.spark.views`) state the same definitions in SQL, and a test holds both to agree:

* latency p50: the record-weighted mean of the chunks' p50; p99 and max: the worst chunk's;
* lag: the sum over partitions of each partition's latest lag (latest by ts, then upstream_last);
* checkpoint and heartbeat age: now minus the newest record of the pair (heartbeats: hops = 0);
* error: the flow's newest ``error`` event since its newest ``start`` (a run that failed, or a
  fan-out target left out while the others go on), or None.

``records``, ``latency_ms_p50``/``p99`` are over the history :func:`flow_health` reads (the last
hour, :data:`HEALTH_WINDOW_S`; the views: all history) and ``records_per_second`` over the last
60 s; the ``window_*`` figures are over one window that ``mirror status``
names (default the last 5 minutes, :data:`STATUS_WINDOW_S`), so one slow start does not set the
p99 for good.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.tables.location import (
    catalog_tables,
    spark_table_exists,
    spark_table_name,
    spark_writer_expected,
    spark_writes_tables,
    tables_root,
)

Row = dict[str, Any]
#: The window of ``mirror status``'s figures by default (records, rec/s, p50/p99): 5 minutes.
STATUS_WINDOW_S = 300.0
#: Table -> timestamp column that becomes ``_ms`` (epoch ms) in :func:`read_rows`.
TIMESTAMPS = {
    "replication_metrics": "ts",
    "heartbeats": "heartbeat_ts",
    "checkpoints": "record_ts",
    "flow_events": "ts",
}


def tables_spark(config: MirrorConfig, spark: Any = None) -> Any:
    """The Spark session holding the tables when Delta's Spark writer does, else None.

    Tables outside a catalog are read through delta-rs whichever writer wrote them (the same
    folders), so ``mirror status`` starts Spark only for catalog tables (Databricks, or
    ``mirror.tables.schema`` with Spark's writer).
    """
    if not catalog_tables(config):
        return None
    if spark is None and spark_writer_expected(config):
        # lazy: pyspark, only for Spark-writer tables
        from mirror_lib.spark.session import command_session

        spark = command_session(config)
    return spark if spark_writes_tables(spark, config) else None


def read_rows(
    config: MirrorConfig,
    name: str,
    spark: Any = None,
    *,
    since_ms: float | None = None,
    columns: Sequence[str] | None = None,
) -> list[Row]:
    """Rows of a table with ``_ms`` = its timestamp column in epoch ms (either writer; none
    while the table does not exist yet).

    ``since_ms``: only rows at or after it, and ``columns``: only these (plus ``_ms``), both
    pushed down to the files: delta-rs skips the files and row groups whose statistics say
    they hold nothing newer, so a read of the last hour costs the last hour, not the month.
    """
    ts = TIMESTAMPS[name]
    spark = tables_spark(config, spark)
    if spark is not None:
        if not spark_table_exists(spark, config, name):
            return []
        df = spark.table(spark_table_name(config, name))
        if since_ms is not None:
            df = df.where(f"{ts} >= timestamp_millis({int(since_ms)})")
        picked = list(columns) if columns is not None else ["*"]
        df = df.selectExpr(*picked, f"unix_millis({ts}) AS _ms")
        return [r.asDict() for r in df.collect()]
    import pyarrow as pa  # lazy: optional extra "delta/spark"

    from mirror_lib.tables.delta_rs import read_table  # lazy: deltalake, pyarrow

    wanted = None if columns is None else sorted({*columns, ts})
    if since_ms is None and wanted is None:
        table = read_table(tables_root(config), name)
    else:
        table = _read_since(config, name, ts, since_ms, wanted)
    ms = table[ts].cast(pa.timestamp("ms", tz="UTC"), safe=False).cast(pa.int64())
    return table.append_column("_ms", ms).to_pylist()


def _read_since(
    config: MirrorConfig, name: str, ts: str, since_ms: float | None, columns: list[str] | None
) -> Any:
    """The rows of ``name`` since ``since_ms`` (all: None), with ``columns`` (all: None)."""
    import pyarrow as pa  # lazy: optional extra "delta/spark"
    import pyarrow.dataset as ds  # lazy: optional extra "delta/spark"
    from deltalake import DeltaTable  # lazy: optional extra "delta"

    from mirror_lib.tables.delta_rs import table_path  # lazy: deltalake, pyarrow
    from mirror_lib.tables.schemas import SCHEMAS

    path = table_path(tables_root(config), name)
    if not DeltaTable.is_deltatable(path):
        schema = SCHEMAS[name]
        return schema.empty_table().select(columns) if columns else schema.empty_table()
    dataset = DeltaTable(path).to_pyarrow_dataset()
    where = None
    if since_ms is not None:
        since = pa.scalar(int(since_ms), pa.timestamp("ms", tz="UTC"))
        where = ds.field(ts) >= since.cast(dataset.schema.field(ts).type)
    return dataset.to_table(columns=columns, filter=where)


def latency(rows: Iterable[Row]) -> dict[str, float]:
    """``latency_ms_p50`` (record-weighted mean), ``latency_ms_p99``/``_max`` (worst chunk)."""
    rows = list(rows)
    out: dict[str, float] = {}
    p50 = [
        (m["latency_ms_p50"], m["records"] or 0) for m in rows if m["latency_ms_p50"] is not None
    ]
    if weight := sum(w for _v, w in p50):
        out["latency_ms_p50"] = sum(v * w for v, w in p50) / weight
    for key in ("latency_ms_p99", "latency_ms_max"):
        if values := [m[key] for m in rows if m[key] is not None]:
            out[key] = max(values)
    return out


def order(m: Row) -> tuple[float, int]:
    """Order of metrics rows: by time, then by the source offset they reached."""
    return (m["_ms"] or 0, m["upstream_last"] or 0)


def latest_lag(rows: Iterable[Row]) -> dict[tuple[str, str, int], int]:
    """(flow, topic, partition) -> the partition's latest lag."""
    latest: dict[tuple[str, str, int], int] = {}
    for m in sorted(rows, key=order):
        latest[(m["flow"], m["topic"], m["partition"])] = m["lag"] or 0
    return latest


def last_seen(
    rows: Iterable[Row], pairs: set[tuple[str, str]], until_ms: float, hops: bool
) -> dict[tuple[str, str], int]:
    """(source, target) -> newest ``_ms`` up to ``until_ms`` (heartbeats: hops = 0 only)."""
    last: dict[tuple[str, str], int] = {}
    for r in rows:
        pair = (r["source"], r["target"])
        fresh = r["_ms"] is not None and r["_ms"] <= until_ms and (not hops or r["hops"] == 0)
        if pair in pairs and fresh:
            last[pair] = max(last.get(pair, 0), r["_ms"])
    return last


def _iso(ms: float) -> str:
    """Epoch ms as an ISO-8601 UTC time."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat()


def last_error(events: Iterable[Row], flow: str) -> str | None:
    """The flow's newest ``error`` event since its newest ``start`` event, as a line: when,
    what became of the flow (``failed``: its run; ``left_out``: a fan-out target), and why."""
    mine = [e for e in events if e["flow"] == flow and e["_ms"] is not None]
    started = max((e["_ms"] for e in mine if e["type"] == "start"), default=None)
    errors = [e for e in mine if e["type"] == "error" and (started is None or e["_ms"] >= started)]
    if not errors:
        return None
    newest = max(errors, key=lambda e: e["_ms"])
    action, reason = newest["action"] or "error", newest["reason"] or "(no reason given)"
    return f"{_iso(newest['_ms'])} {action}: {reason}"


@dataclass
class FlowHealth:
    """What ``mirror status`` prints for one flow (None: no data yet)."""

    flow: str
    last_batch: str | None
    records: int
    records_per_second: float | None
    lag: int | None
    latency_ms_p50: float | None
    latency_ms_p99: float | None
    checkpoint_age_seconds: float | None
    heartbeat_age_seconds: float | None
    outage: str | None = None  # what a live run of this flow is waiting for, if anything
    #: the outages' causes, for alerts: unreachable, not_enough_replicas, no_leader, ...
    outage_cause: str | None = None
    error: str | None = None  # its newest error since its newest start (last_error)
    #: the window the ``window_*`` figures are over, ending now (seconds)
    window_seconds: float | None = None
    window_records: int | None = None
    window_records_per_second: float | None = None
    window_latency_ms_p50: float | None = None
    window_latency_ms_p99: float | None = None

    @property
    def has_data(self) -> bool:
        """Whether any run wrote figures of this flow (a batch, a checkpoint or a heartbeat)."""
        seen = (self.last_batch, self.checkpoint_age_seconds, self.heartbeat_age_seconds)
        return any(v is not None for v in seen)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def health(
    metrics: list[Row],
    checkpoints: list[Row],
    heartbeats: list[Row],
    flows: Sequence[tuple[str, str, str]],
    now_ms: float,
    events: Sequence[Row] = (),
    window_s: float = STATUS_WINDOW_S,
) -> list[FlowHealth]:
    """Health of ``flows`` ((name, source, target)) from all rows of the tables; the
    ``window_*`` figures over the ``window_s`` seconds up to ``now_ms``."""
    out = []
    for name, source, target in flows:
        rows = [m for m in metrics if m["flow"] == name and m["_ms"] is not None]
        lags = latest_lag(rows)
        recent = [m for m in rows if now_ms - m["_ms"] <= 60_000]
        lat = latency(rows)
        window = [m for m in rows if 0 <= now_ms - m["_ms"] <= window_s * 1000]
        in_window = latency(window)
        window_records = sum(m["records"] or 0 for m in window)
        cps = last_seen(checkpoints, {(source, target)}, now_ms, hops=False)
        hbs = last_seen(heartbeats, {(source, target)}, now_ms, hops=True)
        last_ms = max((m["_ms"] for m in rows), default=None)
        out.append(
            FlowHealth(
                flow=name,
                last_batch=None if last_ms is None else _iso(last_ms),
                records=sum(m["records"] or 0 for m in rows),
                records_per_second=sum(m["records"] or 0 for m in recent) / 60.0 if rows else None,
                lag=sum(lags.values()) if lags else None,
                latency_ms_p50=lat.get("latency_ms_p50"),
                latency_ms_p99=lat.get("latency_ms_p99"),
                checkpoint_age_seconds=(now_ms - max(cps.values())) / 1000 if cps else None,
                heartbeat_age_seconds=(now_ms - max(hbs.values())) / 1000 if hbs else None,
                error=last_error(events, name),
                window_seconds=window_s,
                window_records=window_records,
                window_records_per_second=window_records / window_s,
                window_latency_ms_p50=in_window.get("latency_ms_p50"),
                window_latency_ms_p99=in_window.get("latency_ms_p99"),
            )
        )
    return out


#: How far back ``mirror status`` reads the metrics: its records, rate, latency and lag are
#: those of this window, so that it answers in a second over months of history.
HEALTH_WINDOW_S = 3600.0
_METRICS = ("flow", "topic", "partition", "records", "lag", "upstream_last", "latency_ms_p50",
            "latency_ms_p99", "latency_ms_max")  # fmt: skip
_PAIRS = {"checkpoints": ("source", "target"), "heartbeats": ("source", "target", "hops")}
_EVENTS = ("type", "flow", "action", "reason")


def flow_health(
    config: MirrorConfig,
    now_ms: float | None = None,
    spark: Any = None,
    window_s: float = STATUS_WINDOW_S,
    history_s: float | None = HEALTH_WINDOW_S,
) -> list[FlowHealth]:
    """Health of every enabled flow of ``config`` from its tables (either writer).

    Records, rate, latency and lag come from the metrics of the last ``history_s`` (None: all
    history), the ``window_*`` figures from the last ``window_s`` of them; checkpoint and
    heartbeat ages from their newest rows, found in that read or, for a pair quiet longer, in a
    read of only the columns that say so."""
    spark = tables_spark(config, spark)
    now = time.time() * 1000.0 if now_ms is None else now_ms
    since = None if history_s is None else now - max(history_s, window_s) * 1000
    flows = [(f.name, f.mm2_source, f.mm2_target) for f in config.enabled_flows()]  # as in MM2
    metrics = read_rows(config, "replication_metrics", spark, since_ms=since, columns=_METRICS)
    pairs = {}
    for name, columns in _PAIRS.items():
        rows = read_rows(config, name, spark, since_ms=since, columns=columns)
        found = {(r["source"], r["target"]) for r in rows}
        if since is not None and any((s, t) not in found for _n, s, t in flows):
            rows = read_rows(config, name, spark, columns=columns)  # a pair quiet for longer
        pairs[name] = rows
    events = read_rows(config, "flow_events", spark, columns=_EVENTS)
    return health(metrics, pairs["checkpoints"], pairs["heartbeats"], flows, now, events, window_s)
