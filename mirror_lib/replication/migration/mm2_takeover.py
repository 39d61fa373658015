"""Taking partitions over from a MirrorMaker 2 that replicated the same flow before us.

When the planner meets a partition with no delivery-ledger entry, it looks for MM2's state on
the target: the Connect offsets of MM2's MirrorSourceConnector
(:mod:`mirror_lib.mm2.connect_offsets`). If MM2 replicated the partition, the flow continues
right after MM2's last copied record, found by matching the remote partition's last record
upstream (:mod:`mirror_lib.offsets.takeover`), instead of copying the partition from its
earliest offset again. A ``takeover`` event on the flow's metrics topic records each boundary;
translation reads it as the point below which the records on the target are MM2's, not ours
(no exact answer there: MM2's own checkpoints stay the last word for groups below it).

MM2 must be stopped first: with its Connect group still holding members on the target, the
planner refuses to start rather than copy next to it.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError, MirrorRuntimeError
from mirror_lib.kafka.admin import is_transient
from mirror_lib.kafka.lookups import list_topic_partitions
from mirror_lib.kafka.reader import read_topic
from mirror_lib.mm2.connect_offsets import offsets_topic, parse_source_offset, worker_group
from mirror_lib.mm2.formats import TP
from mirror_lib.offsets.takeover import Boundary, Content, find_boundary
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext

log = logging.getLogger(__name__)
TAIL = 64  # remote records read back from the end to find the last one (markers, aborts)


def mm2_committed(ctx: FlowContext, timeout_s: float = 30) -> dict[TP, int | None] | None:
    """MM2's committed position per upstream partition of this flow (None: reset); None when
    MM2 never ran the flow: no Connect offsets topic on the target. The topic may hold nothing
    of the flow yet (MM2 commits every ``offset.flush.interval.ms``, 60 s by default)."""
    topic = offsets_topic(ctx.config.properties, ctx.source, ctx.target)
    if topic not in list_topic_partitions(ctx.admin("target"), timeout_s):
        return None
    conf = ctx.client("target", "consumer", **{"group.id": f"__mirror_reader.{ctx.flow.name}"})
    out: dict[TP, int | None] = {}
    for msg in read_topic(conf, topic, timeout_s):
        parsed = parse_source_offset(msg.key(), msg.value(), ctx.flow.mm2_source)
        if parsed is not None:
            out[parsed[0]] = parsed[1]
    return out


def mm2_members(ctx: FlowContext, timeout_s: float = 30) -> list[str]:
    """Client ids of the members of MM2's Connect group for this flow on the target."""
    group = worker_group(ctx.config.properties, ctx.source, ctx.target)
    admin = ctx.admin("target")
    try:
        with warnings.catch_warnings():  # the only call that describes a non-consumer group
            warnings.simplefilter("ignore", DeprecationWarning)
            found = admin.list_groups(group, timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerError(
            f"describing MirrorMaker 2's group {group} on {ctx.where('target')} failed: {exc}",
            transient=True,
        ) from exc
    return sorted({str(m.client_id) for g in found if g.id == group for m in g.members})


def refuse_running_mm2(ctx: FlowContext, wait_s: float = 30) -> None:
    """Raise when MM2's Connect group for this flow keeps members on the target for ``wait_s``:
    MM2 runs. (A MM2 that was just killed leaves members until their session times out, 10 s
    by default.)"""
    deadline = time.monotonic() + wait_s
    while members := mm2_members(ctx):
        if time.monotonic() > deadline:
            group = worker_group(ctx.config.properties, ctx.source, ctx.target)
            raise MirrorRuntimeError(
                f"{ctx.label}: MirrorMaker 2 still replicates this flow: its Connect group "
                f"{group} on {ctx.where('target')} has {len(members)} member(s) "
                f"({', '.join(members)}). Stop MirrorMaker 2 first: we continue from where "
                "it stopped, and copying next to it would write every record twice. Nothing "
                "was copied."
            )
        time.sleep(1)


def _content(msg: Any) -> Content:
    ts_type, ts = msg.timestamp()
    headers = tuple((k, v) for k, v in (msg.headers() or []))
    stamp = ts if ts_type == 1 else None  # CreateTime, which MM2 copies (not LogAppendTime)
    return Content(msg.key(), msg.value(), headers, stamp)


def _reader(ctx: FlowContext, side: str) -> Consumer:
    # read_uncommitted: MM2's source consumer reads so unless told otherwise, and a remote
    # partition's last record is what MM2 wrote, committed or not
    return Consumer(
        ctx.client(
            side,
            "consumer",
            **{
                "group.id": f"__mirror_reader.{ctx.flow.name}",
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
                "enable.partition.eof": True,
            },
        )
    )


def _records(consumer: Consumer, topic: str, p: int, start: int, timeout_s: float) -> Iterator[Any]:
    """Records of ``topic[p]`` from ``start`` to the end it finds."""
    consumer.assign([TopicPartition(topic, p, start)])
    deadline = time.monotonic() + timeout_s
    while True:
        msgs = consumer.consume(1000, timeout=0.1)  # consume() waits for all 1000
        if msgs:
            deadline = time.monotonic() + timeout_s
        elif time.monotonic() > deadline:
            raise BrokerError(f"reading {topic}[{p}]: nothing for {timeout_s:.0f}s", transient=True)
        for msg in msgs:
            err = msg.error()
            if err is None:
                yield msg
            elif err.code() == KafkaError._PARTITION_EOF:
                return
            else:
                raise BrokerError(f"reading {topic}[{p}]: {err}", transient=is_transient(err))


def _remote_last(
    consumer: Consumer, topic: str, p: int, timeout_s: float
) -> tuple[int, Any] | None:
    """The remote partition's last record, or None when it holds none."""
    try:
        lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerError(f"listing offsets of {topic}[{p}]: {exc}", transient=True) from exc
    if hi <= lo:
        return None
    last = None
    for msg in _records(consumer, topic, p, max(lo, hi - TAIL), timeout_s):
        last = msg
    return None if last is None else (last.offset(), last)


def boundaries(
    ctx: FlowContext,
    partitions: Sequence[TP],
    earliest: dict[TP, int],
    timeout_s: float = 30,
) -> dict[TP, Boundary]:
    """Where each of ``partitions`` (upstream, without a ledger entry) continues after MM2;
    only those MM2 replicated. Raises when MM2 still runs."""
    if not partitions:
        return {}
    committed = mm2_committed(ctx, timeout_s)
    if committed is None:
        return {}
    refuse_running_mm2(ctx)
    out: dict[TP, Boundary] = {}
    remote_reader, source_reader = _reader(ctx, "target"), _reader(ctx, "source")
    try:
        for topic, p in partitions:
            remote = ctx.remote_topic(topic)
            last = _remote_last(remote_reader, remote, p, timeout_s)
            if last is None and (topic, p) not in committed:
                continue
            remote_last = None if last is None else (last[0], _content(last[1]))
            start = committed.get((topic, p))
            lo = earliest.get((topic, p), 0)
            upstream = (
                (m.offset(), _content(m))
                for m in _records(source_reader, topic, p, max(lo, start or 0), timeout_s)
            )
            found = find_boundary(
                committed=start, remote_last=remote_last, upstream=upstream, earliest=lo
            )
            if found is not None:
                out[(topic, p)] = found
                _tell(ctx, topic, p, found)
    finally:
        remote_reader.close()
        source_reader.close()
    if out:
        events.publish(ctx, [takeover_event(ctx, t, p, b) for (t, p), b in sorted(out.items())])
    return out


def takeover_event(ctx: FlowContext, topic: str, partition: int, b: Boundary) -> dict[str, Any]:
    """The ``takeover`` event of one partition: where MM2's copy ends and ours begins."""
    return events.flow_event(
        ctx,
        "takeover",
        topic=topic,
        remote_topic=ctx.remote_topic(topic),
        partition=partition,
        upstream=b.next_offset,
        mm2_committed=b.committed,
        mm2_last_upstream=b.matched,
        mm2_last_downstream=b.remote_last,
        reason="taken over from MirrorMaker 2",
        action="continue",
    )


def _tell(ctx: FlowContext, topic: str, p: int, b: Boundary) -> None:
    remote = f"{ctx.remote_topic(topic)}[{p}]"
    if b.matched is not None:
        log.info(
            "%s: taking %s[%d] over from MirrorMaker 2: its last copied record (%s@%d) is "
            "upstream offset %d, so we continue at %d (MM2 had committed %s: restarted, it "
            "would copy %d record offsets again)",
            ctx.label, topic, p, remote, b.remote_last, b.matched, b.next_offset,
            "nothing" if b.committed is None else f"up to {b.committed}", b.beyond_commit,
        )  # fmt: skip
    else:
        log.warning(
            "%s: taking %s[%d] over from MirrorMaker 2: %s, so we continue at %d after MM2's "
            "committed offset %s, as MM2 itself would (records it copied after its last commit "
            "are copied again)",
            ctx.label, topic, p,
            "its remote partition is empty" if b.remote_last is None
            else f"the last record of {remote} (offset {b.remote_last}) was not found upstream",
            b.next_offset, b.committed,
        )  # fmt: skip
