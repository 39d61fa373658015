"""Which failures of a commit or a record the run retries."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy import ledger as ledger_module
from mirror_lib.replication.copy import target_producer
from mirror_lib.replication.copy import writer as writer_module
from mirror_lib.replication.copy.target_producer import commit_error, record_error, timed_out_error
from mirror_lib.replication.copy.writer import TargetWriter
from tests.helpers.fake_kafka import FakeLedger, FakeMessage, FakeProducer

PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:1",
    "B.bootstrap.servers": "b:1",
    "A->B.enabled": "true",
}


@pytest.mark.parametrize(
    "code", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._TRANSPORT]
)
def test_a_topic_deleted_on_the_target_is_retried_so_the_planner_creates_it_again(code):
    """The metrics topic deleted by hand stopped the run for good, although a restarted
    query's planner creates it again."""
    assert commit_error(KafkaError(code), [], "B").transient
    assert record_error(KafkaError(code), "T[0] offset 5", "B").transient  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "code", [KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.INVALID_PRODUCER_EPOCH]
)
def test_refused_or_fenced_is_not_retried(code):
    assert not commit_error(KafkaError(code), [], "B").transient


FENCED = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)


def test_fenced_after_the_transaction_timeout_is_retried_and_says_why():
    """Kafka aborts a transaction open past the producer's transaction.timeout.ms and bumps its
    epoch; librdkafka reports that as fenced. Nothing of it is visible, so the run retries."""
    error = timed_out_error(FENCED, 9.2, 5000, "target cluster B", "B.producer.transaction...")
    assert error is not None and error.transient
    assert "open for 9.2 s, longer than the producer's transaction.timeout.ms = 5000" in str(error)
    assert "B.producer.transaction..." in str(error)


@pytest.mark.parametrize(
    ("err", "open_s"),
    [(FENCED, 4.9), (KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), 9.0)],
    ids=["fenced-sooner", "not-fenced"],
)
def test_fenced_sooner_or_another_error_is_not_a_timeout(err, open_s):
    """Fenced within the timeout: another instance of the slot runs (terminal, as before)."""
    assert timed_out_error(err, open_s, 5000, "B", "B.producer.transaction.timeout.ms") is None


def _fenced_writer(monkeypatch, open_s: float):
    """A writer whose commit is fenced after its transaction was open ``open_s`` seconds, with
    a transaction.timeout.ms of 5000."""
    ctx = FlowContext.create(parse_config(PROPS), "A->B")
    producer = FakeProducer()

    def fenced(_timeout: float = 0) -> None:
        raise KafkaException(FENCED)

    producer.commit_transaction = fenced  # type: ignore[method-assign]
    monkeypatch.setattr(writer_module, "make_producer", lambda *a, **k: (producer, 5000))
    ledger = FakeLedger({("A.T", 0): 0})
    monkeypatch.setattr(ledger_module, "ledger_consumer", lambda *a, **k: ledger)
    w = TargetWriter(ctx, 0, [("T", 0)], until={}, options_key="k")
    w.start()
    w.accept(("T", 0), [FakeMessage("T", 0, o) for o in range(5)], 0.0)
    w.txn_start -= open_s
    return w


@pytest.mark.parametrize(("open_s", "transient"), [(6.0, True), (0.0, False)])
def test_a_commit_fenced_after_the_timeout_is_transient_sooner_terminal(
    monkeypatch, open_s, transient
):
    w = _fenced_writer(monkeypatch, open_s)
    with pytest.raises(BrokerError) as exc:
        w.commit(lambda _tp: (-1, -1), wait=True)
    assert exc.value.transient is transient
    assert ("transaction.timeout.ms = 5000" in str(exc.value)) is transient


def test_the_producer_reports_the_users_transaction_timeout(monkeypatch):
    """``B.producer.transaction.timeout.ms`` reaches the producer and the timeout check."""
    made = []

    def producer(conf):
        made.append(conf)
        return FakeProducer()

    monkeypatch.setattr(target_producer, "Producer", producer)
    monkeypatch.setattr(target_producer, "batch_limit", lambda *a: None)
    for extra, want in (({}, 60000), ({"B.producer.transaction.timeout.ms": "5000"}, 5000)):
        ctx = FlowContext.create(parse_config({**PROPS, **extra}), "A->B")
        _producer, timeout_ms = target_producer.make_producer(ctx, 0)
        assert timeout_ms == want
    assert "transaction.timeout.ms" not in made[0]
    assert made[1]["transaction.timeout.ms"] == "5000"
