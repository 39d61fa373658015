"""Spark's stream reader over the slice planner (mirror_lib.spark.source): the task slots it
hands each slice's partitions to."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError
from mirror_lib.replication.context import FlowContext, stable_slot
from mirror_lib.spark import source
from tests.helpers.fake_planner import Clusters, fake_clusters, planner, spark_reader

PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true", "A->B.topics": "orders", "tasks.max": "1"}  # fmt: skip
FANOUT = {"clusters": "A, B, C", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
          "C.bootstrap.servers": "c:1", "A->B.enabled": "true", "A->C.enabled": "true",
          "topics": "orders", "mirror.fanout.enabled": "true", "tasks.max": "1"}  # fmt: skip


def test_a_replayed_slice_keeps_the_slots_it_was_planned_with(monkeypatch):
    clusters = Clusters({"orders": 4}, {"orders": "id1"})
    clusters.bounds = {("orders", q): (0, 100) for q in range(4)}
    fake_clusters(monkeypatch, clusters)
    two = planner({**PROPS, "tasks.max": "2"})
    start = two.plan(None, first=True)
    end = two.latest_offset(start)
    four = planner({**PROPS, "tasks.max": "4"})  # restarted with another tasks.max
    slots = {work.slot for work in spark_reader(four).partitions(start, end)}
    assert slots == {stable_slot("orders", q, 2) for q in range(4)}


def test_a_once_plan_names_the_targets_with_work_left_in_any_slot_and_their_slots_get_them(
    monkeypatch,
):
    """B is at the snapshot everywhere, C is behind on partition 1: the plan's ``busy`` is C
    alone and the slot of partition 1 gets it (a slot where C fails for good then raises C's
    error). With work for B on partition 0 too, both are busy. A continuous plan has none."""
    clusters = Clusters({"orders": 2}, {"orders": "id1"})
    clusters.bounds = {("orders", q): (0, 100) for q in range(2)}
    fake_clusters(monkeypatch, clusters)
    for slot in range(2):  # each slot's ledger group holds every partition: either is read
        for flow, behind in (("A->B", 100), ("A->C", 40)):
            ledger = {("A.orders", 0): 100, ("A.orders", 1): behind}
            clusters.groups[f"__mirror_ledger.{flow}.{slot}"] = ledger
    p = planner({**FANOUT, "tasks.max": "2"}, "A->B,C")
    p.until = {("orders", 0): 100, ("orders", 1): 100}
    start = p.initial_offset()
    plan = p.latest_offset(start)
    assert plan["busy"] == ["A->C"]
    assert [(w.partitions, w.busy) for w in spark_reader(p).partitions(start, plan)] == [
        ([("orders", 1)], ["A->C"])
    ]
    p.until = {("orders", 0): 120, ("orders", 1): 100}
    assert p.latest_offset(start)["busy"] == ["A->B", "A->C"]
    p.until = {}
    assert "busy" not in p.plan(None, first=True)


def test_a_shared_slice_hands_every_slot_to_one_task_which_knows_each_partitions_slot(
    monkeypatch,
):
    """The task's own slot is the first (its transactional.id); the others share it. A replay
    of the slice keeps its tasks, whatever the planner would choose now."""
    clusters = Clusters({"orders": 4}, {"orders": "id1"})
    clusters.bounds = {("orders", q): (0, 100) for q in range(4)}
    fake_clusters(monkeypatch, clusters)
    p = planner({**PROPS, "tasks.max": "4"})
    start = p.plan(None, first=True)
    end = dict(start, slice=1)
    assert end["t"] == 1
    (work,) = spark_reader(p).partitions(start, end)
    own = {stable_slot("orders", q, 4) for q in range(4)}
    assert (work.slot, sorted(work.shared), work.slots) == (0, sorted(own - {0}), 4)
    assert sorted(work.partitions) == [("orders", q) for q in range(4)]
    split = spark_reader(p).partitions(start, dict(end, t=4))
    assert [(w.slot, w.shared) for w in split] == [(s, []) for s in sorted(own)]


def test_the_planners_fence_raises_for_the_first_slot_not_fenced(monkeypatch):
    """Every slot is fenced at once (target_producer.fence_slots); the first that was not stops
    the plan with its error (a fan-out group leaves that target out). At least once: none is."""
    asked: list[tuple[str, list[int], float]] = []
    errors = {s: BrokerError(f"fencing slot {s} failed", transient=True) for s in (3, 1)}

    def fence_slots(ctx, slots, timeout_s):
        asked.append((ctx.flow.name, list(slots), timeout_s))
        return errors

    monkeypatch.setattr(source, "fence_slots", fence_slots)
    parts = source.KafkaPlanningParts({})
    with pytest.raises(BrokerError) as raised:
        parts.fence(FlowContext.create(parse_config(PROPS), "A->B"), range(4))
    assert raised.value is errors[1]
    assert asked == [("A->B", [0, 1, 2, 3], source.FENCE_S)]
    once = parse_config({**PROPS, "mirror.delivery": "at_least_once"})
    parts.fence(FlowContext.create(once, "A->B"), range(4))
    assert len(asked) == 1
