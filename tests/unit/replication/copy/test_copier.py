"""A copy task (SliceCopy): what it does with its source consumer's error events, how long its
loop waits, and the loop run with Python's cyclic garbage collector paused (issue 11: CPU per
record). Which failures of one target leave the others copying: test_fanout_targets.py."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError
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
