"""What a run did, from the materialized Delta tables of its time window (no Spark needed).

:func:`window_metrics` reads ``replication_metrics``, ``heartbeats`` and ``checkpoints`` with
:func:`mirror_lib.tables.health.read_rows` (either writer) and returns summary metrics plus the
lag history as MLflow-style points ``(key, value, timestamp ms, step)``; used by
:mod:`mirror_lib.app.tracking`. Stale records skipped on purpose (``skip`` events of
``flow_events``) are counted as ``records_skipped``/``bytes_skipped``. :func:`summarize`,
:func:`skip_totals` and :func:`lag_series` are pure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.tables.health import TIMESTAMPS, last_seen, latency, order, read_rows

MAX_LAG_POINTS = 1000  # lag history: one point per second, coarser on long runs
Series = list[tuple[str, float, int, int]]  # metric points: (key, value, timestamp ms, step)
Row = dict[str, Any]


def summarize(
    metrics: list[Row],
    heartbeats: list[Row],
    checkpoints: list[Row],
    flows: Sequence[tuple[str, str, str]],
    started_ms: float,
    ended_ms: float,
) -> tuple[dict[str, float], Series]:
    """Summary metrics and lag history of ``flows`` ((name, source, target)) in the window."""
    names = {name for name, _s, _t in flows}
    rows = sorted((m for m in metrics if m["flow"] in names and m["_ms"] is not None), key=order)
    window = [m for m in rows if started_ms <= m["_ms"] <= ended_ms]
    seconds = max((ended_ms - started_ms) / 1000, 1e-3)
    records = sum(m["records"] or 0 for m in window)
    out = {
        "duration_seconds": seconds,
        "records": float(records),
        "bytes": float(sum(m["bytes"] or 0 for m in window)),
        "records_per_second": records / seconds,
    }
    if len(window) > 1 and window[-1]["_ms"] - window[0]["_ms"] >= 1000:
        out["records_per_second_replicating"] = records / (
            (window[-1]["_ms"] - window[0]["_ms"]) / 1000  # first to last chunk
        )
    out.update(latency(window))  # the same definitions as mirror status and the SQL views
    pairs = {(s, t) for _n, s, t in flows}
    for kind, table, hops in (("heartbeat", heartbeats, True), ("checkpoint", checkpoints, False)):
        if last := last_seen(table, pairs, ended_ms, hops):  # the stalest flow
            out[f"{kind}_age_seconds"] = (ended_ms - min(last.values())) / 1000
    before = [m for m in rows if m["_ms"] < started_ms]
    return out, lag_series(before, window, started_ms, ended_ms)


def skip_totals(
    flow_events: list[Row], flow_names: Sequence[str], started_ms: float, ended_ms: float
) -> dict[str, float]:
    """Records, bytes and ranges skipped as stale by ``flow_names`` in the window (``skip``
    events, as :func:`~mirror_lib.tables.health.read_rows` gives them, with ``_ms``)."""
    names = set(flow_names)
    records = size = ranges = 0
    for e in flow_events:
        ms = e["_ms"]
        if e["type"] != "skip" or e["flow"] not in names or ms is None:
            continue
        if started_ms <= ms <= ended_ms:
            details = json.loads(e["details"] or "{}")
            records += int(details.get("records") or 0)
            size += int(details.get("bytes") or 0)
            ranges += 1
    return {"records_skipped": float(records), "bytes_skipped": float(size), "skips": float(ranges)}


def lag_series(before: list[Row], window: list[Row], started_ms: float, ended_ms: float) -> Series:
    """Total lag (latest per partition) over time: one point per bucket of >= 1 s, and the end."""
    latest = {(m["flow"], m["topic"], m["partition"]): m["lag"] or 0 for m in before}
    total = sum(latest.values())
    bucket_ms = max(1000, math.ceil((ended_ms - started_ms) / MAX_LAG_POINTS))

    def step(ms: float) -> int:  # seconds since the start, at bucket granularity
        return int((ms - started_ms) // bucket_ms * bucket_ms // 1000)

    points: Series = []
    for m in window:
        key = (m["flow"], m["topic"], m["partition"])
        total += (m["lag"] or 0) - latest.get(key, 0)
        latest[key] = m["lag"] or 0
        if points and points[-1][3] == step(m["_ms"]):
            points.pop()
        points.append(("lag", float(total), int(m["_ms"]), step(m["_ms"])))
    if latest and (not points or points[-1][3] < step(ended_ms)):
        points.append(("lag", float(total), int(ended_ms), step(ended_ms)))
    return points


def window_metrics(
    config: MirrorConfig,
    flow_names: Sequence[str],
    started_ms: float,
    ended_ms: float,
    spark: Any = None,
) -> tuple[dict[str, float], Series]:
    """:func:`summarize` over the materialized tables of ``config``."""
    flows = [(f.name, f.mm2_source, f.mm2_target) for f in map(config.flow, flow_names)]
    t = {name: read_rows(config, name, spark) for name in TIMESTAMPS}
    summary, series = summarize(
        t["replication_metrics"], t["heartbeats"], t["checkpoints"], flows, started_ms, ended_ms
    )
    summary.update(skip_totals(t["flow_events"], flow_names, started_ms, ended_ms))
    return summary, series
