"""A fan-out target whose remote topic was refused: left out, the others go on (as MM2 fails only
that flow's task); ``--once`` fails with its error once the others reached the snapshot."""

from __future__ import annotations

import logging

import pytest

from mirror_lib.errors import BrokerError, DataLossError, RemoteTopicError
from mirror_lib.replication.planning import slices
from tests.helpers.fake_planner import Clusters, fake_clusters, planner, spark_reader

PROPS = {"clusters": "A, B, C", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "C.bootstrap.servers": "c:1", "A->B.enabled": "true", "A->C.enabled": "true",
         "topics": "orders", "mirror.fanout.enabled": "true", "tasks.max": "1"}  # fmt: skip
GROW = BrokerError("grow topic A.orders to 2 partitions: not supported")


def _clusters(monkeypatch: pytest.MonkeyPatch) -> Clusters:
    clusters = Clusters({"orders": 2}, {"orders": "id1"})
    clusters.bounds = {("orders", q): (0, 100) for q in range(2)}
    clusters.short = {"C": {"A.orders": 1}}  # C's remote topic has 1 of 2 partitions
    fake_clusters(monkeypatch, clusters)
    return clusters


def _target_listing_fails(monkeypatch: pytest.MonkeyPatch, alias: str, error: BrokerError) -> None:
    """Listing the topics of target ``alias`` raises ``error``; every other listing answers."""
    listing = slices.list_topic_partitions

    def listed(admin, timeout_s: float = 30) -> dict[str, int]:
        if admin.side == "target" and admin.alias == alias:
            raise error
        return listing(admin, timeout_s)

    monkeypatch.setattr(slices, "list_topic_partitions", listed)


def test_a_refused_target_is_left_out_and_rejoins_once_its_topic_is_grown(monkeypatch, caplog):
    clusters = _clusters(monkeypatch)
    p = planner(PROPS, "A->B,C", refused={"A->C": {"A.orders": GROW}})
    with caplog.at_level(logging.ERROR):
        plan = p.plan(None, first=True)
    assert plan["topics"]["orders"]["f"] == {"A->B": [0, 1]}
    assert "flow A->C is left out of this slice" in caplog.text
    assert "growing A.orders from 1 was refused" in caplog.text
    plan = p.plan(plan, first=False)  # still refused: left out again, told once
    told = [e for e in clusters.events if e["type"] == "error"]
    assert [(e["flow"], e["action"], e["error_type"]) for e in told] == [
        ("A->C", "left_out", "RemoteTopicError")
    ]
    clusters.short.clear()  # grown by hand: C rejoins at the next slice, without a restart
    plan = p.plan(plan, first=False)
    assert plan["topics"]["orders"]["f"] == {"A->B": [0, 1], "A->C": [0, 1]}


def test_once_fails_with_the_refusal_when_the_others_reached_the_snapshot(monkeypatch):
    _clusters(monkeypatch)
    p = planner(PROPS, "A->B,C", refused={"A->C": {"A.orders": GROW}})
    p.until = {("orders", 0): 100, ("orders", 1): 100}
    start = p.initial_offset()
    assert p.latest_offset(start)["slice"] == 1  # B has records to copy: a slice
    p.until = {("orders", 0): 0, ("orders", 1): 0}  # B is at the snapshot
    with pytest.raises(RemoteTopicError, match="flow A->C"):
        p.latest_offset(start)


def test_a_refusal_on_every_target_fails_the_plan(monkeypatch):
    clusters = _clusters(monkeypatch)
    clusters.short["B"] = {"A.orders": 1}
    p = planner(PROPS, "A->B,C", refused={f: {"A.orders": GROW} for f in ("A->B", "A->C")})
    with pytest.raises(RemoteTopicError, match="flow A->B"):
        p.plan(None, first=True)


def test_a_transient_refusal_leaves_the_target_waiting_without_an_error(monkeypatch):
    _clusters(monkeypatch)
    slow = BrokerError("timed out", transient=True)
    p = planner(PROPS, "A->B,C", refused={"A->C": {"A.orders": slow}})
    p.until = {("orders", 0): 0, ("orders", 1): 0}
    start = p.initial_offset()
    assert start["topics"]["orders"]["f"] == {"A->B": [0, 1], "A->C": [0]}
    assert p.latest_offset(start) == start  # nothing to copy, and no error


def test_a_target_refusing_the_credentials_is_left_out_too(monkeypatch):
    """An authorization error is terminal (MM2's task fails): before, it stopped every target."""
    _clusters(monkeypatch)
    _target_listing_fails(
        monkeypatch, "C", BrokerError("list topics on C: TOPIC_AUTHORIZATION_FAILED")
    )
    p = planner(PROPS, "A->B,C")
    p.until = {("orders", 0): 100, ("orders", 1): 100}
    assert p.initial_offset()["topics"]["orders"]["f"] == {"A->B": [0, 1]}
    p.until = {("orders", 0): 0, ("orders", 1): 0}
    with pytest.raises(BrokerError, match="AUTHORIZATION"):
        p.latest_offset(p.initial_offset())


def test_a_gap_on_one_target_stops_only_that_target(monkeypatch):
    """mirror.on.gap=fail: C's ledger is behind what the source still keeps, B's is not. The
    gap is C's alone; before, its DataLossError stopped B too."""
    clusters = _clusters(monkeypatch)
    clusters.short.clear()
    clusters.bounds = {("orders", q): (50, 100) for q in range(2)}
    for flow, pos in (("A->B", 60), ("A->C", 10)):
        clusters.groups[f"__mirror_ledger.{flow}.0"] = {("A.orders", q): pos for q in range(2)}
    p = planner(PROPS, "A->B,C")
    p.until = {("orders", 0): 100, ("orders", 1): 100}
    start = p.initial_offset()
    assert start["topics"]["orders"]["f"] == {"A->B": [0, 1]}
    assert start["topics"]["orders"]["p"] == {"0": 60, "1": 60}
    p.until = {("orders", 0): 60, ("orders", 1): 60}
    with pytest.raises(DataLossError, match="flow A->C"):
        p.latest_offset(start)
    gaps = [e for e in clusters.events if e["type"] == "gap"]
    assert len(gaps) == 1, "C's gap is published once, not at every slice that leaves C out"


def test_a_once_plan_names_the_targets_with_work_left_in_any_slot_and_their_slots_get_them(
    monkeypatch,
):
    """B is at the snapshot everywhere, C is behind on partition 1: the plan's ``busy`` is C
    alone and the slot of partition 1 gets it (a slot where C fails for good then raises C's
    error). With work for B on partition 0 too, both are busy. A continuous plan has none."""
    clusters = _clusters(monkeypatch)
    clusters.short.clear()
    for slot in range(2):  # each slot's ledger group holds every partition: either is read
        for flow, behind in (("A->B", 100), ("A->C", 40)):
            ledger = {("A.orders", 0): 100, ("A.orders", 1): behind}
            clusters.groups[f"__mirror_ledger.{flow}.{slot}"] = ledger
    p = planner({**PROPS, "tasks.max": "2"}, "A->B,C")
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


def test_a_target_left_out_for_now_counts_as_busy(monkeypatch):
    """B does not answer at planning (a transient error): whether it has work is unknown, so a
    slot where C fails for good must not end the run while B may still need the slices."""
    _clusters(monkeypatch)
    _target_listing_fails(
        monkeypatch, "B", BrokerError("list topics on B: timed out", transient=True)
    )
    p = planner(PROPS, "A->B,C")
    p.until = {("orders", 0): 100, ("orders", 1): 100}
    plan = p.initial_offset()
    assert set(plan["topics"]["orders"]["f"]) == {"A->C"}  # B is not planned in this slice
    assert plan["busy"] == ["A->B", "A->C"]
