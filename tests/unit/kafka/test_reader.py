"""read_topic waits for progress, not for the whole topic: a long topic is read to its end."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from mirror_lib.errors import BrokerError
from mirror_lib.kafka import reader
from tests.helpers.fake_kafka import FakeConsumer, FakeEof, FakeErrorEvent, FakeMessage


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


def test_a_refused_group_is_no_outage_and_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """With an authorizer the reader's group needs READ: no retry mends a refusal (an outage
    would be retried forever), and the message names the group to grant."""
    refused = FakeErrorEvent("t", 0, KafkaError.GROUP_AUTHORIZATION_FAILED)
    monkeypatch.setattr(reader, "Consumer", lambda _conf: FakeConsumer([refused]))
    with pytest.raises(BrokerError, match=r"with consumer group __mirror_reader\.A->B") as err:
        list(reader.read_topic({"group.id": "__mirror_reader.A->B"}, "t", timeout_s=5))
    assert not err.value.transient
    outage = FakeErrorEvent("t", 0, KafkaError._TRANSPORT)
    monkeypatch.setattr(reader, "Consumer", lambda _conf: FakeConsumer([outage]))
    with pytest.raises(BrokerError) as err:
        list(reader.read_topic({"group.id": "__mirror_reader.A->B"}, "t", timeout_s=5))
    assert err.value.transient


@pytest.mark.parametrize("read", ["read_topic", "read_ranges"])
def test_a_read_to_the_end_does_not_wait_half_a_second_for_its_last_empty_fetch(
    monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    """The end is known from an empty fetch, held by the broker for ``fetch.wait.max.ms``:
    librdkafka's 500 ms made every read of a quiet topic take that long. A caller's own
    setting stays."""
    confs: list[dict[str, Any]] = []

    def consumer(conf: dict[str, Any]) -> FakeConsumer:
        confs.append(conf)
        return FakeConsumer([FakeEof("t", 0, 5)])

    monkeypatch.setattr(reader, "Consumer", consumer)

    def run(conf: dict[str, Any]) -> None:
        if read == "read_topic":
            list(reader.read_topic(conf, "t", timeout_s=5))
        else:
            list(reader.read_ranges(conf, [("t", 0, 0, 5)], timeout_s=5))

    run({})
    run({"fetch.wait.max.ms": 400})
    assert [c["fetch.wait.max.ms"] for c in confs] == [100, 400]
    assert confs[0]["fetch.error.backoff.ms"] == 50
