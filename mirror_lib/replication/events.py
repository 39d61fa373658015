"""Flow events and metrics records on the target's metrics topic
(docs/design.md#d8-metrics-are-data).

Records are JSON values keyed by ``<remote topic>:<partition>`` (or the flow name for flow-level
events). ``type`` is one of ``batch`` (per partition per transaction chunk), ``gap``, ``skip``
(stale records left out on purpose, :mod:`mirror_lib.config.stale`), ``start``, ``stop``, ``error``.
Schemas are documented in docs/how-it-works.md#metrics-records.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mirror_lib.kafka.admin_ops import NewTopicSpec
from mirror_lib.replication.context import FlowContext, produce_plain

if TYPE_CHECKING:
    from mirror_lib.kafka.admin import KafkaAdminOps

log = logging.getLogger(__name__)

LEFT_OUT_S = 3.0  # what telling a fan-out target's failure may hold up the other targets
_told_left_out: set[tuple[str, str]] = set()


def now_ms() -> int:
    return int(time.time() * 1000)


def flow_event(ctx: FlowContext, kind: str, **fields: Any) -> dict[str, Any]:
    """A flow-level event (start, stop, error)."""
    return {
        "type": kind,
        "flow": ctx.flow.name,
        "source": ctx.source,
        "target": ctx.target,
        "ts_ms": now_ms(),
        **fields,
    }


def gap_event(
    ctx: FlowContext,
    topic: str,
    partition: int,
    position: int | None,
    earliest: int,
    latest: int,
    reason: str,
    action: str,
) -> dict[str, Any]:
    """A vanished source range: where the flow was and what the source holds now."""
    return flow_event(
        ctx,
        "gap",
        topic=topic,
        remote_topic=ctx.remote_topic(topic),
        partition=partition,
        expected_offset=position,
        available_start=earliest,
        available_end=latest,
        reason=reason,
        action=action,
    )


def left_out(ctx: FlowContext, exc: BaseException) -> None:
    """An ``error`` event (action ``left_out``) for a fan-out target that failed for good while
    the others go on, so an alert on ``flow_events`` ``type = 'error'`` sees it. Once per
    process and cause; best effort, as the target may be what fails."""
    lines = str(exc).strip().splitlines()
    reason = lines[0] if lines else type(exc).__name__
    if (ctx.flow.name, reason) in _told_left_out:
        return
    _told_left_out.add((ctx.flow.name, reason))
    event = flow_event(
        ctx, "error", reason=reason, action="left_out", error_type=type(exc).__name__,
        transient=False,
    )  # fmt: skip
    try:
        publish(ctx, [event], timeout_s=LEFT_OUT_S)
    except Exception as err:  # the target refused the event too: its ERROR line still says it
        log.warning("%s: its error event was not written (%s)", ctx.flow.name, err)


def encode(event: dict[str, Any]) -> tuple[bytes, bytes]:
    """(key, value) bytes of an event record."""
    if "partition" in event and "remote_topic" in event:
        key = f"{event['remote_topic']}:{event['partition']}"
    else:
        key = event["flow"]
    return key.encode(), json.dumps(event, separators=(",", ":")).encode()


def publish(ctx: FlowContext, events: Iterable[dict[str, Any]], timeout_s: float = 30) -> None:
    """Write events outside any transaction (planner-side events such as gaps)."""
    produce_plain(
        ctx, "target", ctx.metrics_topic, [encode(e) for e in events], timeout_s=timeout_s
    )


def ensure_metrics_topic(ctx: FlowContext, timeout_s: float | None = None) -> KafkaAdminOps:
    """Create the flow's metrics topic on the target (idempotent, as MM2 creates its own)."""
    target = ctx.admin_ops("target", timeout_s)
    spec = NewTopicSpec(
        ctx.metrics_topic,
        1,
        ctx.settings.offset_syncs_replication_factor,
        {"cleanup.policy": "delete", "retention.ms": str(ctx.settings.metrics_retention_ms)},
    )
    target.create_topics([spec])
    return target


def ensure_internal_topics(ctx: FlowContext) -> None:
    """Create the flow's metrics and offset-syncs topics (idempotent, as MM2 creates its own)."""
    s = ctx.settings
    target = ensure_metrics_topic(ctx)
    if s.emit_offset_syncs:
        side = "target" if ctx.offset_syncs_on_target else "source"
        admin = target if side == "target" else ctx.admin_ops(side)
        admin.create_compacted_topic(ctx.offset_syncs_topic, s.offset_syncs_replication_factor)
