"""Per-flow status from the Delta tables: last batch, rate, lag, latency, checkpoint/heartbeat age.

The numbers come from :mod:`mirror_lib.tables.health`, which reads whichever writer holds the
tables:
delta-rs files directly (no Spark start-up, so ``mirror status`` answers in a second) or Delta's
Spark writer (Unity Catalog tables on Databricks).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from mirror_lib.config.global_settings import global_setting
from mirror_lib.config.model import MirrorConfig
from mirror_lib.replication.companions.supervise import current_outages
from mirror_lib.tables.health import STATUS_WINDOW_S, FlowHealth, flow_health

__all__ = [
    "STATUS_WINDOW_S",
    "FlowHealth",
    "Thresholds",
    "alerts",
    "flow_status",
    "format_status",
    "format_window",
    "never_ran",
]


@dataclass(frozen=True)
class Thresholds:
    """What ``mirror status --max-lag/--max-age/--max-p99`` alert on (None: not checked)."""

    max_lag: int | None = None  # records behind, summed over the flow's partitions
    max_age_s: float | None = None  # checkpoint and heartbeat age
    max_p99_ms: float | None = None  # the window's latency p99

    def any(self) -> bool:
        return any(v is not None for v in (self.max_lag, self.max_age_s, self.max_p99_ms))


def flow_status(
    config: MirrorConfig,
    now_ms: float | None = None,
    spark: Any = None,
    window_s: float = STATUS_WINDOW_S,
) -> list[FlowHealth]:
    """Health of every enabled flow from the materialized tables (either writer), its
    ``window_*`` figures over the last ``window_s`` seconds, plus any outage a live run on this
    state folder is waiting through."""
    rows = flow_health(config, now_ms, spark, window_s)
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
                f"{o['bootstrap']}) for {(now - o['started_ms']) / 1000:.0f}s, "
                f"cause {o.get('cause', 'other')}: {o['reason']}"
                for o in waits
            )
            or None
        )
        row.outage_cause = ",".join(sorted({o.get("cause", "other") for o in waits})) or None


def alerts(row: FlowHealth, limits: Thresholds) -> list[str]:
    """What of ``row`` is past ``limits``, one phrase each; a figure that is asked about and
    has no value yet (no checkpoint, no batch in the window) counts too: an alert that waits for
    data would stay silent exactly when a flow never started."""
    out = []
    checks = (
        ("lag", row.lag, limits.max_lag, " records", "--max-lag", "no batch yet"),
        ("checkpoint age", row.checkpoint_age_seconds, limits.max_age_s, "s", "--max-age",
         "no checkpoint yet"),
        ("heartbeat age", row.heartbeat_age_seconds, limits.max_age_s, "s", "--max-age",
         "no heartbeat yet"),
        ("p99", row.window_latency_ms_p99, limits.max_p99_ms, " ms", "--max-p99",
         "no record copied in the window"),
    )  # fmt: skip
    for name, value, limit, unit, option, missing in checks:
        if limit is None:
            continue
        if value is None:
            out.append(f"{missing} ({option} {limit:g}{unit})")
        elif value > limit:
            out.append(f"{name} {value:.0f}{unit} > {option} {limit:g}{unit}")
    return out


def format_window(seconds: float) -> str:
    """``300`` -> ``5m``, ``90`` -> ``90s``, ``3600`` -> ``1h``: the window as headers name it."""
    for size, unit in ((3600, "h"), (60, "m")):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def never_ran(config: MirrorConfig) -> str:
    """The sentence ``mirror status`` prints when no run has written figures of any flow."""
    flows = ", ".join(f.name for f in config.enabled_flows()) or "none enabled"
    if not global_setting(config.properties, "mirror.tables.enabled"):
        return (
            f"nothing to report for {config.origin} (flows: {flows}): mirror.tables.enabled = "
            "false, so its runs write no tables, and mirror status reads its figures there"
        )
    return (
        f"nothing to report for {config.origin} (flows: {flows}): no run has written figures "
        f"to its tables under {config.state_dir} yet; start one with mirror run "
        f"{config.origin} (figures appear after its first batch)"
    )


def _show(value: Any, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def _time(iso: str | None) -> str:
    """An ISO-8601 UTC time as ``2026-09-21 14:13:25`` (the header says UTC)."""
    if iso is None:
        return "-"
    return datetime.fromisoformat(iso).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def format_status(rows: list[FlowHealth], limits: Thresholds | None = None) -> str:
    """A table for terminals, its columns as wide as their longest value: the window's figures
    under headers that name it, then a line per outage, error, flow without figures and alert."""
    window = next((r.window_seconds for r in rows if r.window_seconds), STATUS_WINDOW_S)
    w = format_window(window)
    columns = [
        ("flow", "<", lambda r: r.flow),
        ("last batch (UTC)", "<", lambda r: _time(r.last_batch)),
        (f"records/{w}", ">", lambda r: _show(r.window_records)),
        (f"rec/s/{w}", ">", lambda r: _show(r.window_records_per_second, "{:.1f}")),
        ("lag", ">", lambda r: _show(r.lag)),
        (f"p50 ms/{w}", ">", lambda r: _show(r.window_latency_ms_p50, "{:.0f}")),
        (f"p99 ms/{w}", ">", lambda r: _show(r.window_latency_ms_p99, "{:.0f}")),
        ("ckpt age", ">", lambda r: _show(r.checkpoint_age_seconds, "{:.0f}s")),
        ("hb age", ">", lambda r: _show(r.heartbeat_age_seconds, "{:.0f}s")),
    ]
    cells = [[str(get(r)) for _head, _align, get in columns] for r in rows]
    widths = [
        max([len(head), *(len(c[i]) for c in cells)]) for i, (head, _, _) in enumerate(columns)
    ]
    lines = [
        f"records, rec/s, p50 and p99: over the last {w}; lag, checkpoint (ckpt) and "
        "heartbeat (hb) age: the latest",
        "  ".join(f"{h:{a}{n}}" for (h, a, _), n in zip(columns, widths, strict=True)).rstrip(),
    ]
    for c in cells:
        aligned = (f"{v:{a}{n}}" for v, (_, a, _), n in zip(c, columns, widths, strict=True))
        lines.append("  ".join(aligned).rstrip())
    lines += [f"{r.flow}: outage: {r.outage}" for r in rows if r.outage]
    lines += [f"{r.flow}: error: {r.error}" for r in rows if r.error]
    silent = [r.flow for r in rows if not r.has_data]
    lines += [f"{flow}: no run has written figures of this flow yet" for flow in silent]
    if limits is not None and limits.any():
        lines += [f"{r.flow}: ALERT: {'; '.join(a)}" for r in rows if (a := alerts(r, limits))]
    return "\n".join(lines)
