"""What a planner does about source ranges that vanished (GapPolicy): the gap event is told
once, then the flow fails or, with ``mirror.on.gap = skip``, goes on after the gap; and a lost
ledger entry goes on from the last plan's position (no Kafka)."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import DataLossError
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.source_gaps import GapPolicy, lost_entry

PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true"}  # fmt: skip


@pytest.fixture
def published(monkeypatch) -> list[dict]:
    out: list[dict] = []
    monkeypatch.setattr(events, "publish", lambda ctx, evs, *a, **k: out.extend(evs))
    return out


def _ctx(on_gap: str) -> FlowContext:
    return FlowContext.create(parse_config({**PROPS, "A->B.mirror.on.gap": on_gap}), "A->B")


def test_a_gap_fails_the_flow_by_default_and_says_how_to_go_on(published):
    said = r"data gap in t\[0\] for flow A->B: .*\[50, 90\)"
    with pytest.raises(DataLossError, match=said) as caught:
        GapPolicy().handle(_ctx("fail"), "t", 0, 20, 50, 90, "deleted by retention")
    assert "set A->B.mirror.on.gap=skip to continue from offset 50" in str(caught.value)
    assert [(e["type"], e["partition"]) for e in published] == [("gap", 0)]


def test_a_skipped_gap_goes_on_after_it_and_is_told_once_per_planner(published):
    policy, ctx = GapPolicy(), _ctx("skip")
    assert policy.handle(ctx, "t", 1, 20, 50, 90, "deleted by retention") == 50
    assert policy.handle(ctx, "t", 1, 20, 50, 95, "deleted by retention") == 50  # next slice
    assert len(published) == 1 and published[0]["type"] == "gap"


def test_a_lost_ledger_entry_goes_on_from_the_last_plan():
    ctx = _ctx("fail")
    assert lost_entry(ctx, "t", 0, None) is None
    assert lost_entry(ctx, "t", 0, 42) == 42
