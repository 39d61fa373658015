"""Per-flow status from the Delta tables: last batch, rate, lag, latency, checkpoint/heartbeat age.

The numbers come from :mod:`mirror_lib.tables.health`, which reads whichever writer holds the
tables:
delta-rs files directly (no Spark start-up, so ``mirror status`` answers in a second) or Delta's
Spark writer (Unity Catalog tables on Databricks).
"""

from __future__ import annotations

import time
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.replication.companions.supervise import current_outages
from mirror_lib.tables.health import FlowHealth, flow_health

__all__ = ["FlowHealth", "flow_status", "format_status"]


def flow_status(
    config: MirrorConfig, now_ms: float | None = None, spark: Any = None
) -> list[FlowHealth]:
    """Health of every enabled flow from the materialized tables (either writer), plus any
    outage a live run on this state folder is waiting through."""
    rows = flow_health(config, now_ms, spark)
    _add_outages(config, rows)
    return rows


def _add_outages(config: MirrorConfig, rows: list[FlowHealth]) -> None:
    """Outages a live `mirror run` on this state folder is waiting through right now."""
    now = time.time() * 1000.0
    for row in rows:
        waits = [o for o in current_outages(config) if o.get("flow") == row.flow]
        row.outage = (
            "; ".join(
                f"{o['query']} waiting for {o['role']} cluster {o['cluster']} (bootstrap "
                f"{o['bootstrap']}) for {(now - o['started_ms']) / 1000:.0f}s: {o['reason']}"
                for o in waits
            )
            or None
        )


def format_status(rows: list[FlowHealth]) -> str:
    """A small table for terminals."""

    def show(value: Any, fmt: str = "{}") -> str:
        return "-" if value is None else fmt.format(value)

    lines = [
        f"{'flow':<10} {'last batch':<26} {'records':>9} {'rec/s':>8} {'lag':>8} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'ckpt age':>9} {'hb age':>8}"
    ]
    for r in rows:
        lines.append(
            f"{r.flow:<10} {show(r.last_batch):<26} {r.records:>9} "
            f"{show(r.records_per_second, '{:.1f}'):>8} {show(r.lag):>8} "
            f"{show(r.latency_ms_p50, '{:.0f}'):>8} {show(r.latency_ms_p99, '{:.0f}'):>8} "
            f"{show(r.checkpoint_age_seconds, '{:.0f}s'):>9} "
            f"{show(r.heartbeat_age_seconds, '{:.0f}s'):>8}"
        )
    lines += [f"{r.flow}: outage: {r.outage}" for r in rows if r.outage]
    lines += [f"{r.flow}: error: {r.error}" for r in rows if r.error]
    return "\n".join(lines)
