"""Heartbeats as MM2 writes them (mm2.md §0, §1.3): flow A->B writes key (A, B) to ``heartbeats``
on B, partition 0. A->B replicates A's own ``heartbeats`` topic (written by B->A, or by any flow
into A) as ``A.heartbeats``, so chains such as ``B.A.heartbeats`` appear downstream.
"""

from __future__ import annotations

import time

from mirror_lib.flow import FlowContext, produce_plain
from mirror_lib.formats import Heartbeat

_READY: set[tuple[str, str]] = set()


def ensure_heartbeats_topic(ctx: FlowContext) -> None:
    """Create ``heartbeats`` on the target (1 partition, compacted), once per process."""
    from mirror_lib.admin import KafkaAdminOps

    key = (ctx.target, ctx.config.cluster(ctx.target).bootstrap_servers)
    if key in _READY:
        return
    admin = KafkaAdminOps(ctx.client("target", "admin"))
    admin.create_compacted_topic(
        ctx.policy.heartbeats_topic(), ctx.settings.heartbeats_replication_factor
    )
    _READY.add(key)


def emit_heartbeat(ctx: FlowContext, timeout_s: float = 30) -> int:
    """Write one Heartbeat(source, target, now) to the target's heartbeats topic."""
    ensure_heartbeats_topic(ctx)
    now = int(time.time() * 1000)
    beat = Heartbeat(ctx.source, ctx.target, now)
    produce_plain(
        ctx,
        "target",
        ctx.policy.heartbeats_topic(),
        [(beat.key(), beat.value())],
        timestamp=now,
        timeout_s=timeout_s,
    )
    return 1
