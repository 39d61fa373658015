"""A long metrics topic: translation reads back only as far as it needs, and the checkpoint job
keeps only what its groups need (real tansu brokers, no Spark).

The metrics topic holds one ``segments`` event per partition per transaction. These tests write
such events as the copier does (in transactions, with ``batch`` events beside them) into a
flow of their own, so nothing else writes there.
"""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Producer, TopicPartition

from mirror_lib.config.parse import parse_config
from mirror_lib.kafka.reader import read_topic
from mirror_lib.mm2.formats import Checkpoint
from mirror_lib.replication import events, segment_view
from mirror_lib.replication.companions.checkpoint_job import (
    CheckpointState,
    SavedCheckpoints,
    run_checkpoints,
)
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.translate import load_segments, reader_conf, scan_segments, translate
from mirror_lib.testing.kafka_io import commit_group, create_topic, produce_exact

TXNS = 40  # per partition; transaction i copies upstream 10i..10i+9 to downstream 11i..11i+9


def _flow(brokers, tmp_path, topic: str) -> FlowContext:
    """A flow whose cluster aliases are the test's own, and so is its metrics topic."""
    src, tgt = f"S{uuid.uuid4().hex[:6]}", f"T{uuid.uuid4().hex[:6]}"
    props = {
        "clusters": f"{src}, {tgt}",
        f"{src}.bootstrap.servers": brokers.source,
        f"{tgt}.bootstrap.servers": brokers.target,
        f"{src}->{tgt}.enabled": "true",
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "topics": topic,
        "groups": f"{topic}.*",
        "mirror.state.dir": str(tmp_path / "state"),
    }
    return FlowContext.create(parse_config(props), f"{src}->{tgt}")


def _event(ctx: FlowContext, kind: str, topic: str, partition: int, **fields) -> tuple:
    event = {"type": kind, "flow": ctx.flow.name, "source": ctx.source, "target": ctx.target,
             "ts_ms": 1, "topic": topic, "remote_topic": ctx.remote_topic(topic),
             "partition": partition, **fields}  # fmt: skip
    return events.encode(event)


def _write_transactions(
    brokers, ctx: FlowContext, topic: str, partitions: int, first: int = 0
) -> None:
    """TXNS transactions of the copier per partition from transaction ``first`` on, interleaved,
    each in its own Kafka transaction with a ``batch`` and a ``segments`` event."""
    if first == 0:
        create_topic(brokers.target, ctx.metrics_topic, 1)
    producer = Producer({"bootstrap.servers": brokers.target,
                         "transactional.id": f"{ctx.metrics_topic}-writer"})  # fmt: skip
    producer.init_transactions(30)
    for i in range(first, first + TXNS):
        producer.begin_transaction()
        for p in range(partitions):
            for kind, fields in (
                ("batch", {"records": 10}),
                ("segments", {"segments": [[10 * i, 10 * i + 9, 11 * i, 11 * i + 9]]}),
            ):
                key, value = _event(ctx, kind, topic, p, **fields)
                producer.produce(ctx.metrics_topic, value, key, partition=0)
        producer.commit_transaction(30)


def _expected(upstream: int, txns: int = TXNS) -> int:
    i, k = divmod(upstream, 10)
    return 11 * min(i, txns - 1) + (k if i < txns else 10)


def test_translation_reads_back_only_as_far_as_the_offsets_need(brokers, tmp_path, unique_name):
    ctx = _flow(brokers, tmp_path, unique_name)
    _write_transactions(brokers, ctx, unique_name, partitions=2)
    tp0, tp1 = (unique_name, 0), (unique_name, 1)
    whole = load_segments(ctx)
    assert len(whole[tp0].segments) == TXNS

    recent = scan_segments(ctx, {tp0: 385, tp1: 372}, first=30)
    assert not recent.complete
    assert recent.floor[tp0] <= 385 and recent.floor[tp1] <= 372
    assert len(recent.indexes[tp0].segments) < TXNS // 2  # read far less than the whole topic
    for tp in (tp0, tp1):
        for u in range(recent.floor[tp], 10 * TXNS + 2):
            assert recent.exact(tp, u)
            assert translate(recent.indexes, *tp, u) == translate(whole, *tp, u) == _expected(u)
    assert not recent.exact(tp0, recent.floor[tp0] - 1)

    oldest = scan_segments(ctx, {tp0: 385, tp1: 0}, first=30)  # one group at the very start
    assert oldest.complete
    assert all(oldest.exact(tp0, u) for u in range(0, 10 * TXNS))
    assert [translate(oldest.indexes, *tp1, u) for u in range(10 * TXNS + 2)] == [
        _expected(u) for u in range(10 * TXNS + 2)
    ]
    assert oldest.end == recent.end

    earlier = scan_segments(ctx, {tp0: 0}, end=recent.end // 2)  # up to a position read before
    assert earlier.complete
    last = earlier.indexes[tp0].last
    assert last is not None and last.upstream_end < 10 * (TXNS - 1)


def _commit(brokers, group: str, offsets: dict[tuple[str, int], int]) -> None:
    tps = [TopicPartition(t, p, u) for (t, p), u in offsets.items()]
    commit_group(brokers.source, group, tps)


def _checkpoint(state: CheckpointState, ctx: FlowContext, group: str, tp) -> int:
    remote = ctx.remote_topic(tp[0])
    cps = {(c.topic, c.partition): c for c in state.store.latest(group).values()}
    return cps[(remote, tp[1])].downstream_offset


def test_the_checkpoint_job_keeps_what_its_groups_need_and_reads_back_for_a_new_one(
    brokers, tmp_path, unique_name
):
    ctx = _flow(brokers, tmp_path, unique_name)
    create_topic(brokers.source, unique_name, 2)
    records = [{"value": b"v", "partition": p} for p in (0, 1) for _ in range(10 * TXNS)]
    produce_exact(brokers.source, unique_name, records)
    _write_transactions(brokers, ctx, unique_name, partitions=2)
    tp0, tp1 = (unique_name, 0), (unique_name, 1)
    state = CheckpointState()
    _commit(brokers, f"{unique_name}.busy", {tp0: 305, tp1: 123})
    _commit(brokers, f"{unique_name}.idle", {tp0: 17})

    written, skipped = run_checkpoints(ctx, state)
    assert (written, skipped) == (3, 0)
    assert _checkpoint(state, ctx, f"{unique_name}.busy", tp0) == _expected(305)
    assert _checkpoint(state, ctx, f"{unique_name}.busy", tp1) == _expected(123)
    assert _checkpoint(state, ctx, f"{unique_name}.idle", tp0) == _expected(17)
    view = state.segments
    assert len(view.indexes[tp0]) == TXNS - 1  # all but what no offset needs (below 17)

    _commit(brokers, f"{unique_name}.busy", {tp0: 388, tp1: 391})
    written, _ = run_checkpoints(ctx, state)
    assert written == 2
    assert _checkpoint(state, ctx, f"{unique_name}.busy", tp0) == _expected(388)
    # the idle group's answer is kept; of the segments, only those from the moved offsets on
    assert len(view.indexes[tp0]) == 2 and len(view.indexes[tp1]) == 1

    _commit(brokers, f"{unique_name}.new", {tp0: 42})  # below what is kept: read back for it
    written, _ = run_checkpoints(ctx, state)
    assert written == 1
    assert _checkpoint(state, ctx, f"{unique_name}.new", tp0) == _expected(42)
    assert _checkpoint(state, ctx, f"{unique_name}.idle", tp0) == _expected(17)


def _checkpoints(ctx: FlowContext) -> dict[tuple[str, int], int]:
    """The latest downstream offset per (group, partition) on the checkpoints topic."""
    out = {}
    for msg in read_topic(reader_conf(ctx), ctx.checkpoints_topic):
        cp = Checkpoint.decode(msg.key(), msg.value())
        out[(cp.group, cp.partition)] = cp.downstream_offset
    return out


def test_a_once_round_or_a_restart_goes_on_from_the_segments_saved(
    brokers, tmp_path, unique_name, monkeypatch
):
    ctx = _flow(brokers, tmp_path, unique_name)
    create_topic(brokers.source, unique_name, 1)
    records = [{"value": b"v", "partition": 0} for _ in range(20 * TXNS)]
    produce_exact(brokers.source, unique_name, records)
    _write_transactions(brokers, ctx, unique_name, partitions=1)
    tp = (unique_name, 0)
    busy, idle = f"{unique_name}.busy", f"{unique_name}.idle"
    _commit(brokers, busy, {tp: 305})
    _commit(brokers, idle, {tp: 17})
    path = SavedCheckpoints.of(ctx).path  # each round (or restarted run) a new process
    assert path.parent.name == ctx.flow.name.replace("->", "_to_")
    assert SavedCheckpoints.of(ctx).run(ctx) == (2, 0)
    first = json.loads(path.read_text())["view"]

    _write_transactions(brokers, ctx, unique_name, partitions=1, first=TXNS)
    _commit(brokers, busy, {tp: 10 * TXNS + 55})
    scans = []
    monkeypatch.setattr(segment_view, "scan_segments", lambda *a, **k: scans.append(a))
    assert SavedCheckpoints.of(ctx).run(ctx) == (1, 0)  # only what was written since
    assert scans == []
    second = json.loads(path.read_text())["view"]
    assert second["position"] > first["position"]
    cps = _checkpoints(ctx)
    assert cps[(busy, 0)] == _expected(10 * TXNS + 55, 2 * TXNS)
    assert cps[(idle, 0)] == _expected(17)
    # the idle group stayed: its answer is kept, and segments only from the busy group's on
    assert second["answers"] == [[unique_name, 0, 17, _expected(17)]]
    assert len(second["partitions"][0]["segments"]) == TXNS - 5
