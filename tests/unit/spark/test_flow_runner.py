"""A flow's query restarted through an outage: nothing read from the clusters first."""

from __future__ import annotations

from typing import Any

import pytest

from mirror_lib.spark.flow_runner import FlowRunner


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
