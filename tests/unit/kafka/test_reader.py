"""read_topic waits for progress, not for the whole topic: a long topic is read to its end."""

from __future__ import annotations

from typing import Any

import pytest

from mirror_lib.errors import BrokerError
from mirror_lib.kafka import reader
from tests.helpers.fake_kafka import FakeConsumer, FakeEof, FakeMessage


class _SlowConsumer(FakeConsumer):
    """One message per consume(); each call takes ``step`` seconds of a fake clock."""

    def __init__(self, messages: list[Any], clock: list[float], step: float) -> None:
        super().__init__(messages)
        self.clock, self.step = clock, step

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        self.clock[0] += self.step
        return super().consume(1, timeout)


def _read(
    monkeypatch: pytest.MonkeyPatch, messages: list[Any], step: float, **kw: Any
) -> list[int]:
    clock = [0.0]
    monkeypatch.setattr(reader.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(reader, "Consumer", lambda _conf: _SlowConsumer(messages, clock, step))
    return [m.offset() for m in reader.read_topic({}, "t", timeout_s=5, **kw)]


def test_a_read_longer_than_the_timeout_ends_while_records_keep_coming(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = [FakeMessage("t", 0, i) for i in range(10)] + [FakeEof("t", 0, 10)]
    assert _read(monkeypatch, messages, step=4) == list(range(10))  # 44 s in all


def test_no_record_and_no_end_for_the_timeout_is_a_transient_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(BrokerError, match="no record and no end for 5s") as err:
        _read(monkeypatch, [], step=2)
    assert err.value.transient


def test_an_end_below_until_is_read_past(monkeypatch: pytest.MonkeyPatch) -> None:
    # an open transaction at 3 held the end there; once decided, 4-6 (committed) come, end at 8
    messages = [FakeMessage("t", 0, i) for i in range(3)] + [FakeEof("t", 0, 3)]
    messages += [FakeMessage("t", 0, i) for i in (4, 5, 6)] + [FakeEof("t", 0, 8)]
    assert _read(monkeypatch, messages, step=1) == [0, 1, 2]
    assert _read(monkeypatch, messages, step=1, until={0: 8}) == [0, 1, 2, 4, 5, 6]
