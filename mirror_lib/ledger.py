"""The delivery ledger on the target (D3): per remote partition, the next upstream offset.

It is the committed offset of the flow's ledger group on ``(remote topic, partition)``, written
in the same transaction as the records, so after any crash it says exactly what was delivered.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError
from mirror_lib.flow import FlowContext


def ledger_consumer(ctx: FlowContext, slot: int) -> Consumer:
    """A consumer of the slot's ledger group on the target that never joins the group."""
    return Consumer(
        ctx.client(
            "target",
            "consumer",
            **{
                "group.id": ctx.ledger_group(slot),
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )


def read_ledger(
    consumer: Consumer, remote_partitions: Iterable[tuple[str, int]], timeout_s: float = 60
) -> dict[tuple[str, int], int]:
    """Next upstream offset per remote partition that has a ledger entry.

    A partition answered with an error (e.g. UNSTABLE_OFFSET_COMMIT while a fenced transaction
    is still being aborted) is asked again; it is never taken as "nothing delivered", which
    would copy records twice. Still failing after ``timeout_s``: a transient BrokerError.
    """
    tps = [TopicPartition(t, p) for t, p in sorted(set(remote_partitions))]
    if not tps:
        return {}
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            committed = consumer.committed(tps, timeout=timeout_s)
        except KafkaException as exc:
            err = exc.args[0]
            raise BrokerError(f"reading the delivery ledger failed: {err}", transient=True) from exc
        failed = [tp for tp in committed if tp.error is not None]
        if not failed:
            return {(tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0}
        if time.monotonic() > deadline:
            raise BrokerError(
                f"the delivery ledger of {failed[0].topic}[{failed[0].partition}] did not "
                f"become readable in {timeout_s:.0f}s ({failed[0].error}); nothing was copied",
                transient=True,
            )
        time.sleep(0.2)


def ledger_offsets(next_upstream: dict[tuple[str, int], int]) -> list[Any]:
    """TopicPartitions to commit for ``{(remote topic, partition): next upstream offset}``."""
    return [TopicPartition(t, p, off) for (t, p), off in sorted(next_upstream.items())]
