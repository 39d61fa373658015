"""The slice planner (mirror_lib.replication.planning.slices) over clusters in memory
(tests/helpers/fake_planner.py), without brokers or Spark.

- A fan-out target whose remote topic was refused: left out, the others go on (as MM2 fails only
  that flow's task); ``--once`` fails with its error once the others reached the snapshot.
- Gaps the planner finds on a new checkpoint, where it has no last slice to compare with: the
  ledger on the target holds positions, the Spark checkpoint does not know the topics.
- Where the planner starts each partition when the ledger lost an entry or slots changed.
- The planner write-protects the flow's remote topics at its first plan (and as it creates
  them), then on the ACL sync interval (mirror_lib.replication.companions.protection does the
  work).
"""

from __future__ import annotations

import logging

import pytest

from mirror_lib.errors import BrokerError, DataLossError, RemoteTopicError
from mirror_lib.replication.context import stable_slot
from mirror_lib.replication.planning import slices
from mirror_lib.replication.planning.slices import flows_short_of, plan_positions
from mirror_lib.replication.planning.stall import StallWatch
from tests.helpers.fake_planner import Clusters, fake_clusters, planner

# -- a fan-out target left out -----------------------------------------------------------------
FANOUT = {"clusters": "A, B, C", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
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
    p = planner(FANOUT, "A->B,C", refused={"A->C": {"A.orders": GROW}})
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
    p = planner(FANOUT, "A->B,C", refused={"A->C": {"A.orders": GROW}})
    p.until = {("orders", 0): 100, ("orders", 1): 100}
    start = p.initial_offset()
    assert p.latest_offset(start)["slice"] == 1  # B has records to copy: a slice
    p.until = {("orders", 0): 0, ("orders", 1): 0}  # B is at the snapshot
    with pytest.raises(RemoteTopicError, match="flow A->C"):
        p.latest_offset(start)


def test_a_refusal_on_every_target_fails_the_plan(monkeypatch):
    clusters = _clusters(monkeypatch)
    clusters.short["B"] = {"A.orders": 1}
    p = planner(FANOUT, "A->B,C", refused={f: {"A.orders": GROW} for f in ("A->B", "A->C")})
    with pytest.raises(RemoteTopicError, match="flow A->B"):
        p.plan(None, first=True)


def test_a_transient_refusal_leaves_the_target_waiting_without_an_error(monkeypatch):
    _clusters(monkeypatch)
    slow = BrokerError("timed out", transient=True)
    p = planner(FANOUT, "A->B,C", refused={"A->C": {"A.orders": slow}})
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
    p = planner(FANOUT, "A->B,C")
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
    p = planner(FANOUT, "A->B,C")
    p.until = {("orders", 0): 100, ("orders", 1): 100}
    start = p.initial_offset()
    assert start["topics"]["orders"]["f"] == {"A->B": [0, 1]}
    assert start["topics"]["orders"]["p"] == {"0": 60, "1": 60}
    p.until = {("orders", 0): 60, ("orders", 1): 60}
    with pytest.raises(DataLossError, match="flow A->C"):
        p.latest_offset(start)
    gaps = [e for e in clusters.events if e["type"] == "gap"]
    assert len(gaps) == 1, "C's gap is published once, not at every slice that leaves C out"


def test_a_target_left_out_for_now_counts_as_busy(monkeypatch):
    """B does not answer at planning (a transient error): whether it has work is unknown, so a
    slot where C fails for good must not end the run while B may still need the slices."""
    _clusters(monkeypatch)
    _target_listing_fails(
        monkeypatch, "B", BrokerError("list topics on B: timed out", transient=True)
    )
    p = planner(FANOUT, "A->B,C")
    p.until = {("orders", 0): 100, ("orders", 1): 100}
    plan = p.initial_offset()
    assert set(plan["topics"]["orders"]["f"]) == {"A->C"}  # B is not planned in this slice
    assert plan["busy"] == ["A->B", "A->C"]


# -- gaps on a new checkpoint ------------------------------------------------------------------
PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true", "A->B.topics": "orders", "tasks.max": "1"}  # fmt: skip
LEDGER = "__mirror_ledger.A->B.0"


def copied_30(now_id: str, end: int, recorded: str | None) -> Clusters:
    """30 records of ``orders`` were copied (ledger 30); the source now holds ``[0, end)`` under
    ``now_id``; the flow's newest segments event names ``recorded``."""
    clusters = Clusters({"orders": 1}, {"orders": now_id}, {("orders", 0): (0, end)})
    clusters.groups[LEDGER] = {("A.orders", 0): 30}
    clusters.recorded = {"orders": recorded}
    return clusters


def gaps(clusters: Clusters) -> list[tuple]:
    return [
        (e["expected_offset"], e["available_end"], e["action"], e["reason"])
        for e in clusters.events
        if e["type"] == "gap"
    ]


def test_a_topic_recreated_longer_than_was_copied_fails_by_default(monkeypatch):
    """The re-created topic already holds 40 records: without the recorded id the flow went on
    from 30 and skipped the new topic's first 30 records without a word."""
    clusters = copied_30("id2", 40, recorded="id1")
    fake_clusters(monkeypatch, clusters)
    with pytest.raises(DataLossError, match=r"orders\[0\].*deleted and re-created.*\[0, 40\)"):
        planner(PROPS).plan(None, first=True)
    assert gaps(clusters) == [(30, 40, "fail", "topic was deleted and re-created")]
    assert clusters.groups[LEDGER] == {("A.orders", 0): 30}, "the ledger is left as it was"


def test_with_skip_a_recreated_topic_is_copied_from_its_start(monkeypatch):
    clusters = copied_30("id2", 40, recorded="id1")
    fake_clusters(monkeypatch, clusters)
    plan = planner({**PROPS, "A->B.mirror.on.gap": "skip"}).plan(None, first=True)
    assert plan_positions(plan) == {("orders", 0): 0}
    assert clusters.groups[LEDGER] == {("A.orders", 0): 0}
    assert gaps(clusters) == [(30, 40, "skip", "topic was deleted and re-created")]


@pytest.mark.parametrize("recorded", ["id1", None], ids=["same id", "no id recorded"])
def test_the_same_topic_or_an_unknown_id_goes_on_from_the_ledger(monkeypatch, recorded):
    clusters = copied_30("id1", 40, recorded=recorded)
    fake_clusters(monkeypatch, clusters)
    plan = planner(PROPS).plan(None, first=True)
    assert plan_positions(plan) == {("orders", 0): 30}
    assert gaps(clusters) == []


def test_a_log_that_ends_before_the_position_is_a_gap_when_no_id_was_recorded(monkeypatch):
    """The metrics topic no longer holds the topic's segments (retention): the end probe still
    finds a log that ends before the ledger's position."""
    clusters = copied_30("id2", 10, recorded=None)
    clusters.recorded = {}
    clusters.ends = {("orders", 0): 10}
    fake_clusters(monkeypatch, clusters)
    with pytest.raises(DataLossError, match="ends at offset 10, before the flow's position"):
        planner(PROPS).plan(None, first=True)
    assert [g[:3] for g in gaps(clusters)] == [(30, 10, "fail")]


def test_the_metrics_topic_is_read_only_for_positions_the_last_slice_does_not_know(monkeypatch):
    """Asked once, on the new checkpoint's first plan, for topics past their earliest offset;
    never at a later slice, nor for a flow's first start (no ledger), nor at a position that
    leaves nothing to lose."""
    clusters = copied_30("id1", 40, recorded="id1")
    clusters.topics["fresh"] = 1
    clusters.ids["fresh"] = "id9"
    clusters.bounds[("fresh", 0)] = (0, 5)
    fake_clusters(monkeypatch, clusters)
    p = planner({**PROPS, "A->B.topics": "orders, fresh"})
    first = p.plan(None, first=True)
    p.plan(first, first=False)
    assert clusters.asked_recorded == [{"orders"}]
    clusters.asked_recorded.clear()
    clusters.groups[LEDGER] = {("A.orders", 0): 0}  # at the earliest offset: nothing to lose
    planner({**PROPS, "A->B.topics": "orders, fresh"}).plan(None, first=True)
    assert clusters.asked_recorded == []


# -- where each partition starts -------------------------------------------------------------
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


# -- slots that share a task --------------------------------------------------------------------
def _quiet(monkeypatch: pytest.MonkeyPatch, end: int = 100) -> Clusters:
    clusters = Clusters({"orders": 4}, {"orders": "id1"})
    clusters.bounds = {("orders", q): (0, end) for q in range(4)}
    fake_clusters(monkeypatch, clusters)
    return clusters


def test_a_quiet_flow_runs_its_slots_in_one_task_and_a_backlog_in_a_task_each(monkeypatch):
    """Every slot's producer is fenced before the query's first slice and whenever the tasks
    change, never between slices of the same tasks."""
    clusters = _quiet(monkeypatch)
    p = planner({**PROPS, "tasks.max": "4"})
    first = p.plan(None, first=True)
    assert (first["k"], first["t"]) == (4, 1)
    assert clusters.fenced == [("A->B", 4)]
    p._last = (p._last[0] - 300, p._last[1])  # the slice ran its 300 s
    second = p.plan(first, first=False)
    assert second["t"] == 1 and len(clusters.fenced) == 1
    clusters.bounds = {("orders", q): (0, 20_000) for q in range(4)}  # 80,000 records behind
    third = p.plan(second, first=False)
    assert third["t"] == 4 and len(clusters.fenced) == 2


def test_a_shared_slice_that_copied_above_the_rate_or_ended_early_is_followed_by_a_task_each(
    monkeypatch,
):
    clusters = _quiet(monkeypatch, end=0)
    p = planner({**PROPS, "tasks.max": "2", "mirror.slots.shared.below.records.per.second": "10"})
    first = p.plan(None, first=True)
    p._last = (p._last[0] - 300, p._last[1])
    for q in range(4):  # 4 x 1,000 records in the 300 s slice: 13 a second
        group = f"__mirror_ledger.A->B.{stable_slot('orders', q, 2)}"
        clusters.groups[group][("A.orders", q)] = 1000
    clusters.bounds = {("orders", q): (0, 1000) for q in range(4)}
    second = p.plan(first, first=False)
    assert second["t"] == 2
    p._last = (p._last[0] - 300, p._last[1])
    third = p.plan(second, first=False)
    assert third["t"] == 1  # nothing copied since
    assert p.plan(third, first=False)["t"] == 2  # that shared slice ended at once


def test_a_once_run_and_a_flow_that_turned_sharing_off_run_a_task_a_slot(monkeypatch):
    _quiet(monkeypatch)
    p = planner({**PROPS, "tasks.max": "2"})
    p.until = {("orders", q): 100 for q in range(4)}
    assert p.plan(None, first=True)["t"] == 2
    off = planner({**PROPS, "tasks.max": "2", "mirror.slots.shared.below.records.per.second": "0"})
    assert off.plan(None, first=True)["t"] == 2


def test_a_fanout_target_that_cannot_be_fenced_is_left_out_of_the_slice(monkeypatch):
    clusters = _quiet(monkeypatch)
    clusters.unfenceable = {"A->C"}
    p = planner({**FANOUT, "tasks.max": "2"}, "A->B,C")
    plan = p.plan(None, first=True)
    assert plan["topics"]["orders"]["f"] == {"A->B": [0, 1, 2, 3]}
    assert clusters.fenced == [("A->B", 2)]
    alone = planner({**PROPS, "tasks.max": "2", "A->B.topics": "orders"})
    clusters.unfenceable = {"A->B"}
    with pytest.raises(BrokerError, match="fencing"):
        alone.plan(None, first=True)


# -- write protection --------------------------------------------------------------------------
PROTECTED = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
             "A->B.enabled": "true", "A->B.topics": "orders.*"}  # fmt: skip


def test_remote_topics_are_protected_at_the_first_plan_then_on_the_acl_interval(monkeypatch):
    clusters = Clusters({"orders": 1, "orders-eu": 2}, {"orders": "i1", "orders-eu": "i2"})
    clusters.bounds = {("orders", 0): (0, 5), ("orders-eu", 0): (0, 5), ("orders-eu", 1): (0, 5)}
    fake_clusters(monkeypatch, clusters)
    p = planner({**PROTECTED, "sync.topic.acls.interval.seconds": "3600"})
    first = p.plan(None, first=True)
    p.plan(first, first=False)
    topics = ["A.orders", "A.orders-eu"]
    assert p.parts.guard(p.ctx).refreshed == [topics]  # not again within the hour
    p._last_refresh["A->B"]["protect"] -= 3600  # an hour later
    p.plan(first, first=False)
    assert p.parts.guard(p.ctx).refreshed == [topics, topics]


def test_no_protection_when_the_setting_is_off(monkeypatch):
    clusters = Clusters({"orders": 1}, {"orders": "i1"}, {("orders", 0): (0, 5)})
    fake_clusters(monkeypatch, clusters)
    p = planner({**PROTECTED, "mirror.protect.remote.topics": "false"})
    p.plan(None, first=True)
    assert p.parts.guard(p.ctx).refreshed == []


A0, A1 = ("a", 0), ("a", 1)  # a fan-out group's partitions


def test_a_fan_out_stall_names_the_flows_whose_own_ledger_did_not_move() -> None:
    """The group's slowest positions stalled on a-1; only C replicates it (B's ledger has no
    a-1) and B is done on a-0: the error names A->C, not the group's first flow."""
    watch = StallWatch(limit_s=1, min_slices=1)
    watch.observe({A1: 0}, {A0: 10, A1: 20}, now=0)
    stalls = watch.observe({A1: 0}, {A0: 10, A1: 20}, now=5)
    by_flow = {"A->B": {A0: 10}, "A->C": {A0: 10, A1: 0}}
    assert flows_short_of(by_flow, {s.tp: s.end for s in stalls}) == ["A->C"]
    by_flow["A->B"][A1] = 3  # both short of a-1's end
    assert flows_short_of(by_flow, {s.tp: s.end for s in stalls}) == ["A->B", "A->C"]
