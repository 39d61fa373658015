"""A slice ends when a topic of its plan is gone or re-created, not when the source is slow to
answer (a rolling restart of A: "Timed out waiting for controller")."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror_lib.errors import BrokerError
from mirror_lib.replication.planning import plan_changes
from mirror_lib.replication.planning.plan_changes import PlanChanges


def failing(code: int):
    def topic_ids(admin: object, topics: object) -> dict[str, str]:
        err = KafkaException(KafkaError(code, "from the broker"))
        raise BrokerError(f"describing topics failed: {err.args[0]}", transient=True) from err

    return topic_ids


@pytest.mark.parametrize(
    ("code", "ends"),
    [
        (KafkaError._TIMED_OUT, False),
        (KafkaError.REQUEST_TIMED_OUT, False),
        (KafkaError._TRANSPORT, False),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, True),
    ],
)
def test_only_an_answer_that_a_topic_is_gone_ends_the_slice(monkeypatch, code, ends):
    ctx = SimpleNamespace(admin=lambda side: object())
    changes = PlanChanges([ctx], {"orders": "id-1"}, None)  # type: ignore[list-item]
    monkeypatch.setattr(plan_changes, "topic_ids", failing(code))
    assert changes.ended_by_replaced() is ends
    monkeypatch.setattr(plan_changes, "topic_ids", lambda admin, topics: {"orders": "id-2"})
    assert changes.replaced() == "source topic re-created: orders (id id-1, now id-2)"


def test_inside_a_slice_a_look_that_has_no_answer_yet_never_holds_the_copy_up(monkeypatch):
    """After a leader of A was killed, describing the plan's topics waited 30 s for a broker
    that went away, twice, with the copy task's transaction open: 70 s to copy again."""
    answered = threading.Event()

    def slow(admin: object, topics: object) -> dict[str, str]:
        answered.wait(10)
        return {"orders": "id-2"}

    ctx = SimpleNamespace(admin=lambda side: object())
    changes = PlanChanges([ctx], {"orders": "id-1"}, None)  # type: ignore[list-item]
    monkeypatch.setattr(plan_changes, "topic_ids", slow)
    started = time.monotonic()
    assert changes.ended_by_replaced(wait=False) is False  # the look starts
    assert changes.ended_by_replaced(wait=False) is False  # no answer yet: no wait either
    assert time.monotonic() - started < 1
    answered.set()
    deadline = time.monotonic() + 10
    while not changes.ended_by_replaced(wait=False):
        assert time.monotonic() < deadline, "the look's answer was never read"
        time.sleep(0.01)


def test_a_look_that_failed_raises_where_its_answer_is_read(monkeypatch):
    def broken(admin: object, topics: object) -> dict[str, str]:
        raise RuntimeError("not a Kafka error")

    ctx = SimpleNamespace(admin=lambda side: object())
    changes = PlanChanges([ctx], {"orders": "id-1"}, None)  # type: ignore[list-item]
    monkeypatch.setattr(plan_changes, "topic_ids", broken)
    changes.ended_by_replaced(wait=False)
    changes._look.done.wait(5)  # type: ignore[union-attr]
    with pytest.raises(RuntimeError):
        changes.ended_by_replaced(wait=False)
