"""Long-running copy tasks (issue 11): a slice is a checkpoint interval, not a unit of latency."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient

from mirror_lib.config.parse import parse_config
from mirror_lib.replication.testhooks import END_EARLY_ENV, HEARTBEAT_DELAY_ENV
from mirror_lib.spark.flow_runner import FlowRunner
from mirror_lib.spark.progress import tasks_ended
from mirror_lib.spark.runner import run_flows
from mirror_lib.testing import embedded
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.helpers.kafka_raw import committed_records
from tests.helpers.mirror_cli import run_mirror
from tests.helpers.waiting import wait_for
from tests.integration.conftest import flow_properties, metrics_events, write_properties
from tests.integration.test_replication import mixed_records


def committed(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple]]:
    """Each partition's committed records (the raw reader: the test broker's read_committed
    also returns the aborted transaction that a stop in the middle of a slice leaves)."""
    return {
        p: [(r.key, r.value, r.headers, r.timestamp) for r in recs]
        for p, recs in committed_records(bootstrap, topic, partitions).items()
    }


def _batch_records(target: str, topic: str) -> int:
    """Records the ``batch`` events of ``topic`` on the metrics topic count."""
    batches = [e for e in metrics_events(target) if e.get("type") == "batch"]
    return sum(e["records"] for e in batches if e.get("topic") == topic)


@pytest.mark.parametrize("slots", [1, 4])
def test_a_clean_stop_in_the_middle_of_a_slice_loses_and_duplicates_nothing(
    spark, brokers, make_config, unique_name, slots
):
    create_topic(brokers.source, unique_name, 2)
    produce_exact(brokers.source, unique_name, mixed_records(3000, 2, "a"))
    config = make_config(
        topics=unique_name,
        **{
            "mirror.batch.duration.seconds": "300",
            "mirror.commit.max.records": "100",
            "tasks.max": str(slots),
        },
    )
    runner = FlowRunner.of(spark, config, "A->B")
    runner.start()
    try:
        deadline = time.monotonic() + 120
        while sum(runner.delivered(runner.snapshot()).values()) < 500:
            runner.raise_if_failed()
            assert time.monotonic() < deadline, "nothing was copied within 120 s"
            time.sleep(0.2)
        assert runner.query.lastProgress is None, "the first slice is still running"
    finally:
        stopping = time.monotonic()
        runner.stop()
    assert time.monotonic() - stopping < 30, "a stop ends the slice's tasks within seconds"
    produce_exact(brokers.source, unique_name, mixed_records(1000, 2, "b"))
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)
    source = committed(brokers.source, unique_name, 2)
    assert sum(len(v) for v in source.values()) == 4000
    assert committed(brokers.target, f"A.{unique_name}", 2) == source


def test_a_slice_that_just_began_is_not_taken_for_ended(spark, brokers, make_config, unique_name):
    """Spark's status store counted a task that started just after its stage as not running
    for up to 2.3 s: a stop then returned while the task copied on (in CI, a topic re-created
    right after was copied on from the old topic's offset). What the stop waits on must say
    "running" from the moment the slice's job shows until the stop, and "ended" after it."""
    create_topic(brokers.source, unique_name, 1)
    produce_exact(brokers.source, unique_name, mixed_records(30, 1, "a"))
    runner = FlowRunner.of(spark, make_config(topics=unique_name), "A->B")
    tracker = spark.sparkContext.statusTracker()
    runner.start()
    try:
        group = str(runner.query.runId)
        wait_for(
            lambda: tracker.getJobIdsForGroup(group), 120, "the first slice's job",
            runner.raise_if_failed, poll_s=0.02,
        )  # fmt: skip
        looked_until = time.monotonic() + 5
        while time.monotonic() < looked_until:
            assert not tasks_ended(tracker, group), "a running slice was taken for ended"
            time.sleep(0.02)
    finally:
        runner.stop()
    assert tasks_ended(tracker, group)


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_records_arrive_while_a_slice_runs(spark, brokers, make_config, unique_name, delivery):
    """Records produced after the slice started are copied within it, without a new batch; at
    least once, through commits the copy loop does not wait for, each record once."""
    create_topic(brokers.source, unique_name, 1)
    config = make_config(
        topics=unique_name,
        **{"mirror.batch.duration.seconds": "300", "mirror.delivery": delivery},
    )
    runner = FlowRunner.of(spark, config, "A->B")
    runner.start()
    try:
        deadline = time.monotonic() + 120
        while not runner.delivered([(unique_name, 0)]):  # the planner wrote the start position
            runner.raise_if_failed()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        for round_ in range(3):
            produce_exact(brokers.source, unique_name, mixed_records(50, 1, f"r{round_}"))
            target = {(unique_name, 0): 50 * (round_ + 1)}
            assert runner.await_caught_up(target, 60), f"round {round_} was not copied in 60 s"
        # the metrics window of a task whose records stopped is told within two intervals (1 s
        # each), in the slice: a stop before that would lose it (metrics_window.py)
        deadline = time.monotonic() + 60
        while (told := _batch_records(brokers.target, unique_name)) < 150:
            runner.raise_if_failed()
            assert time.monotonic() < deadline, f"{told} of 150 records told in 60 s"
            time.sleep(0.5)
        assert runner.query.lastProgress is None, "all of it inside the first slice"
    finally:
        runner.stop()
    source = consume_all(brokers.source, unique_name)
    target = consume_all(brokers.target, f"A.{unique_name}")
    assert [(r.key, r.value, r.timestamp) for r in target] == [
        (r.key, r.value, r.timestamp) for r in source
    ]
    assert _batch_records(brokers.target, unique_name) == 150


def test_the_first_slice_already_copies_the_heartbeats_topic(
    spark, tmp_path, unique_name, monkeypatch
):
    """The heartbeats job runs once before the replication query plans its first slice, so a
    fresh source's ``heartbeats`` topic is copied in that slice, not after the copy tasks' new
    topic discovery (a minute later; a --once run after it waited for that). The first heartbeat
    is held back 5 s, so that a planner not waiting for it would plan without the topic."""
    monkeypatch.setenv(HEARTBEAT_DELAY_ENV, "5")
    if embedded.external_clusters_from_env() is not None:
        pytest.skip("needs a source on which no heartbeats topic exists yet")
    fresh = embedded.start_brokers(2, ["A", "B"], tmp_path / "brokers")
    try:
        source, target = (b.bootstrap_servers for b in fresh)
        create_topic(source, unique_name, 1)
        props = flow_properties(source, target, tmp_path / "state", topics=unique_name)
        props["mirror.batch.duration.seconds"] = "300"
        config = parse_config(props)
        started = time.monotonic()
        run_flows(spark, config, duration_s=20, report=lambda _line: None)
        assert time.monotonic() - started < 60  # one slice: no new-topic discovery happened
        assert consume_all(target, "A.heartbeats"), "heartbeats were not copied in the first slice"
    finally:
        embedded.stop_brokers(fresh)


def test_once_fails_when_its_slices_keep_ending_where_they_started(
    brokers, tmp_path, unique_name, subprocess_env
):
    """Copy tasks that deliver nothing yet do not fail (the hook ends every slice before it
    copies) must not keep ``--once`` planning slices forever: after its outage limit it fails
    with the partitions that did not move, and nothing reached the target."""
    create_topic(brokers.source, unique_name, 2)
    produce_exact(brokers.source, unique_name, mixed_records(10, 2, "s"))
    props = flow_properties(brokers.source, brokers.target, tmp_path / "state", topics=unique_name)
    props["mirror.outage.max.seconds"] = "5"
    config_file = write_properties(tmp_path / "mm2.properties", props)
    env = {**subprocess_env, END_EARLY_ENV: "1"}
    started = time.monotonic()
    out = run_mirror(config_file, env, "--once", timeout_s=240)  # without the check: never ends
    took = time.monotonic() - started
    assert out.returncode == 1, out.stderr[-3000:]
    assert "--once made no progress" in out.stderr, out.stderr[-3000:]
    assert f"{unique_name}-0 at 0 of " in out.stderr and f"{unique_name}-1 at 0 of " in out.stderr
    assert "mirror.outage.max.seconds" in out.stderr
    assert consume_all(brokers.target, f"A.{unique_name}", timeout_s=5) == []
    # the failed run left its start and its error in the flow's events (no stop)
    mine = [
        e
        for e in metrics_events(brokers.target)
        if e.get("state_dir") == props["mirror.state.dir"]
        and e["type"] in ("start", "stop", "error")
    ]
    assert [(e["type"], e["mode"]) for e in mine] == [("start", "once"), ("error", "once")]
    assert "--once made no progress" in mine[1]["reason"] and mine[1]["action"] == "failed"
    print(f"--once failed after {took:.0f}s: {out.stderr.splitlines()[-1]}")


def test_a_fan_out_stall_names_each_flow_whose_ledger_did_not_move(
    brokers, third_broker, tmp_path, unique_name, subprocess_env
):
    """As above for a fan-out group ``A->B,C``: the error names both flows and both targets.
    Before, it named only the group's first flow and its target, also for C's partitions."""
    create_topic(brokers.source, unique_name, 1)
    produce_exact(brokers.source, unique_name, mixed_records(10, 1, "s"))
    props = flow_properties(brokers.source, brokers.target, tmp_path / "state", topics=unique_name)
    props.update({
        "clusters": "A, B, C", "C.bootstrap.servers": third_broker, "A->C.enabled": "true",
        "mirror.fanout.enabled": "true", "mirror.outage.max.seconds": "5",
    })  # fmt: skip
    config_file = write_properties(tmp_path / "mm2.properties", props)
    out = run_mirror(config_file, {**subprocess_env, END_EARLY_ENV: "1"}, "--once", timeout_s=240)
    assert out.returncode == 1, out.stderr[-3000:]
    assert "flow A->B, flow A->C: --once made no progress" in out.stderr, out.stderr[-3000:]
    assert f"{unique_name}-0 at 0 of " in out.stderr
    for alias, bootstrap in (("B", brokers.target), ("C", third_broker)):
        assert f"target cluster {alias} (bootstrap {bootstrap})" in out.stderr


def test_refresh_topics_disabled_keeps_the_topics_found_at_start(
    spark, brokers, make_config, unique_name
):
    """``refresh.topics.enabled = false`` (MM2): a topic created while the run goes on is not
    copied, through new slices and the copier's in-slice look-ups, while the first one is."""
    first, later = f"{unique_name}-a", f"{unique_name}-b"
    create_topic(brokers.source, first, 1)
    config = make_config(
        topics=f"{unique_name}-.*",
        **{
            "refresh.topics.enabled": "false",
            "refresh.topics.interval.seconds": "1",
            "mirror.batch.duration.seconds": "2",
        },
    )
    runner = FlowRunner.of(spark, config, "A->B")
    runner.start()
    try:
        deadline = time.monotonic() + 120
        # the planner wrote the start position
        wait_for(lambda: runner.delivered([(first, 0)]), 120, "the flow's start",
                 runner.raise_if_failed)  # fmt: skip
        create_topic(brokers.source, later, 1)
        produce_exact(brokers.source, later, mixed_records(20, 1, "late"))
        produce_exact(brokers.source, first, mixed_records(20, 1, "first"))
        assert runner.await_caught_up({(first, 0): 20}, 60), "the first topic was not copied"
        seen = (runner.query.lastProgress or {}).get("batchId", -1)
        wait_for(
            lambda: (runner.query.lastProgress or {}).get("batchId", -1) >= seen + 2,
            deadline + 60 - time.monotonic(),
            "two more slices",
            runner.raise_if_failed,
        )
        assert not runner.delivered([(later, 0)]), "a topic created after start was planned"
    finally:
        runner.stop()
    remote = AdminClient({"bootstrap.servers": brokers.target}).list_topics(timeout=10).topics
    assert f"A.{first}" in remote and f"A.{later}" not in remote


def test_a_topic_both_ways_would_copy_back_is_refused_before_anything_is_copied(
    spark, brokers, tmp_path, unique_name
):
    """A->B and B->A with IdentityReplicationPolicy: a topic both copy would loop forever, so
    the run refuses it, naming it, before a record moves."""
    from mirror_lib.errors import ConfigError

    create_topic(brokers.source, unique_name, 1)
    produce_exact(brokers.source, unique_name, mixed_records(5, 1, "loop"))
    props = flow_properties(brokers.source, brokers.target, tmp_path / "state", topics=unique_name)
    props.update({"B->A.enabled": "true", "replication.policy.class": "IdentityReplicationPolicy"})
    config = parse_config(props)
    assert any("back and forth forever" in w for w in config.warnings)
    with pytest.raises(ConfigError, match=rf"A->B\.topics = '{unique_name}'.*forever"):
        run_flows(spark, config, flow_names=["A->B"], once=True, timeout_s=120,
                  report=lambda *_: None)  # fmt: skip
    remote = AdminClient({"bootstrap.servers": brokers.target}).list_topics(timeout=10).topics
    assert unique_name not in remote


def _planned_tasks(runner: FlowRunner) -> list[int]:
    """The copy tasks of each slice in the query's offset log (its plan's ``t``)."""
    import json

    logged = sorted((runner.checkpoint / "offsets").glob("[0-9]*"))
    plans = [json.loads(path.read_text().splitlines()[-1]) for path in logged]
    return [int(plan["t"]) for plan in sorted(plans, key=lambda plan: plan["slice"])]


def test_slots_share_one_task_while_quiet_and_get_a_task_each_once_a_backlog_comes(
    spark, brokers, make_config, unique_name
):
    """The shared task writes each partition's ledger entry in its own slot's group, so the
    switch to a task a slot loses and duplicates nothing."""
    create_topic(brokers.source, unique_name, 4)
    produce_exact(brokers.source, unique_name, mixed_records(40, 4, "q"))
    config = make_config(
        topics=unique_name,
        **{
            "mirror.batch.duration.seconds": "300",
            "tasks.max": "2",
            "mirror.slots.shared.below.records.per.second": "200",
        },
    )
    runner = FlowRunner.of(spark, config, "A->B")
    runner.start()
    try:
        assert runner.await_caught_up({(unique_name, p): 10 for p in range(4)}, 120)
        assert _planned_tasks(runner) == [1], "a quiet flow's slots share one task"
        produce_exact(brokers.source, unique_name, mixed_records(20_000, 4, "b"))
        # the gate ends the shared slice
        wait_for(lambda: len(_planned_tasks(runner)) >= 2, 120, "the shared slice's end",
                 runner.raise_if_failed, poll_s=0.5)  # fmt: skip
        assert _planned_tasks(runner) == [1, 2]
        produce_exact(brokers.source, unique_name, mixed_records(400, 4, "c"))
        assert runner.await_caught_up({(unique_name, p): 5110 for p in range(4)}, 120)
    finally:
        runner.stop()
    source = committed(brokers.source, unique_name, 4)
    assert sum(len(v) for v in source.values()) == 20_440
    assert committed(brokers.target, f"A.{unique_name}", 4) == source
