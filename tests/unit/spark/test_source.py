"""Spark's stream reader over the slice planner (mirror_lib.spark.source): the task slots it
hands each slice's partitions to."""

from __future__ import annotations

from mirror_lib.replication.context import stable_slot
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
