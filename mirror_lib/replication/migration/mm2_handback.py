"""Handing a flow back to MirrorMaker 2 without copying anything again (``mirror hand-back``).

MM2 continues each partition from its Connect source offset (the last record it copied, +1).
So after ``mirror run`` has stopped, we write, per partition the flow replicates, the last
upstream offset our delivery ledger says was delivered into MM2's Connect offsets topic on
the target (``mm2-offsets.<A>.internal``), in MM2's exact bytes and on the partition MM2's
producer would choose (murmur2 of the key, as Java's default partitioner). Started on the same
``mm2.properties``, MM2 then copies from the first record we did not.

What it cannot carry over: MM2's checkpoint task reads offset syncs only from its own
``offset-syncs.topic.location`` (``source`` by default, ours is ``target``), so unless both are
set alike it does not see the syncs we wrote. Groups whose offsets lie in the range we copied
keep their last checkpoint (ours, exact) until they move past MM2's first new record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import BrokerError, MirrorRuntimeError
from mirror_lib.kafka.lookups import list_topic_partitions
from mirror_lib.kafka.reach import check_flow_clusters
from mirror_lib.mm2.connect_offsets import offsets_topic, source_offset_record
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.ledger import LedgerView, flow_bounds
from mirror_lib.replication.migration.mm2_takeover import mm2_committed

#: Connect's default partition count of its offsets topic (``offset.storage.partitions``).
OFFSETS_PARTITIONS = 25


@dataclass(frozen=True)
class HandBack:
    """One partition: the next upstream offset we would copy, MM2's committed offset before and
    the one written (None: nothing to write, the flow copied nothing of the partition)."""

    topic: str
    partition: int
    next_offset: int
    mm2_before: int | None
    mm2_after: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "next_offset": self.next_offset,
            "mm2_before": self.mm2_before,
            "mm2_after": self.mm2_after,
        }


def hand_back(config: MirrorConfig, flow: str, *, apply: bool = False) -> list[HandBack]:
    """MM2's positions that continue the flow where our ledger stands; ``apply`` writes them.

    ``mirror run`` must be stopped (the ledger must not move any more); MM2 started afterwards
    on the same properties continues exactly there.
    """
    ctx = FlowContext.create(config, flow)
    check_flow_clusters(config, [ctx.flow.name], kept="nothing was written")
    admin = ctx.admin("source")
    partitions = sorted(flow_bounds(ctx, admin))
    ledger = LedgerView(ctx)
    try:
        positions = ledger.positions(partitions)
        missing = [tp for tp in partitions if tp not in positions]
        positions |= ledger.former_positions(missing) if missing else {}
    finally:
        ledger.close()
    before = mm2_committed(ctx) or {}
    rows = [
        HandBack(t, p, pos, before.get((t, p)), pos - 1 if pos > 0 else None)
        for (t, p), pos in sorted(positions.items())
    ]
    if apply:
        _write(ctx, [r for r in rows if r.mm2_after is not None])
    return rows


def _write(ctx: FlowContext, rows: list[HandBack]) -> None:
    topic = offsets_topic(ctx.config.properties, ctx.source, ctx.target)
    if topic not in list_topic_partitions(ctx.admin("target")):
        raise MirrorRuntimeError(
            f"{ctx.label}: MirrorMaker 2's offsets topic {topic} is not on "
            f"{ctx.where('target')}: start MirrorMaker 2 once on these properties (it creates "
            "the topic), stop it, and hand back again"
        )
    # Java's default partitioner for keyed records: murmur2(key) % partitions
    conf = ctx.client("target", "producer", **{"partitioner": "murmur2_random"})
    producer = Producer(conf)
    failed: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err.str())

    for r in rows:
        assert r.mm2_after is not None
        key, value = source_offset_record(ctx.flow.mm2_source, r.topic, r.partition, r.mm2_after)
        producer.produce(topic, value, key, on_delivery=report)
    if producer.flush(30) or failed:
        raise BrokerError(
            f"{ctx.label}: writing MirrorMaker 2's positions to {topic} on "
            f"{ctx.where('target')} failed: {failed[0] if failed else 'not acknowledged'}",
            transient=True,
        )


def format_hand_back(rows: list[HandBack], applied: bool) -> str:
    """One line per partition, then what to do next."""
    lines = [f"{'topic':<40} {'partition':>9} {'next':>10} {'MM2 before':>11} {'MM2 after':>10}"]
    for r in rows:
        before = "-" if r.mm2_before is None else str(r.mm2_before)
        after = "-" if r.mm2_after is None else str(r.mm2_after)
        lines.append(f"{r.topic:<40} {r.partition:>9} {r.next_offset:>10} {before:>11} {after:>10}")
    lines.append(
        "written: start MirrorMaker 2 on the same properties; it continues at 'next'"
        if applied
        else "dry run: --apply writes MM2's positions (stop `mirror run` first)"
    )
    return "\n".join(lines)
