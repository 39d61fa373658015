"""Where the planner starts each partition when the ledger lost an entry or slots changed."""

from __future__ import annotations

from mirror_lib.replication.context import stable_slot
from mirror_lib.replication.planning.slices import plan_positions
from tests.helpers.fake_planner import Clusters, fake_clusters, planner, spark_reader

PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true", "A->B.topics": "orders", "tasks.max": "1"}  # fmt: skip


def _group(tasks: int, partition: int) -> str:
    return f"__mirror_ledger.A->B.{stable_slot('orders', partition, tasks)}"


def test_an_expired_ledger_entry_goes_on_from_the_last_plan_not_the_earliest_offset(monkeypatch):
    """The broker expires a group's offset not committed for offsets.retention.minutes: an idle
    partition of a compacted topic was copied again from its start."""
    clusters = Clusters({"orders": 1}, {"orders": "id1"}, {("orders", 0): (0, 1000)})
    fake_clusters(monkeypatch, clusters)
    p = planner(PROPS)
    first = p.plan(None, first=True)
    assert plan_positions(first) == {("orders", 0): 0}
    clusters.groups[_group(1, 0)][("A.orders", 0)] = 1000  # a slice copied everything
    second = p.plan(first, first=False)
    del clusters.groups[_group(1, 0)][("A.orders", 0)]  # then idle for a week: expired
    third = p.plan(second, first=False)
    assert plan_positions(third) == {("orders", 0): 1000}
    assert clusters.groups[_group(1, 0)][("A.orders", 0)] == 1000  # written again


def test_tasks_max_changed_back_reads_the_group_the_last_slice_wrote(monkeypatch):
    """4 -> 2 -> 4 slots: the group of a partition's 4-slot slot still held the position from
    before the first change, and the partition was copied again from there."""
    clusters = Clusters({"orders": 4}, {"orders": "id1"})
    clusters.bounds = {("orders", q): (0, 10_000) for q in range(4)}
    fake_clusters(monkeypatch, clusters)
    plan = planner({**PROPS, "tasks.max": "4"}).plan(None, first=True)
    for q in range(4):
        clusters.groups[_group(4, q)][("A.orders", q)] = 1000
    plan = planner({**PROPS, "tasks.max": "2"}).plan(plan, first=False)
    assert plan_positions(plan) == {("orders", q): 1000 for q in range(4)}
    for q in range(4):
        clusters.groups[_group(2, q)][("A.orders", q)] = 8000
    moved = [q for q in range(4) if _group(4, q) != _group(2, q)]
    assert moved  # the case this test is about
    four = planner({**PROPS, "tasks.max": "4"})
    plan = four.plan(plan, first=False)
    assert plan_positions(plan) == {("orders", q): 8000 for q in range(4)}
    assert all(clusters.groups[_group(4, q)][("A.orders", q)] == 8000 for q in range(4))
    assert plan["k"] == 4


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
