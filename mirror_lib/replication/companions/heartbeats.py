"""Heartbeats as MM2 writes them (docs/mm2-reference.md#how-mm2-runs): flow A->B writes key (A, B)
to ``heartbeats`` on B, partition 0. A->B replicates A's own ``heartbeats`` topic (written by B->A,
or by any flow into A) as ``A.heartbeats``, so chains such as ``B.A.heartbeats`` appear downstream.
"""

from __future__ import annotations

import time

from mirror_lib.errors import BrokerError
from mirror_lib.mm2.formats import Heartbeat
from mirror_lib.replication.context import FlowContext

_READY: set[tuple[str, str]] = set()


def ensure_heartbeats_topic(ctx: FlowContext) -> None:
    """Create ``heartbeats`` on the target (1 partition, compacted), once per process."""
    key = (ctx.target, ctx.config.cluster(ctx.target).bootstrap_servers)
    if key in _READY:
        return
    admin = ctx.admin_ops("target")
    admin.create_compacted_topic(
        ctx.policy.heartbeats_topic(), ctx.settings.heartbeats_replication_factor
    )
    _READY.add(key)


def emit_heartbeat(ctx: FlowContext, timeout_s: float = 30) -> int:
    """Write one Heartbeat(source, target, now) to the target's heartbeats topic."""
    beater = Heartbeater(ctx)
    try:
        return beater.emit(timeout_s)
    finally:
        beater.close()


class Heartbeater:
    """Emits a flow's heartbeats with one long-lived producer (a heartbeat every second)."""

    def __init__(self, ctx: FlowContext) -> None:
        from confluent_kafka import Producer  # lazy: optional extra "kafka"

        self.ctx = ctx
        self.producer = Producer(ctx.producer("target"))

    def emit(self, timeout_s: float = 30) -> int:
        """Write one heartbeat and wait for its acknowledgement."""
        ensure_heartbeats_topic(self.ctx)
        now = int(time.time() * 1000)
        beat = Heartbeat(self.ctx.flow.mm2_source, self.ctx.flow.mm2_target, now)  # as MM2
        self.producer.produce(
            self.ctx.policy.heartbeats_topic(), beat.value(), beat.key(), partition=0, timestamp=now
        )
        if self.producer.flush(timeout_s) > 0:
            raise BrokerError(
                f"{self.ctx.label}: {self.ctx.where('target')} did not acknowledge a heartbeat "
                f"in {timeout_s:.0f}s",
                transient=True,
            )
        return 1

    def close(self) -> None:
        self.producer.flush(5)
