"""A flow's query restarted through an outage (nothing read from the clusters first), and
stopped (its producers fenced where its tasks cannot be seen ending)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.read_group import ReadGroup
from mirror_lib.replication.events import RESTART_OPTION, QueryRestart
from mirror_lib.spark import flow_runner, progress
from mirror_lib.spark.copy_task import read_group
from mirror_lib.spark.flow_runner import FlowRunner
from mirror_lib.spark.progress import stop_query
from tests.helpers.fake_query import FakeSession, FakeSparkContext, MissedStopQuery


def test_a_restart_reads_neither_cluster_and_progress_counts_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # two brokers of B cut off: each slot's ledger read waited out its 30 s before the query
    # started again, with the run's loop and `mirror status` held meanwhile
    runner = FlowRunner.__new__(FlowRunner)
    runner._until = {("t", 0): 5}
    runner._sample = (10, 50, 1.0)
    started: list[Any] = []
    monkeypatch.setattr(FlowRunner, "_start_query", lambda _self, until: started.append(until))

    def read(*_a: Any, **_k: Any) -> None:
        raise AssertionError("a restart read the clusters")

    monkeypatch.setattr(FlowRunner, "snapshot", read)
    monkeypatch.setattr(FlowRunner, "delivered", read)
    runner.restart()
    assert started == [{("t", 0): 5}]
    assert runner._sample == (10, 50, 1.0)


class _Streams:
    """A session's ``readStream`` and ``writeStream``: each call returns it; the data source
    options of every query started are kept."""

    def __init__(self) -> None:
        self.given: list[dict[str, str]] = []
        self.readStream = self.writeStream = self

    def options(self, **options: str) -> _Streams:
        self.given.append(options)
        return self

    def __getattr__(self, _name: str) -> Any:  # format, load, option, queryName, trigger
        return lambda *_a, **_k: self

    def start(self) -> str:
        return "query"


def test_a_query_started_again_through_an_outage_tells_its_tasks_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its copy tasks name the outage in the resumed event of the records it held; a start
    that is not a restart tells nothing, and the tasks keep the group's cache key."""
    config = parse_config({
        "clusters": "A, B", "A->B.enabled": "true", "A.bootstrap.servers": "a:9092",
        "B.bootstrap.servers": "b:9092", "mirror.state.dir": str(tmp_path),
    })  # fmt: skip
    streams = _Streams()
    runner = FlowRunner(streams, ReadGroup.create(config, "A->B"))
    monkeypatch.setattr(flow_runner, "register_sources", lambda _spark: None)
    monkeypatch.setattr(flow_runner, "_claim_checkpoint", lambda *_a: None)
    monkeypatch.setattr(FlowRunner, "snapshot", lambda _self: {("t", 0): 5})
    monkeypatch.setattr(FlowRunner, "delivered", lambda _self, parts, *_a: dict.fromkeys(parts, 0))
    runner.start()
    after = QueryRestart(1_000, "0123456789ab", "an outage of target cluster B: NOT_ENOUGH_...")
    runner.restart(after)
    runner.start()
    assert [o.get(RESTART_OPTION) for o in streams.given] == [None, after.option(), None]
    assert read_group(streams.given[1])[1] == read_group(streams.given[0])[1]


def test_the_lag_is_measured_against_the_ends_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot lists every partition's start and end; a lag needs only the ends."""
    runner = FlowRunner.__new__(FlowRunner)
    runner._sample = None
    runner.group = type("Group", (), {"fanout": False})()

    def snapshot(*_a: Any) -> None:
        raise AssertionError("the lag listed the starts too")

    monkeypatch.setattr(FlowRunner, "snapshot", snapshot)
    monkeypatch.setattr(FlowRunner, "ends", lambda _self: {("t", 0): 9, ("t", 1): 4})
    monkeypatch.setattr(FlowRunner, "delivered_by_flow", lambda *_a: {"A->B": {("t", 0): 5}})
    assert runner.progress()["lag"] == 8


class _Query:
    def __init__(self, active: bool) -> None:
        self.isActive = active
        self.stopped = False

    def stop(self) -> None:
        self.stopped, self.isActive = True, False


class _ConnectSession:
    """A Spark Connect session: no SparkContext to watch the tasks with."""

    @property
    def sparkContext(self) -> Any:
        raise RuntimeError("JVM_ATTRIBUTE_NOT_SUPPORTED")


def test_a_stop_says_whether_the_tasks_were_seen_ending() -> None:
    ended = _Query(active=False)
    assert stop_query(_ConnectSession(), ended) and not ended.stopped  # it ended on its own
    running = _Query(active=True)
    assert not stop_query(_ConnectSession(), running)  # stopped, its tasks unseen
    assert running.stopped


def test_a_stop_cancels_a_job_the_query_started_after_the_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress, "CANCEL_EVERY_S", 0.02)
    context = FakeSparkContext([("FAILED", 0)])
    query = MissedStopQuery(context)
    assert stop_query(FakeSession(context), query)
    assert not query.isActive and context.cancelled[0] == "run-1"


def test_a_stop_waits_for_a_task_the_status_store_has_not_counted_yet() -> None:
    """A task that started just after its stage counts 0 active while its job runs; the stop
    waits until the job has ended and then until its task has."""
    context = FakeSparkContext([("RUNNING", 0), ("RUNNING", 0), ("FAILED", 1), ("FAILED", 0)])
    query = MissedStopQuery(context)
    context.cancelled.append("Spark's own")  # this query's stop returns at once
    assert stop_query(FakeSession(context), query)
    assert context.looks == 4


def test_a_stop_says_so_when_the_tasks_outlive_its_wait() -> None:
    context = FakeSparkContext([("FAILED", 1)])
    context.cancelled.append("Spark's own")
    assert not stop_query(FakeSession(context), MissedStopQuery(context), timeout_s=0.3)


@pytest.mark.parametrize(("seen", "delivery", "fenced"), [
    (False, "exactly_once", ["A->B:0", "A->B:1", "A->C:0", "A->C:1"]),
    (True, "exactly_once", []),
    (False, "at_least_once", []),  # no producer to fence
])  # fmt: skip
def test_a_stop_fences_every_slot_when_the_tasks_were_not_seen_ending(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    seen: bool,
    delivery: str,
    fenced: list[str],
) -> None:
    """Slots that were not fenced (the target is out) are named; the next run fences them."""
    config = parse_config({
        "clusters": "A, B, C", "A->B.enabled": "true", "A->C.enabled": "true",
        "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
        "C.bootstrap.servers": "c:9092", "mirror.delivery": delivery,
    })  # fmt: skip
    runner = FlowRunner(None, ReadGroup.create(config, "A->B,C"))
    done: list[str] = []
    monkeypatch.setattr(flow_runner, "stop_query", lambda *_a: seen)

    def fence_slots(ctx: FlowContext, slots: range) -> dict[int, BrokerError]:
        done.extend(f"{ctx.flow.name}:{s}" for s in slots)
        out = BrokerError("fencing mirror-A->C-1 on target cluster C failed", transient=True)
        return {1: out} if ctx.flow.name == "A->C" else {}

    monkeypatch.setattr(flow_runner, "fence_slots", fence_slots)
    with caplog.at_level(logging.WARNING, logger=flow_runner.__name__):
        runner.stop()
    assert done == fenced
    told = [r.getMessage() for r in caplog.records if "not fenced" in r.getMessage()]
    assert told == (
        [
            "flow A->C: slots [1] were not fenced after the stop: fencing mirror-A->C-1 on target "
            "cluster C failed"
        ]
        if fenced
        else []
    )
