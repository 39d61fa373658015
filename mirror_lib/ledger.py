"""The delivery ledger on the target (D3): per remote partition, the next upstream offset.

It is the committed offset of the flow's ledger group on ``(remote topic, partition)``, written
in the same transaction as the records, so after any crash it says exactly what was delivered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError
from mirror_lib.flow import FlowContext


def ledger_consumer(ctx: FlowContext) -> Consumer:
    """A consumer of the ledger group on the target that never joins the group."""
    return Consumer(
        ctx.client(
            "target",
            "consumer",
            **{
                "group.id": ctx.ledger_group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )


def read_ledger(
    consumer: Consumer, remote_partitions: Iterable[tuple[str, int]], timeout_s: float = 30
) -> dict[tuple[str, int], int]:
    """Next upstream offset per remote partition that has a ledger entry."""
    tps = [TopicPartition(t, p) for t, p in sorted(set(remote_partitions))]
    if not tps:
        return {}
    try:
        committed = consumer.committed(tps, timeout=timeout_s)
    except KafkaException as exc:
        err = exc.args[0]
        raise BrokerError(f"reading the delivery ledger failed: {err}", transient=True) from exc
    return {(tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0}


def ledger_offsets(next_upstream: dict[tuple[str, int], int]) -> list[Any]:
    """TopicPartitions to commit for ``{(remote topic, partition): next upstream offset}``."""
    return [TopicPartition(t, p, off) for (t, p), off in sorted(next_upstream.items())]
