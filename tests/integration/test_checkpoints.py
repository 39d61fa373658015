"""Checkpoints, group offset sync, heartbeats, MirrorClient and failover (MM2's integration-test
scenarios)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirror_lib.config.parse import parse_config
from mirror_lib.kafka.mirror_client import MirrorClient
from mirror_lib.replication.migration.failover import failover_group, translate_group
from mirror_lib.spark.flow_runner import FlowRunner
from mirror_lib.spark.plan import RunPlan
from mirror_lib.spark.runner import companion_jobs
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.helpers import waiting
from tests.integration.conftest import flow_properties, write_properties

FAST = {
    "emit.checkpoints.interval.seconds": "1",
    "emit.heartbeats.interval.seconds": "2",
    "sync.group.offsets.interval.seconds": "1",
    # topics that appear while a slice runs (heartbeats topics, remote topics of a chain) are
    # looked for every 2 s instead of every 60 s
    "refresh.topics.interval.seconds": "2",
}


@contextmanager
def running(spark, config, flows: list[str]):
    """Replication + checkpoint + heartbeat queries of ``flows``; all stopped on exit."""
    runners = [FlowRunner.of(spark, config, f) for f in flows]
    runners += companion_jobs(RunPlan.resolve(config, flows))
    try:
        for r in runners:
            r.start()
        yield runners
    finally:
        for r in runners:
            r.stop()


def wait_for(check: Callable[[], object], runners, timeout_s: float = 90, what: str = ""):
    """:func:`tests.helpers.waiting.wait_for` while every runner is healthy."""

    def alive() -> None:
        for r in runners:
            r.raise_if_failed()

    return waiting.wait_for(check, timeout_s, what, alive, poll_s=0.5)


def wait_cycles(runners, job: str, cycles: int, timeout_s: float = 120) -> None:
    """Wait until the ``job`` parts ran ``cycles`` more rounds (not a fixed sleep: holds on a
    busy machine, where a few seconds may be no cycle at all)."""
    jobs = [r for r in runners if r.job == job]

    def batch_ids() -> list[int]:
        ids = [r.status().last_batch_id for r in jobs]
        return [-1 if i is None else i for i in ids]

    start = batch_ids()
    wait_for(
        lambda: all(now >= then + cycles for now, then in zip(batch_ids(), start, strict=True)),
        runners,
        timeout_s,
        f"{cycles} more {job} cycles",
    )


def consume_group(bootstrap: str, group: str, topic: str, partitions: int, count: int):
    """Consume ``count`` records per partition on ``topic`` as ``group`` and commit them."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 30
    while any(len(v) < count for v in got.values()) and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=0.5):
            if msg.error() is None and len(got[msg.partition()]) < count:
                got[msg.partition()].append(msg)
    consumer.commit(
        offsets=[TopicPartition(topic, p, got[p][-1].offset() + 1) for p in got if got[p]],
        asynchronous=False,
    )
    consumer.close()
    return got


def read_from_committed(bootstrap: str, group: str, topic: str, partitions: int) -> list:
    """Everything a new member of ``group`` reads on ``topic`` from its committed offsets."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    assert all(tp.offset >= 0 for tp in tps), f"no committed offset on the target: {tps}"
    consumer.assign(tps)
    out, done = [], set()
    deadline = time.monotonic() + 30
    while len(done) < partitions and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=0.5):
            if msg.error() is None:
                out.append((msg.partition(), msg.value()))
            elif msg.error().code() == -191:  # _PARTITION_EOF
                done.add(msg.partition())
    consumer.close()
    return out


@pytest.mark.spark40
def test_translated_offsets_resume_exactly_where_the_group_stopped(
    spark, brokers, make_config, unique_name
):
    topic, group = unique_name, f"{unique_name}-group"
    create_topic(brokers.source, topic, 3)
    produce_exact(
        brokers.source,
        topic,
        [{"value": f"r{i}".encode(), "partition": i % 3} for i in range(300)],
    )
    consumed = consume_group(brokers.source, group, topic, 3, 60)
    config = make_config(
        topics=topic, groups=group, **FAST, **{"sync.group.offsets.enabled": "true"}
    )
    with running(spark, config, ["A->B"]) as runners:
        rows = wait_for(
            lambda: len(r := translate_group(config, group, "A", "B")) == 3 and r,
            runners,
            what="checkpoints for 3 partitions",
        )
        wait_for(
            lambda: read_from_committed_safe(brokers.target, group, f"A.{topic}", 3),
            runners,
            what="group offsets synced to B",
        )
    source = consume_all(brokers.source, topic)
    target = consume_all(brokers.target, f"A.{topic}")
    for row in rows:
        first_unconsumed = source[[r.partition for r in source].index(row.partition) + 60]
        on_b = next(r for r in target if r.partition == row.partition and r.offset == row.offset)
        assert on_b.value == first_unconsumed.value
    resumed = read_from_committed(brokers.target, group, f"A.{topic}", 3)
    seen = {(p, m.value()) for p, msgs in consumed.items() for m in msgs}
    expected = {(r.partition, r.value) for r in source} - seen
    assert len(resumed) == len(set(resumed)) == 3 * (100 - 60), "duplicates after failover"
    assert set(resumed) == expected, "records skipped or re-read after failover"


def active_member(bootstrap: str, group: str, topic: str) -> Consumer:
    """A consumer that has joined ``group`` (subscribed, assigned) and never commits."""
    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
        }
    )
    member.subscribe([topic])
    deadline = time.monotonic() + 60
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.5)
    assert member.assignment(), "the test consumer never joined its group"
    return member


def read_from_committed_safe(bootstrap, group, topic, partitions) -> bool:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
        return all(tp.offset >= 0 for tp in tps)
    finally:
        consumer.close()


def test_group_sync_skips_active_groups_and_never_rewinds(spark, brokers, make_config, unique_name):
    topic, group = unique_name, f"{unique_name}-g"
    create_topic(brokers.source, topic, 1)
    produce_exact(brokers.source, topic, [{"value": b"x", "partition": 0}] * 50)
    consume_group(brokers.source, group, topic, 1, 20)
    create_topic(brokers.target, f"A.{topic}", 1)
    member = active_member(brokers.target, group, f"A.{topic}")
    config = make_config(
        topics=topic, groups=group, **FAST, **{"sync.group.offsets.enabled": "true"}
    )
    remote = TopicPartition(f"A.{topic}", 0)
    with running(spark, config, ["A->B"]) as runners:
        wait_for(lambda: translate_group(config, group, "A", "B"), runners, what="checkpoint")
        for _ in range(6):  # several sync intervals while the member is active
            member.poll(0.5)
        assert member.committed([remote], 10)[0].offset < 0, "an active group was modified"
        member.close()
        wait_for(
            lambda: read_from_committed_safe(brokers.target, group, remote.topic, 1),
            runners,
            what="sync after the member left",
        )
        admin = Consumer({"bootstrap.servers": brokers.target, "group.id": group})
        assert admin.committed([remote], 10)[0].offset == 20
        admin.commit(offsets=[TopicPartition(remote.topic, 0, 45)], asynchronous=False)
        wait_cycles(runners, "checkpoints", 3)  # several syncs that could rewind it
        assert admin.committed([remote], 10)[0].offset == 45, "the sync rewound a target group"
        admin.close()


def test_active_active_no_loops_failover_and_failback(spark, brokers, tmp_path, unique_name):
    p = unique_name
    props = flow_properties(
        brokers.source,
        brokers.target,
        tmp_path / "state",
        topics=rf"{p}, A\.{p}, B\.{p}",
        groups=f"{p}-g",
        **FAST,
        # short slices: each new slice re-plans the topics, where a loop would show
        **{"B->A.enabled": "true", "mirror.batch.duration.seconds": "5"},
    )
    config = parse_config(props)
    for bootstrap, tag in ((brokers.source, "a"), (brokers.target, "b")):
        create_topic(bootstrap, p, 2)
        produce_exact(
            bootstrap, p, [{"value": f"{tag}{i}".encode(), "partition": i % 2} for i in range(100)]
        )
    consume_group(brokers.source, f"{p}-g", p, 2, 30)
    consume_group(brokers.target, f"{p}-g", p, 2, 10)
    with running(spark, config, ["A->B", "B->A"]) as runners:
        wait_for(
            lambda: len(translate_group(config, f"{p}-g", "A", "B")) == 2,
            runners,
            what="A->B checkpoints",
        )
        wait_for(
            lambda: len(translate_group(config, f"{p}-g", "B", "A")) == 2,
            runners,
            what="B->A checkpoints",
        )
        wait_cycles(runners, "replication", 2)  # more slices, in which a loop would show
    on_a = set(MirrorClient.from_config(config, "A").topics())
    on_b = set(MirrorClient.from_config(config, "B").topics())
    assert f"B.{p}" in on_a and f"A.{p}" in on_b
    assert not {t for t in on_a | on_b if t.startswith((f"A.B.{p}", f"B.A.{p}"))}, "a loop"
    assert len(consume_all(brokers.target, f"A.{p}")) == 100
    assert len(consume_all(brokers.source, f"B.{p}")) == 100
    fail = {(r.topic, r.partition): r.offset for r in translate_group(config, f"{p}-g", "A", "B")}
    back = {(r.topic, r.partition): r.offset for r in translate_group(config, f"{p}-g", "B", "A")}
    assert fail == {(f"A.{p}", 0): 30, (f"A.{p}", 1): 30}
    assert back == {(f"B.{p}", 0): 10, (f"B.{p}", 1): 10}


def test_chain_hops_upstream_clusters_and_heartbeats(
    spark, brokers, third_broker, tmp_path, unique_name
):
    """P->Q->R. Aliases of its own: the session's clusters keep other tests' heartbeat topics
    (A.heartbeats on the third cluster after a fan-out test), which count as hops too."""
    props = {
        "clusters": "P, Q, R",
        "P.bootstrap.servers": brokers.source,
        "Q.bootstrap.servers": brokers.target,
        "R.bootstrap.servers": third_broker,
        "P->Q.enabled": "true",
        "Q->R.enabled": "true",
        "topics": f"{unique_name}.*",
        "emit.checkpoints.enabled": "false",
        "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "2",  # each hop's remote topic appears mid-slice
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "mirror.state.dir": str(tmp_path / "state"),
        "mirror.trigger.interval.seconds": "0.5",
    }
    for pair in ("Q->P", "R->Q", "P->R", "R->P"):
        props[f"{pair}.emit.heartbeats.enabled"] = "false"
    config = parse_config(props)
    c = MirrorClient.from_config(config, "R")
    with running(spark, config, ["P->Q", "Q->R"]) as runners:
        wait_for(
            lambda: (
                "Q.P.heartbeats" in c.heartbeat_topics()
                and c.latest_heartbeats().get(("P", "Q"))
                and c.latest_heartbeats().get(("Q", "R"))  # under load it may come later
            ),
            runners,
            180,
            "Q.P.heartbeats with P->Q heartbeats and Q->R heartbeats on R",
        )
    # the third cluster is the session's: other tests' flows leave their own heartbeat topics
    assert c.upstream_clusters() & {"P", "Q", "R"} == {"P", "Q"}
    assert c.replication_hops("Q") == 1
    assert c.replication_hops("P") == 2
    assert c.replication_hops("Z") == -1
    assert c.latest_heartbeats()[("Q", "R")] > 0


def test_corrupt_internal_records_are_skipped_and_the_query_keeps_running(
    spark, brokers, make_config, unique_name
):
    topic, group = unique_name, f"{unique_name}-g"
    create_topic(brokers.source, topic, 1)
    produce_exact(brokers.source, topic, [{"value": b"v", "partition": 0}] * 20)
    consume_group(brokers.source, group, topic, 1, 5)
    config = make_config(topics=topic, groups=group, **FAST)
    with running(spark, config, ["A->B"]) as runners:
        wait_for(lambda: translate_group(config, group, "A", "B"), runners, what="checkpoint")
        junk = Producer({"bootstrap.servers": brokers.target})
        for t in ("A.checkpoints.internal", "mm2-metrics.A.internal"):
            junk.produce(t, b"\x00\x07garbage", b"\xff", partition=0)
        junk.flush(10)
        consume_group(brokers.source, group, topic, 1, 12)
        wait_for(
            lambda: translate_group(config, group, "A", "B")[0].offset == 12,
            runners,
            what="a newer checkpoint after the corrupt records",
        )
        for r in runners:
            assert r.status().active, f"{r.job} stopped"
    client = MirrorClient.from_config(config, "B")
    client.remote_consumer_offsets(group, "A")
    assert client.skipped_records >= 1


def test_failover_apply_refuses_a_group_with_active_members(
    spark, brokers, make_config, tmp_path, unique_name, subprocess_env
):
    topic, group = unique_name, f"{unique_name}-g"
    create_topic(brokers.source, topic, 1)
    produce_exact(brokers.source, topic, [{"value": b"v", "partition": 0}] * 10)
    consume_group(brokers.source, group, topic, 1, 4)
    config = make_config(topics=topic, groups=group, **FAST)
    with running(spark, config, ["A->B"]) as runners:
        wait_for(lambda: translate_group(config, group, "A", "B"), runners, what="checkpoint")
    member = active_member(brokers.target, group, f"A.{topic}")
    cfg_file = write_properties(tmp_path / "mm2.properties", dict(config.properties))
    cmd = [
        sys.executable,
        "-m",
        "mirror_lib.app.cli",
        "failover",
        str(cfg_file),
        "--group",
        group,
        "--source",
        "A",
        "--target",
        "B",
    ]
    try:
        refused = subprocess.run(
            [*cmd, "--apply"], capture_output=True, text=True, env=subprocess_env, timeout=60
        )
    finally:
        member.close()
    assert refused.returncode == 1
    assert group in refused.stderr and "active member" in refused.stderr, refused.stderr
    applied = subprocess.run(
        [*cmd, "--apply", "--json"], capture_output=True, text=True, env=subprocess_env, timeout=60
    )
    assert applied.returncode == 0, applied.stderr
    assert failover_group(config, group, "A", "B")[0].current == 4


def test_refresh_groups_disabled_keeps_the_groups_listed_first(
    spark, brokers, make_config, unique_name
):
    """``refresh.groups.enabled = false`` (MM2): a checkpoint job checkpoints the groups it
    listed first; a group that appears later gets checkpoints only from a new job."""
    from mirror_lib.replication.companions.checkpoint_job import (
        CheckpointState,
        run_checkpoints,
    )
    from mirror_lib.replication.context import FlowContext
    from mirror_lib.spark.runner import run_flows
    from tests.integration.test_tables import commit

    topic, early, late = unique_name, f"{unique_name}-early", f"{unique_name}-late"
    create_topic(brokers.source, topic, 1)
    produce_exact(brokers.source, topic, [{"value": b"v", "partition": 0}] * 10)
    commit(brokers.source, early, {(topic, 0): 5})
    config = make_config(
        topics=topic, groups=f"{unique_name}-.*", **{"refresh.groups.enabled": "false"}
    )
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)
    ctx, state = FlowContext.create(config, "A->B"), CheckpointState()
    run_checkpoints(ctx, state)
    commit(brokers.source, late, {(topic, 0): 3})
    run_checkpoints(ctx, state)
    assert [(r.partition, r.offset) for r in translate_group(config, early, "A", "B")] == [(0, 5)]
    assert translate_group(config, late, "A", "B") == []
    run_checkpoints(ctx, CheckpointState())  # a new job (a restart) lists the groups again
    assert [(r.partition, r.offset) for r in translate_group(config, late, "A", "B")] == [(0, 3)]
