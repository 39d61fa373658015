"""A transactional call under a deadline it keeps even when librdkafka does not: its value, its
error, or HungCallError; and the deadline counted from the call's start."""

from __future__ import annotations

import threading
import time
import types

import pytest

from mirror_lib.errors import HungCallError
from mirror_lib.kafka import bounded as bounded_module
from mirror_lib.kafka.bounded import HangCause, bounded


class Clock:
    """``time.monotonic`` for the module under test: real time plus what a test skips."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(
        bounded_module, "time", types.SimpleNamespace(monotonic=c.monotonic), raising=False
    )
    return c


def test_a_call_gives_its_value_or_its_error():
    assert bounded(lambda: 7, 1, "seven") == 7

    def fails() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        bounded(fails, 1, "refusal")


def test_a_call_that_does_not_return_is_given_up_naming_what_it_was():
    release = threading.Event()
    try:
        with pytest.raises(HungCallError, match=r"send_offsets did not return within 0\.1s"):
            bounded(lambda: release.wait(30), 30, "send_offsets", hang_s=0.1)
    finally:
        release.set()


def test_the_deadline_counts_from_the_calls_start_not_from_the_end_of_meanwhile(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
):
    """The caller waited 10 s for acknowledgements while the call hung: past its 5 s deadline,
    the call gets only AFTER_MEANWHILE_S more, not 5 s again."""
    monkeypatch.setattr(bounded_module, "AFTER_MEANWHILE_S", 0.05, raising=False)
    release = threading.Event()

    def acknowledgements() -> None:
        clock.skipped += 10.0

    started = time.monotonic()
    try:
        with pytest.raises(HungCallError, match=r"within 10\.\ds"):
            bounded(lambda: release.wait(30), 30, "send_offsets", acknowledgements, hang_s=5)
    finally:
        release.set()
    assert time.monotonic() - started < 4  # not the whole 5 s after meanwhile


def test_a_call_that_waited_behind_meanwhile_still_returns(clock: Clock):
    """A broker answers a connection's requests in order: the call returns just after what
    meanwhile waited for, past its deadline, and is not taken for hung."""
    release = threading.Event()

    def acknowledgements() -> None:
        clock.skipped += 10.0
        release.set()

    assert bounded(lambda: release.wait(30), 30, "send_offsets", acknowledgements, hang_s=5)


def test_a_cause_seen_while_the_call_runs_makes_it_hung_at_once():
    """Asked once the call ran after_s, a cause the caller sees (the coordinator's broker left
    the cluster) ends the wait then, not at hang_s, and the error names it."""
    release = threading.Event()
    asked: list[float] = []

    def cause() -> str:
        asked.append(time.monotonic())
        return "broker 2 had left the cluster"

    started = time.monotonic()
    try:
        with pytest.raises(HungCallError, match=r"within 0\.\ds while broker 2 had left"):
            bounded(
                lambda: release.wait(30), 30, "send_offsets", hang_s=20, cause=HangCause(0.1, cause)
            )
    finally:
        release.set()
    assert len(asked) == 1 and asked[0] - started >= 0.1


def test_without_a_cause_the_call_gets_its_whole_hang_time():
    release = threading.Event()
    started = time.monotonic()
    try:
        with pytest.raises(HungCallError, match=r"within 0\.\ds \(librdkafka can hang there"):
            bounded(lambda: release.wait(30), 30, "send_offsets", hang_s=0.4,
                    cause=HangCause(0.1, lambda: None))  # fmt: skip
    finally:
        release.set()
    assert time.monotonic() - started >= 0.4


def test_a_call_that_returns_before_after_s_is_not_looked_into():
    asked: list[int] = []
    look = HangCause(2, lambda: str(asked.append(1)))
    assert bounded(lambda: 7, 30, "seven", hang_s=5, cause=look) == 7
    assert not asked
