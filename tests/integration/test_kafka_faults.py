"""Faults that only a real broker shows (issue 40): partitions added to a replicated topic,
records deleted under the flow (``delete_records`` and retention) and a transaction that the
broker aborts after ``transaction.timeout.ms``.

The embedded test broker (tansu) implements neither DeleteRecords nor retention nor transaction
timeouts, nor CreatePartitions, so these paths of the engine had never met a broker
(docs/how-it-works.md#nothing-silent, #exactly-once).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.kafka.lookups import partition_bounds
from mirror_lib.replication.testhooks import AFTER_ENV, HOLD_ENV, SECONDS_ENV
from mirror_lib.spark.flow_runner import FlowRunner
from mirror_lib.testing.kafka_broker import SHORT_RETENTION, KafkaOptions, start_kafka, stop_kafka
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.helpers.exactly_once import assert_exactly_once, committed_count
from tests.helpers.kafka_raw import aborted_records
from tests.helpers.mirror_cli import kill_group, run_mirror, start_mirror
from tests.helpers.waiting import wait_for
from tests.integration.conftest import flow_properties, metrics_events, write_properties

pytestmark = pytest.mark.real_kafka

REFRESH_S = 5  # refresh.topics.interval.seconds of the partition growth test
REASON = "records were deleted (retention or DeleteRecords)"  # a gap event's reason


def values(n: int, tag: str, first: int = 0) -> list[dict]:
    return [{"value": f"{tag}{i}", "partition": 0} for i in range(first, first + n)]


def copied(bootstrap: str, remote: str) -> list[str]:
    """The values of partition 0 of a remote topic, as a read_committed consumer sees them."""
    return [r.value.decode() for r in consume_all(bootstrap, remote)]


def gaps(bootstrap: str, topic: str) -> list[tuple]:
    """(expected_offset, available_start, available_end, reason, action) of the gap events."""
    return [
        (e["expected_offset"], e["available_start"], e["available_end"], e["reason"], e["action"])
        for e in metrics_events(bootstrap)
        if e["type"] == "gap" and e["topic"] == topic
    ]


def earliest(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return partition_bounds(admin, [(topic, 0)])[(topic, 0)][0]


# -- partition growth ------------------------------------------------------------------------
def test_partitions_added_to_a_source_topic_are_created_and_copied_within_the_refresh_interval(
    spark, brokers, make_config, unique_name
):
    """CreatePartitions on a replicated topic while a slice runs: the copy task sees the new
    partitions at its next look (``refresh.topics.interval.seconds``) and ends its slice, the
    planner grows the remote topic and copies the new partitions from their start."""
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(brokers.source, topic, 1)
    produce_exact(brokers.source, topic, values(20, "a"))
    config = make_config(
        topics=topic,
        **{
            "refresh.topics.interval.seconds": str(REFRESH_S),
            "mirror.batch.duration.seconds": "300",  # the growth must be seen inside a slice
        },
    )
    runner = FlowRunner.of(spark, config, "A->B")
    runner.start()
    try:
        assert runner.await_caught_up({(topic, 0): 20}, 120), "the first 20 were not copied"
        admin = AdminClient({"bootstrap.servers": brokers.source})
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
        grown = time.monotonic()
        wait_for(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3,
                 30, "the source's third partition")  # fmt: skip
        produce_exact(
            brokers.source,
            topic,
            [{"value": f"p{p}-{i}", "partition": p} for p in (0, 1, 2) for i in range(10)],
        )
        target = AdminClient({"bootstrap.servers": brokers.target})

        def remote_partitions() -> int:
            found = target.list_topics(remote, timeout=10).topics.get(remote)
            return len(found.partitions) if found is not None and found.error is None else 0

        wait_for(lambda: remote_partitions() == 3, 120, "the remote topic's growth",
                 runner.raise_if_failed)  # fmt: skip
        growth_s = time.monotonic() - grown
        ends = {(topic, 0): 30, (topic, 1): 10, (topic, 2): 10}
        assert runner.await_caught_up(ends, 120), "the new partitions were not copied"
    finally:
        runner.stop()
    # the copy task looks every REFRESH_S; then the slice ends and the next one is planned
    assert growth_s < REFRESH_S + 30, f"the remote topic grew {growth_s:.0f} s after the source"
    assert_exactly_once(brokers.source, topic, brokers.target, remote, 3)


# -- records deleted while a slice reads them --------------------------------------------------
@pytest.mark.parametrize("on_gap", ["fail", "skip"])
def test_records_deleted_under_a_running_copy_task_are_a_gap_event(
    spark, brokers, make_config, unique_name, on_gap
):
    """``delete_records`` past the copy task's position: its consumer gets OFFSET_OUT_OF_RANGE.

    The task waits at offset 30 behind an open source transaction (read_committed), so the
    deletion lands before it fetched the records for sure. Either way the gap is recorded once,
    with what the flow expected and what the source holds; ``fail`` stops the flow there and
    ``skip`` goes on from the earliest offset the source holds."""
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(brokers.source, topic, 1)
    produce_exact(brokers.source, topic, values(30, "a"))
    config = make_config(
        topics=topic,
        **{"mirror.batch.duration.seconds": "300", "A->B.mirror.on.gap": on_gap},
    )
    runner = FlowRunner.of(spark, config, "A->B")
    runner.start()
    failure: MirrorRuntimeError | None = None
    try:
        assert runner.await_caught_up({(topic, 0): 30}, 120), "the first 30 were not copied"
        held = ck.Producer({"bootstrap.servers": brokers.source, "transactional.id": topic})
        held.init_transactions(30)
        held.begin_transaction()
        for i in range(30):  # offsets 30..59, not visible to read_committed while open
            held.produce(topic, f"b{i}".encode(), partition=0)
        assert held.flush(30) == 0
        admin = AdminClient({"bootstrap.servers": brokers.source})
        for done in admin.delete_records([ck.TopicPartition(topic, 0, 45)]).values():
            done.result(30)
        if on_gap == "fail":
            with pytest.raises(MirrorRuntimeError, match="records were deleted") as caught:
                runner.await_caught_up({(topic, 0): 10**9}, 120)
            failure = caught.value
        else:
            wait_for(lambda: gaps(brokers.target, topic), 120, "the gap event",
                     runner.raise_if_failed)  # fmt: skip
        held.commit_transaction(30)  # b15..b29 stay visible; the marker is offset 60
        produce_exact(brokers.source, topic, values(10, "c"))  # offsets 61..70
        if on_gap == "skip":
            assert runner.await_caught_up({(topic, 0): 71}, 120), "nothing copied past the gap"
    finally:
        runner.stop()
    kept = [f"b{i}" for i in range(15, 30)] + [f"c{i}" for i in range(10)]
    assert copied(brokers.target, remote) == [f"a{i}" for i in range(30)] + (
        kept if on_gap == "skip" else []
    )
    assert gaps(brokers.target, topic) == [(30, 45, 45, REASON, on_gap)]
    if failure is not None:
        assert "data gap in" in str(failure) and "A->B.mirror.on.gap=skip" in str(failure)


# -- records removed by retention between runs -------------------------------------------------
@pytest.fixture(scope="module")
def short_retention(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A source cluster whose retention checks run every 500 ms (own cluster: broker settings)."""
    started = start_kafka(
        ["retention"], tmp_path_factory.mktemp("retention"), KafkaOptions(settings=SHORT_RETENTION)
    )
    try:
        yield started[0].bootstrap_servers
    finally:
        stop_kafka(started)


def set_retention(bootstrap: str, topic: str, ms: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("retention.ms", str(ms), incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)


def run_once(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_mirror(config, env, "--once", "--timeout", "240", timeout_s=400)


@pytest.mark.parametrize("on_gap", ["fail", "skip"])
def test_records_removed_by_retention_before_they_were_copied_follow_mirror_on_gap(
    short_retention, brokers, tmp_path, unique_name, subprocess_env, on_gap
):
    """30 records are copied; 30 more expire by retention before the next ``mirror run
    --once``. ``fail``: exit code 1 with the gap's message, nothing after it copied; ``skip``:
    exit code 0, the copy goes on from the earliest offset. Both record the gap event in the
    metrics topic and in the ``flow_events`` table."""
    topic, remote = unique_name, f"A.{unique_name}"
    # segments roll every second, so retention can remove all but the newest records
    create_topic(short_retention, topic, 1, {"segment.ms": "1000"})
    produce_exact(short_retention, topic, values(30, "a"))
    props = flow_properties(
        short_retention,
        brokers.target,
        tmp_path / "state",
        topics=topic,
        **{"A->B.mirror.on.gap": on_gap, "mirror.tables.enabled": "true"},
    )
    config = write_properties(tmp_path / "mm2.properties", props)
    first = run_once(config, subprocess_env)
    assert first.returncode == 0, first.stderr[-3000:]
    produce_exact(short_retention, topic, values(30, "b", 30))
    set_retention(short_retention, topic, 1000)
    wait_for(lambda: earliest(short_retention, topic) == 60, 60, "retention of offsets 0..59")
    set_retention(short_retention, topic, 3_600_000)
    produce_exact(short_retention, topic, values(10, "c", 60))
    second = run_once(config, subprocess_env)

    expect = [f"a{i}" for i in range(30)]
    if on_gap == "fail":
        assert second.returncode == 1, second.stderr[-3000:]
        message = second.stderr.strip().splitlines()[-1]
        assert message.startswith("mirror: failed: ")
        assert f"data gap in {topic}[0] for flow A->B: {REASON}" in message
        assert "the flow was at offset 30, the source now holds [60, 70)" in message
        assert "set A->B.mirror.on.gap=skip to continue from offset 60" in message
    else:
        assert second.returncode == 0, second.stderr[-3000:]
        expect += [f"c{i}" for i in range(60, 70)]
    assert copied(brokers.target, remote) == expect
    assert gaps(brokers.target, topic) == [(30, 60, 70, REASON, on_gap)]

    from mirror_lib.config.parse import parse_config
    from mirror_lib.tables.delta_rs import read_table
    from mirror_lib.tables.location import tables_root

    rows = read_table(tables_root(parse_config(props)), "flow_events").to_pylist()
    rows = [r for r in rows if r["type"] == "gap" and r["topic"] == topic]
    assert [(r["partition"], r["reason"], r["action"]) for r in rows] == [(0, REASON, on_gap)]
    assert json.loads(rows[0]["details"])["available_start"] == 60


# -- a transaction the broker aborts ------------------------------------------------------------
def test_a_transaction_held_past_its_timeout_is_aborted_by_the_broker_and_copied_again(
    brokers, tmp_path, unique_name, subprocess_env
):
    """A copy task holds its first transaction open for 12 s (test hook) with the user's
    ``B.producer.transaction.timeout.ms = 5000``. The broker aborts it after 5 s; the task's
    commit then finds its producer fenced, the slice fails as transient, and the restarted
    query copies it again from the ledger: every record once, none of the aborted ones visible
    to read_committed. Without the user's timeout (librdkafka's 60 s) the commit would succeed.
    """
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(brokers.source, topic, 2)
    produce_exact(
        brokers.source,
        topic,
        [{"key": f"k{i}", "value": f"v{i}", "partition": i % 2} for i in range(200)],
    )
    props = flow_properties(
        brokers.source,
        brokers.target,
        tmp_path / "state",
        topics=topic,
        **{"B.producer.transaction.timeout.ms": "5000"},
    )
    config = write_properties(tmp_path / "mm2.properties", props)
    held = tmp_path / "held"
    env = {**subprocess_env, HOLD_ENV: str(held), AFTER_ENV: "0", SECONDS_ENV: "12"}
    log = tmp_path / "run.log"
    # a continuous run: its copy tasks' errors reach the run with their text (see README)
    proc = start_mirror(config, env, "--duration", "600", log=log)

    def alive() -> None:
        assert proc.poll() is None, f"mirror run ended early:\n{log.read_text()[-3000:]}"

    try:
        wait_for(held.exists, 300, "the held transaction", alive)
        wait_for(lambda: committed_count(brokers.target, remote, 2) >= 200, 300,
                 "the replay of the aborted transaction", alive)  # fmt: skip
        wait_for(lambda: "outage over" in log.read_text(), 60, "the end of the outage", alive)
    finally:
        kill_group(proc)
    text = log.read_text()
    assert "longer than the producer's transaction.timeout.ms = 5000, so the broker aborted" in text
    assert aborted_records(brokers.target, remote, 2) > 0, "the held transaction was not aborted"
    assert_exactly_once(brokers.source, topic, brokers.target, remote, 2)
