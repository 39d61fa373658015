"""Per-flow status from the Delta tables: last batch, rate, lag, latency, checkpoint/heartbeat age.

The numbers come from :mod:`mirror_lib.health`, which reads whichever writer holds the tables:
delta-rs files directly (no Spark start-up, so ``mirror status`` answers in a second) or Delta's
Spark writer (Unity Catalog tables on Databricks).
"""

from __future__ import annotations

from typing import Any

from mirror_lib.config import MirrorConfig
from mirror_lib.health import FlowHealth, flow_health

__all__ = ["FlowHealth", "flow_status", "format_status"]


def flow_status(
    config: MirrorConfig, now_ms: float | None = None, spark: Any = None
) -> list[FlowHealth]:
    """Health of every enabled flow, computed from the materialized tables (either writer)."""
    return flow_health(config, now_ms, spark)


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
    return "\n".join(lines)
