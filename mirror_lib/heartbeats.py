"""Heartbeats as MM2 writes them (mm2.md §0, §1.3): flow A->B writes key (A, B) to ``heartbeats``
on B, partition 0. A->B replicates A's own ``heartbeats`` topic (written by B->A, or by any flow
into A) as ``A.heartbeats``, so chains such as ``B.A.heartbeats`` appear downstream.
"""

from __future__ import annotations

import time

from mirror_lib.errors import BrokerError
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


def _beat(ctx: FlowContext) -> tuple[int, Heartbeat]:
    now = int(time.time() * 1000)
    return now, Heartbeat(ctx.source, ctx.target, now)


def emit_heartbeat(ctx: FlowContext, timeout_s: float = 30) -> int:
    """Write one Heartbeat(source, target, now) to the target's heartbeats topic."""
    ensure_heartbeats_topic(ctx)
    now, beat = _beat(ctx)
    produce_plain(
        ctx,
        "target",
        ctx.policy.heartbeats_topic(),
        [(beat.key(), beat.value())],
        timestamp=now,
        timeout_s=timeout_s,
    )
    return 1


class Heartbeater:
    """Emits a flow's heartbeats with one long-lived producer (a heartbeat every second)."""

    def __init__(self, ctx: FlowContext) -> None:
        from confluent_kafka import Producer

        self.ctx = ctx
        self.producer = Producer(ctx.client("target", "producer", **{"enable.idempotence": True}))

    def emit(self, timeout_s: float = 30) -> int:
        """Write one heartbeat and wait for its acknowledgement."""
        ensure_heartbeats_topic(self.ctx)
        now, beat = _beat(self.ctx)
        self.producer.produce(
            self.ctx.policy.heartbeats_topic(), beat.value(), beat.key(), partition=0, timestamp=now
        )
        if self.producer.flush(timeout_s) > 0:
            raise BrokerError(
                f"heartbeats on {self.ctx.target} did not acknowledge records in {timeout_s:.0f}s",
                transient=True,
            )
        return 1

    def close(self) -> None:
        self.producer.flush(5)
