"""A copy task (SliceCopy): which failures of one target leave the other targets of a fan-out
group copying, what it does with its source consumer's error events, and the loop run with
Python's cyclic garbage collector paused (issue 11: CPU per record)."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError, RecordTooLargeError
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.copier import (
    FANOUT_POLL_S,
    IDLE_POLL_S,
    PENDING_POLL_S,
    SliceCopy,
    cyclic_gc_paused,
)
from mirror_lib.replication.copy.fanout_targets import Targets
from mirror_lib.replication.copy.source_reader import Reader
from mirror_lib.replication.copy.writer import CopyResult
from tests.helpers.fake_kafka import FakeErrorEvent

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


ONE_FLOW = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true"}  # fmt: skip


def _reading_copy(**props: str) -> tuple[SliceCopy, Reader]:
    copy = SliceCopy.__new__(SliceCopy)  # only the event handling, no Kafka
    copy.ctx = FlowContext.create(parse_config({**ONE_FLOW, **props}), "A->B")
    copy.end_early = False
    reader = Reader.__new__(Reader)
    reader.writers = []
    return copy, reader


@pytest.mark.parametrize("on_gap", ["fail", "skip"])
@pytest.mark.parametrize("code", [KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE])
def test_records_gone_from_the_source_end_the_slice_whatever_mirror_on_gap_says(code, on_gap):
    """The planner records the gap event and then fails or skips it. Before, with ``fail`` the
    task raised at once and no gap event was written (Apache Kafka's DeleteRecords under a
    running slice); the run's error came from a worker and a restart recorded the gap."""
    copy, reader = _reading_copy(**{"A->B.mirror.on.gap": on_gap})
    copy._event(reader, FakeErrorEvent("T", 0, code))
    assert copy.end_early


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    ],
)
def test_credentials_or_acls_refused_in_the_middle_of_a_slice_are_terminal(code):
    """Retried as an outage before, so a revoked ACL or rotated password looped for ever."""
    copy, reader = _reading_copy()
    with pytest.raises(BrokerError) as caught:
        copy._event(reader, FakeErrorEvent("T", 0, code))
    assert not caught.value.transient


def test_a_transport_error_is_retried():
    copy, reader = _reading_copy()
    copy._event(reader, FakeErrorEvent("T", 0, KafkaError._TRANSPORT))
    assert not copy.end_early


@pytest.fixture(autouse=True)
def _gc_enabled_afterwards():
    yield
    gc.enable()


def test_the_collector_is_paused_inside_and_enabled_again_after():
    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_is_enabled_again_after_an_error():
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        raise RuntimeError("the loop failed")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with cyclic_gc_paused():
        pass
    assert not gc.isenabled()


def test_slice_copy_runs_its_loop_with_the_collector_paused(monkeypatch):
    seen: list[bool] = []
    copy = SliceCopy.__new__(SliceCopy)  # no Kafka: only run()'s own steps are exercised
    copy.duration_s, copy.until = 1.0, {}
    copy.result = CopyResult(0)
    copy.targets = Targets([], copy.until, copy.result)
    monkeypatch.setattr(SliceCopy, "_start", lambda self: seen.append(gc.isenabled()))
    monkeypatch.setattr(SliceCopy, "_loop", lambda self, deadline: seen.append(gc.isenabled()))
    copy.run()
    assert seen == [True, False]
    assert gc.isenabled()


def _waiting(readers: int, *, in_txn: bool = False, holding: bool = False) -> SliceCopy:
    copy = SliceCopy.__new__(SliceCopy)  # no Kafka: only the loop's wait is asked
    strategy = SimpleNamespace(holding=holding, sealed=False)
    timing = SimpleNamespace(interval=0.02)
    writer = SimpleNamespace(strategy=strategy, in_txn=in_txn, txn_start=100.0, timing=timing)
    copy.targets = SimpleNamespace(writers=[writer], readers=[object()] * readers)
    return copy


def test_a_quiet_copy_task_wakes_twice_a_second_a_fan_out_reader_ten_times():
    """The first record ends the wait, so a quiet task waits half a second between looks; a
    second reader is looked at without waiting after the first, so its records wait at most
    0.1 s. An open transaction and a commit waiting for acknowledgements wake it sooner."""
    assert _waiting(1)._poll_timeout(now=100.0) == IDLE_POLL_S == 0.5
    assert _waiting(2)._poll_timeout(now=100.0) == FANOUT_POLL_S == 0.1
    assert _waiting(1, in_txn=True)._poll_timeout(now=100.005) == pytest.approx(0.015)
    assert _waiting(1, holding=True)._poll_timeout(now=100.0) == PENDING_POLL_S
