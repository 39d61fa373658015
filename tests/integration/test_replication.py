"""Replication engine against two real brokers and local Spark (issue: replication engine)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, AdminClient

from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.translate import load_segments, translate
from mirror_lib.spark.flow_runner import FlowRunner
from mirror_lib.spark.runner import run_flows
from mirror_lib.testing.kafka_io import Record, consume_all, create_topic, produce_exact
from tests.helpers.acls import deny_on_topic
from tests.helpers.kafka_raw import committed_records, iter_all, read_batches
from tests.integration.conftest import metrics_events

#: An explicit CreateTime a day old: copied as it is, and within Apache Kafka's default retention
#: of seven days (older records are deleted by the broker as soon as they are written).
OLD_TIMESTAMP_MS = (int(time.time()) - 86_400) * 1000


def mixed_records(n: int, partitions: int, tag: str) -> list[dict]:
    """Keys, null keys, null values, duplicate/None headers and explicit old timestamps."""
    return [
        {
            "key": None if i % 11 == 0 else f"{tag}-k{i}".encode(),
            "value": None if i % 13 == 0 else f"{tag}-v{i}".encode() * (1 + i % 4),
            "headers": [("h", f"{i}".encode()), ("h", None), ("trace", b"\x00\xff")][: i % 4],
            "partition": i % partitions,
            "timestamp": OLD_TIMESTAMP_MS + i,
        }
        for i in range(n)
    ]


def view(records: list[Record]) -> list[tuple]:
    return [(r.partition, r.key, r.value, r.headers, r.timestamp) for r in records]


def run_once(spark, config, timeout_s: float = 240):
    return run_flows(spark, config, once=True, timeout_s=timeout_s, report=lambda *_: None)


@pytest.mark.spark40
def test_records_identical_in_order_across_topics_and_partitions(
    spark, brokers, make_config, unique_name
):
    topics = [f"{unique_name}-{i}" for i in range(3)]
    for topic in topics:
        create_topic(brokers.source, topic, 4)
        produce_exact(brokers.source, topic, mixed_records(7_000, 4, topic))
    config = make_config(
        topics=f"{unique_name}-.*",
        **{"mirror.commit.max.records": "6000", "mirror.metrics.interval.ms": "0"},
    )
    run_once(spark, config)
    batches = [
        e for e in metrics_events(brokers.target) if e["type"] == "batch" and e["topic"] in topics
    ]
    assert sum(e["records"] for e in batches) == 21_000, "metrics count every record once"
    assert len(batches) >= 12 and max(e["records"] for e in batches) <= 6000, (
        "transactions are capped by mirror.commit.max.records"
    )
    for topic in topics:
        source = consume_all(brokers.source, topic)
        # The committed view from the raw reader: the test broker's read_committed would also
        # show records of aborted transactions.
        target = [
            (p, r.key, r.value, r.headers, r.timestamp)
            for p, r in iter_all(committed_records(brokers.target, f"A.{topic}", 4))
        ]
        assert len(source) == 7_000
        assert target == view(source)


def transactional_source(bootstrap: str, topic: str) -> None:
    """Committed and aborted transactions: upstream gaps (markers, aborted records)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-tx", "linger.ms": 0}
    )
    producer.init_transactions(30)
    n = 0
    for round_ in range(12):
        producer.begin_transaction()
        for _ in range(3 + round_ % 4):
            producer.produce(topic, f"v{n}".encode(), partition=round_ % 2)
            n += 1
            producer.flush(10)
        if round_ % 3 == 2:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def test_translation_is_exact_and_gaps_map_to_next_record(spark, brokers, make_config, unique_name):
    create_topic(brokers.source, unique_name, 2)
    transactional_source(brokers.source, unique_name)
    config = make_config(topics=unique_name, **{"mirror.commit.max.records": "7"})
    run_once(spark, config)
    indexes = load_segments(FlowContext.create(config, "A->B"))
    source = consume_all(brokers.source, unique_name)
    target = consume_all(brokers.target, f"A.{unique_name}")
    assert [r.value for r in target] == [r.value for r in source]
    down = {r.value: r.offset for r in target}
    for partition in (0, 1):
        replicated = [r for r in source if r.partition == partition]
        for r in replicated:
            assert translate(indexes, unique_name, partition, r.offset) == down[r.value]
        uppers = [r.offset for r in replicated]
        gaps = [u for u in range(uppers[-1]) if u not in set(uppers)]
        assert gaps, "the transactional source must leave upstream gaps"
        for u in gaps:
            nxt = next(r for r in replicated if r.offset > u)
            assert translate(indexes, unique_name, partition, u) == down[nxt.value]


def test_new_topics_are_picked_up_and_nothing_loops_back(spark, brokers, make_config, unique_name):
    p = unique_name
    create_topic(brokers.source, f"{p}-orders", 2)
    create_topic(brokers.source, f"{p}-excluded", 1)
    produce_exact(brokers.source, f"{p}-orders", mixed_records(50, 2, "o"))
    produce_exact(brokers.source, f"{p}-excluded", mixed_records(5, 1, "x"))
    config = make_config(
        topics=rf"{p}-.*, A\.{p}-.*, B\.{p}-.*",
        **{
            "topics.exclude": rf"{p}-excluded, mm2.*\.internal",
            "B->A.enabled": "true",
            "mirror.batch.duration.seconds": "300",  # the new topic must come during a slice
            "refresh.topics.interval.seconds": "1",
        },
    )
    runners = [FlowRunner.of(spark, config, name) for name in ("A->B", "B->A")]
    try:
        for r in runners:
            r.start()
        ab = runners[0]
        assert ab.await_caught_up(ab.snapshot(), 120)
        started = time.monotonic()
        create_topic(brokers.source, f"{p}-new", 2)
        produce_exact(brokers.source, f"{p}-new", mixed_records(20, 2, "n"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ab.raise_if_failed()
            names = AdminClient({"bootstrap.servers": brokers.target}).list_topics(timeout=10)
            if (
                f"A.{p}-new" in names.topics
                and len(consume_all(brokers.target, f"A.{p}-new")) == 20
            ):
                break
            time.sleep(0.3)
        else:
            pytest.fail("the new topic was not replicated within 60 s")
        assert time.monotonic() - started < 300, "picked up inside the 300 s slice"
        assert ab.query.isActive
        time.sleep(3)  # let B->A run a few more batches
        for r in runners:
            r.raise_if_failed()
    finally:
        for r in runners:
            r.stop()
    on_a = AdminClient({"bootstrap.servers": brokers.source}).list_topics(timeout=10).topics
    on_b = AdminClient({"bootstrap.servers": brokers.target}).list_topics(timeout=10).topics
    assert f"A.{p}-orders" in on_b
    assert f"A.{p}-excluded" not in on_b
    assert not [t for t in on_a if t.startswith(f"B.A.{p}")], "A's topics came back to A"
    assert not [t for t in on_b if t.startswith(f"A.B.A.{p}")]


def test_recreated_source_topic_is_a_gap_that_fails_the_query(
    spark, brokers, make_config, unique_name
):
    create_topic(brokers.source, unique_name, 1)
    produce_exact(brokers.source, unique_name, mixed_records(30, 1, "g"))
    config = make_config(topics=unique_name)
    runner = FlowRunner.of(spark, config, "A->B")
    runner.start()
    try:
        assert runner.await_caught_up(runner.snapshot(), 120)
        # Between slices (here: while the flow is stopped) the planner compares topic ids.
        # A topic deleted under a running copy task is librdkafka's to notice; 2.16 on the test
        # broker may crash the consumer instead (upstream issues #4778/#4964), see
        # docs/how-it-works.md#nothing-silent.
        runner.stop()
        admin = AdminClient({"bootstrap.servers": brokers.source})
        admin.delete_topics([unique_name])[unique_name].result(10)
        deadline = time.monotonic() + 30
        while unique_name in admin.list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, "the deleted topic is still listed after 30 s"
            time.sleep(0.2)
        create_topic(brokers.source, unique_name, 1)
        produce_exact(brokers.source, unique_name, mixed_records(40, 1, "h"))
        runner = FlowRunner.of(spark, config, "A->B")
        runner.start()
        with pytest.raises(MirrorRuntimeError, match="re-created") as err:
            runner.await_caught_up({(unique_name, 0): 10**9}, 180)  # a start on a busy machine
        error = err.value
        assert "mirror.on.gap=skip" in str(error)
    finally:
        runner.stop()
    events = metrics_events(brokers.target)
    gaps = [e for e in events if e["type"] == "gap" and e["topic"] == unique_name]
    assert gaps and gaps[0]["action"] == "fail" and gaps[0]["expected_offset"] == 30
    assert len(consume_all(brokers.target, f"A.{unique_name}")) == 30, "no silent reset"


def test_record_too_large_for_target_names_it_and_commits_nothing_after(
    spark, brokers, make_config, unique_name
):
    create_topic(brokers.source, unique_name, 1)
    small = [{"value": b"s" * 50, "partition": 0} for _ in range(10)]
    produce_exact(brokers.source, unique_name, [*small, {"value": b"L" * 5000, "partition": 0}])
    produce_exact(brokers.source, unique_name, small)
    config = make_config(topics=unique_name, **{"B.producer.message.max.bytes": "2000"})
    with pytest.raises(MirrorRuntimeError, match=rf"{unique_name}\[0\] offset 10"):
        run_once(spark, config, timeout_s=120)
    copied = consume_all(brokers.target, f"A.{unique_name}")
    assert len(copied) <= 10
    assert all(r.value == b"s" * 50 for r in copied)


def test_remote_topic_gets_partition_count_and_filtered_configs(
    spark, brokers, make_config, unique_name
):
    from mirror_lib.kafka.admin import KafkaAdminOps

    create_topic(
        brokers.source,
        unique_name,
        3,
        config={"retention.bytes": "1000", "min.insync.replicas": "1", "cleanup.policy": "compact"},
    )
    keyed = [r for r in mixed_records(9, 3, "c") if r["key"] is not None]  # compacted: keys only
    produce_exact(brokers.source, unique_name, keyed)
    run_once(spark, make_config(topics=unique_name))
    target = KafkaAdminOps({"bootstrap.servers": brokers.target})
    assert target.list_topics()[f"A.{unique_name}"] == 3
    configs = target.describe_topic_configs([f"A.{unique_name}"])[f"A.{unique_name}"]
    assert configs["retention.bytes"].value == "1000"
    assert configs["cleanup.policy"].value == "compact"
    # excluded by config.properties.exclude: not set on the remote topic (Apache Kafka's KRaft
    # clusters report their own min.insync.replicas as a dynamic cluster default, not a default)
    assert configs["min.insync.replicas"].source != "DYNAMIC_TOPIC_CONFIG"


@pytest.mark.spark40
def test_at_least_once_mode_and_once_run_checkpoints(spark, brokers, make_config, unique_name):
    """Without transactions the copy is still exact on a clean run, and --once checkpoints."""
    from confluent_kafka import Consumer, TopicPartition

    from mirror_lib.replication.migration.failover import translate_group

    create_topic(brokers.source, unique_name, 2)
    produce_exact(brokers.source, unique_name, mixed_records(400, 2, "l"))
    group = f"{unique_name}-g"
    consumer = Consumer({"bootstrap.servers": brokers.source, "group.id": group})
    consumer.commit(
        offsets=[TopicPartition(unique_name, 0, 50), TopicPartition(unique_name, 1, 7)],
        asynchronous=False,
    )
    consumer.close()
    config = make_config(topics=unique_name, groups=group, **{"mirror.delivery": "at_least_once"})
    run_once(spark, config)
    source = consume_all(brokers.source, unique_name)
    target = consume_all(brokers.target, f"A.{unique_name}")
    assert view(target) == view(source)
    offsets = {(r.topic, r.partition): r.offset for r in translate_group(config, group, "A", "B")}
    assert offsets == {(f"A.{unique_name}", 0): 50, (f"A.{unique_name}", 1): 7}


def test_a_filter_matching_nothing_names_the_key_and_the_topics_there(
    spark, brokers, make_config, unique_name
):
    from mirror_lib.errors import ConfigError

    create_topic(brokers.source, unique_name, 1)
    config = make_config(topics="no-such-topic-.*")
    with pytest.raises(ConfigError, match=r"A->B\.topics = 'no-such-topic-\.\*'") as err:
        run_once(spark, config, timeout_s=60)
    assert unique_name in str(err.value) or "..." in str(err.value)


def test_a_remote_topic_the_target_cannot_grow_fails_the_run_by_name(
    spark, brokers, make_config, unique_name
):
    """A remote topic with fewer partitions than its source that the target refuses to grow (on
    Apache Kafka: an ACL denies ALTER; tansu has no CreatePartitions) stays short. Its extra
    partitions have nowhere to go, so the run fails at once, as MM2's task does, naming the
    topic, both counts and the broker's answer, instead of copying the rest and waiting through
    ``mirror.outage.max.seconds`` with no word of why."""
    create_topic(brokers.source, unique_name, 4)
    create_topic(brokers.target, f"A.{unique_name}", 2)
    if brokers.real_kafka:
        deny_on_topic(brokers.target, f"A.{unique_name}", AclOperation.ALTER)
    produce_exact(brokers.source, unique_name, mixed_records(40, 4, "g"))
    config = make_config(topics=unique_name, **{"mirror.outage.max.seconds": "60"})
    started = time.monotonic()
    with pytest.raises(MirrorRuntimeError, match="RemoteTopicError") as err:
        run_once(spark, config, timeout_s=120)
    assert time.monotonic() - started < 50, "failed by the stall watch, not at once"
    text = str(err.value)
    assert f"{unique_name} has 4 partitions; growing A.{unique_name} from 2 was refused" in text
    refusal = "TOPIC_AUTHORIZATION_FAILED" if brokers.real_kafka else "CreatePartitions"
    assert refusal in text and "topics.exclude" in text
    assert consume_all(brokers.target, f"A.{unique_name}", timeout_s=5) == []


def test_record_batches_fit_the_remote_topics_max_message_bytes(
    spark, brokers, make_config, unique_name
):
    """A topic that accepts small batches only: Kafka refuses a batch above its
    max.message.bytes, and librdkafka does not split it (the Java producer MM2 uses does), so
    a catch-up with 1 MB batches would fail on 200-byte records. The test broker does not
    enforce the limit: the batches it stored show whether the copy would have passed."""
    limit = 20_000
    create_topic(brokers.source, unique_name, 2, {"max.message.bytes": str(limit)})
    produce_exact(brokers.source, unique_name, mixed_records(3000, 2, "m"))
    run_once(spark, make_config(topics=unique_name))
    remote = f"A.{unique_name}"
    assert len(consume_all(brokers.target, remote)) == 3000
    sizes = [b.size for p in range(2) for b in read_batches(brokers.target, remote, p)]
    assert max(sizes) <= limit, f"a batch of {max(sizes)} bytes, the topic accepts {limit}"
    assert sum(1 for size in sizes if size > limit * 0.9) >= 2, f"batches stayed small: {sizes}"
