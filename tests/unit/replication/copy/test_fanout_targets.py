"""A fan-out slice's targets (Targets): which failures of one target leave the other targets of
the group copying, what is told of it, and when the slot fails instead (no Kafka: the writers
are stand-ins)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError, RecordTooLargeError
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.fanout_targets import Targets
from mirror_lib.replication.copy.writer import CopyResult

PROPS = {"clusters": "A, B, C", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "C.bootstrap.servers": "c:1", "A->B.enabled": "true", "A->C.enabled": "true"}  # fmt: skip
TOO_LARGE = RecordTooLargeError("record t[1] offset 50 is larger than target cluster C accepts")


@pytest.fixture(autouse=True)
def published(monkeypatch) -> list[dict]:
    """The events the copier publishes (no Kafka); each test starts with none told."""
    out: list[dict] = []
    monkeypatch.setattr(events, "publish", lambda ctx, evs, *a, **k: out.extend(evs))
    monkeypatch.setattr(events, "_told_left_out", set())
    return out


class _Writer:
    def __init__(self, name: str, done: bool = False) -> None:
        self.name, self._done, self.dropped = name, done, False

    def drop(self) -> None:
        self.dropped = True

    def done(self) -> bool:
        return self._done


def _copy(*, fanout: bool = True, until: bool = False, b_done: bool = False) -> Targets:
    """A slice's targets, only the bookkeeping (no Kafka)."""
    config = parse_config(PROPS)
    contexts = [FlowContext.create(config, f) for f in (("A->B", "A->C") if fanout else ("A->B",))]
    copy = Targets(
        contexts,
        {("t", 0): 10} if until else {},
        CopyResult(0),
        {"A->B", "A->C"} if until and fanout else None,
    )
    copy.writers = [_Writer("A->B", b_done)] + ([_Writer("A->C")] if fanout else [])
    copy.readers = [SimpleNamespace(writers=list(copy.writers), close=lambda: None)]
    return copy


@pytest.mark.parametrize(
    "exc",
    [
        TOO_LARGE,
        BrokerError("TOPIC_AUTHORIZATION_FAILED"),
        BrokerError("timed out", transient=True),
    ],
)
def test_a_target_that_fails_leaves_the_slice_and_the_other_goes_on(exc, published):
    copy = _copy()
    c = copy.writers[1]
    copy.detach_or_raise("A->C", exc)
    assert c.dropped and [w.name for w in copy.writers] == ["A->B"]
    assert [w.name for w in copy.readers[0].writers] == ["A->B"]
    terminal = not getattr(exc, "transient", False)
    assert ("A->C" in copy.failed) == terminal
    told = [(e["type"], e["flow"], e["action"], e["reason"]) for e in published]
    assert told == ([("error", "A->C", "left_out", str(exc))] if terminal else [])


def test_a_target_left_out_at_every_slice_is_told_once(published):
    for _ in range(3):  # three slices of the same worker process
        _copy().detach_or_raise("A->C", TOO_LARGE)
    assert len(published) == 1 and published[0]["error_type"] == "RecordTooLargeError"


def test_a_target_that_refuses_the_event_too_still_leaves_quietly(monkeypatch, caplog):
    def refused(*_a, **_k):
        raise BrokerError("SASL authentication failed")

    monkeypatch.setattr(events, "publish", refused)
    copy = _copy()
    copy.detach_or_raise("A->C", BrokerError("SASL authentication failed"))
    assert [w.name for w in copy.writers] == ["A->B"]
    assert "A->C: its error event was not written" in caplog.text


def test_without_fan_out_every_failure_is_raised():
    copy = _copy(fanout=False)
    with pytest.raises(RecordTooLargeError):
        copy.detach_or_raise("A->B", TOO_LARGE)


def test_a_fenced_producer_stops_the_slot_even_in_a_group():
    """Fatal: another instance took over the transactional ids, so no target may go on."""
    fenced = KafkaException(KafkaError(KafkaError._FENCED, fatal=True))
    with pytest.raises(KafkaException):
        _copy().detach_or_raise("A->C", fenced)


@pytest.mark.parametrize(("b_transient", "transient"), [(False, False), (True, True)])
def test_when_every_target_failed_the_slot_fails_terminally_only_if_each_did(
    b_transient, transient
):
    copy = _copy()
    copy.detach_or_raise("A->C", TOO_LARGE)
    with pytest.raises(BrokerError, match="every target of A->B,C failed") as caught:
        copy.detach_or_raise("A->B", BrokerError("refused", transient=b_transient))
    assert caught.value.transient == transient


def test_once_raises_a_terminal_failure_once_the_planner_found_no_other_target_with_work():
    copy = _copy(until=True)
    copy.detach_or_raise("A->C", TOO_LARGE)
    copy.writers[0]._done = True  # B reached the snapshot in this slot: other slots may not yet
    copy.raise_if_only_failed_left()
    copy = _copy(until=True, b_done=True)
    copy.busy = {"A->C"}  # B had nothing left in any slot when the slice was planned
    copy.detach_or_raise("A->C", TOO_LARGE)
    with pytest.raises(RecordTooLargeError, match="target cluster C"):
        copy.raise_if_only_failed_left()
    continuous = _copy(b_done=True)
    continuous.busy = {"A->C"}
    continuous.detach_or_raise("A->C", TOO_LARGE)
    continuous.raise_if_only_failed_left()  # a continuous run keeps B going


@pytest.mark.parametrize(("busy", "raised"), [({"A->B", "A->C"}, False), ({"A->C"}, True),
                                              (None, False)])  # fmt: skip
def test_a_slot_where_only_the_failing_target_had_work_ends_or_raises_by_the_plan(busy, raised):
    """C replicates a topic B does not: this slot has only C's writer. C failing for good must not
    cut short B's slice in another slot; once the plan says only C has work left, it raises C's
    error (a slice planned without ``busy``: the stall watch ends the run)."""
    copy = _copy(until=True)
    copy.busy = busy
    copy.writers, copy.readers[0].writers = copy.writers[1:], copy.writers[1:]
    copy.detach_or_raise("A->C", TOO_LARGE)
    assert copy.writers == [] and copy.readers == [] and "A->C" in copy.failed
    if raised:
        with pytest.raises(RecordTooLargeError):
            copy.raise_if_only_failed_left()
    else:
        copy.raise_if_only_failed_left()
