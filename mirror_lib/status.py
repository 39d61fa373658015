"""Per-flow status from the Delta tables: last batch, rate, lag, latency, checkpoint/heartbeat age.

Reads the delta-rs tables directly (no Spark start-up), so ``mirror status`` answers in a second.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from mirror_lib.config import MirrorConfig


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ms(value: Any) -> float:
    return value.timestamp() * 1000.0


def flow_status(config: MirrorConfig, now_ms: float | None = None) -> list[FlowHealth]:
    """Health of every enabled flow, computed from the materialized tables."""
    from mirror_lib.delta_store import read_table
    from mirror_lib.materialize import tables_root

    root = tables_root(config)
    now_ms = time.time() * 1000.0 if now_ms is None else now_ms
    metrics = read_table(root, "replication_metrics").to_pylist()
    checkpoints = read_table(root, "checkpoints").to_pylist()
    heartbeats = read_table(root, "heartbeats").to_pylist()
    out = []
    for flow in config.enabled_flows():
        rows = [m for m in metrics if m["flow"] == flow.name]
        latest: dict[tuple[str, int], dict[str, Any]] = {}
        for m in rows:
            key = (m["topic"], m["partition"])
            if key not in latest or (m["ts"], m["upstream_last"]) > (
                latest[key]["ts"],
                latest[key]["upstream_last"],
            ):
                latest[key] = m
        recent = [m for m in rows if m["ts"] and now_ms - _ms(m["ts"]) <= 60_000]
        weighted = sum((m["latency_ms_p50"] or 0) * m["records"] for m in rows)
        total = sum(m["records"] for m in rows)
        cps = [
            c["record_ts"]
            for c in checkpoints
            if (c["source"], c["target"]) == (flow.source, flow.target) and c["record_ts"]
        ]
        hbs = [
            h["heartbeat_ts"]
            for h in heartbeats
            if (h["source"], h["target"], h["hops"]) == (flow.source, flow.target, 0)
        ]
        p99 = [m["latency_ms_p99"] for m in rows if m["latency_ms_p99"] is not None]
        out.append(FlowHealth(
            flow=flow.name,
            last_batch=max(m["ts"] for m in rows).isoformat() if rows else None,
            records=total,
            records_per_second=sum(m["records"] for m in recent) / 60.0 if rows else None,
            lag=sum(m["lag"] or 0 for m in latest.values()) if latest else None,
            latency_ms_p50=weighted / total if total else None,
            latency_ms_p99=max(p99) if p99 else None,
            checkpoint_age_seconds=(now_ms - _ms(max(cps))) / 1000 if cps else None,
            heartbeat_age_seconds=(now_ms - _ms(max(hbs))) / 1000 if hbs else None,
        ))  # fmt: skip
    _add_outages(config, out)
    return out


def _add_outages(config: MirrorConfig, rows: list[FlowHealth]) -> None:
    """Outages a live `mirror run` on this state folder is waiting through right now."""
    from mirror_lib.supervise import current_outages

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
    return "\n".join(lines)
