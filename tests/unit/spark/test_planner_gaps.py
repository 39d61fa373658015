"""Gaps the planner finds on a new checkpoint, where it has no last slice to compare with: the
ledger on the target holds positions, the Spark checkpoint does not know the topics."""

from __future__ import annotations

import pytest

from mirror_lib.errors import DataLossError
from mirror_lib.replication.planning.slices import plan_positions
from tests.helpers.fake_planner import Clusters, fake_clusters, planner

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
