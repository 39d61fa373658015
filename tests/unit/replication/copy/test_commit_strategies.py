"""Which commit strategy a target's writer gets, and that it keeps it for the slice."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy import ledger as ledger_module
from mirror_lib.replication.copy import writer as writer_module
from mirror_lib.replication.copy.commit_strategies import (
    ExactlyOnce,
    HeldForFanout,
    RollingAtLeastOnce,
)
from mirror_lib.replication.copy.writer import TargetWriter
from tests.helpers.fake_kafka import FakeLedger, FakeMessage, FakeProducer

PROPS = {"clusters": "A, B, C", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "C.bootstrap.servers": "c:1", "A->B.enabled": "true", "A->C.enabled": "true"}  # fmt: skip
AT_LEAST_ONCE = {"mirror.delivery": "at_least_once"}


def _writer(monkeypatch, props: dict[str, str], *, fanout: bool) -> TargetWriter:
    ctx = FlowContext.create(parse_config({**PROPS, **props}), "A->B")
    monkeypatch.setattr(writer_module, "make_producer", lambda *a, **k: (FakeProducer(), 60_000))
    monkeypatch.setattr(
        ledger_module, "ledger_consumer", lambda *a, **k: FakeLedger({("A.T", 0): 0})
    )
    w = TargetWriter(ctx, 0, [("T", 0)], until={}, options_key="k", fanout=fanout)
    w.start()
    return w


@pytest.mark.parametrize(
    ("props", "fanout", "kind", "alone"),
    [
        ({}, False, ExactlyOnce, None),
        (AT_LEAST_ONCE, False, RollingAtLeastOnce, None),
        ({}, True, HeldForFanout, ExactlyOnce),
        (AT_LEAST_ONCE, True, HeldForFanout, RollingAtLeastOnce),
    ],
    ids=["exactly once", "at least once", "fan-out exactly once", "fan-out at least once"],
)
def test_the_delivery_and_the_group_choose_the_strategy(monkeypatch, props, fanout, kind, alone):
    w = _writer(monkeypatch, props, fanout=fanout)
    assert type(w.strategy) is kind
    if alone is not None:
        assert isinstance(w.strategy, HeldForFanout) and type(w.strategy.alone) is alone
        assert not getattr(w.strategy.alone, "rolls", False)  # a fan-out target never rolls


def test_at_least_once_stops_rolling_once_reports_must_be_exact(monkeypatch):
    """Another producer in a remote partition switches the writer to exact reports mid-slice
    (the copier sets ``exact``): its commits wait for every report from then on."""
    w = _writer(monkeypatch, AT_LEAST_ONCE, fanout=False)
    assert isinstance(w.strategy, RollingAtLeastOnce) and w.strategy.rolls
    w.exact = True
    assert not w.strategy.rolls
    w.accept(("T", 0), [FakeMessage("T", 0, o) for o in range(3)], 0.0)
    assert w.commit(lambda _tp: (-1, -1), roll=True)  # committed at once, nothing sealed
    assert not w.strategy.sealed and w.parts[("T", 0)].committed == 3
