"""The latency bench's transactional loop (``bench.loops`` ``eos-loop``): copy and commit."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from bench import loops
from tests.helpers.fake_kafka import FakeErrorEvent, FakeMessage, FakeProducer, ReadingConsumer


def commit(
    producer: FakeProducer,
    source: ReadingConsumer,
    ledger: ReadingConsumer,
    stop: threading.Event | None = None,
) -> bool:
    stop = threading.Event() if stop is None else stop
    return loops.EosCopy(producer, source, ledger, "probe", "A.probe", [0, 1], stop).commit()


def test_records_go_to_the_same_partition_of_the_remote_topic_and_transient_events_are_skipped():
    producer, source, ledger = FakeProducer(), ReadingConsumer({}), ReadingConsumer({})
    loop = loops.EosCopy(producer, source, ledger, "probe", "A.probe", [0, 1], threading.Event())
    read = [
        FakeMessage("probe", 1, 4),
        FakeErrorEvent("probe", 0, KafkaError._TRANSPORT),
        FakeMessage("probe", 0, 9),
    ]
    assert loop.copy(read) == 2
    assert [q[:4] for q in producer.queue] == [
        ("A.probe", 1, b"k4", b"v4"),
        ("A.probe", 0, b"k9", b"v9"),
    ]


def test_a_commit_sends_the_positions_read_as_the_remote_topics_and_retries_the_retriable():
    producer, source, ledger = FakeProducer(), ReadingConsumer({0: 7, 1: 3}), ReadingConsumer({})
    producer.commit_retries = 2
    assert commit(producer, source, ledger)
    sent = [(tp.topic, tp.partition, tp.offset) for tp in producer.committed[0]]
    assert sent == [("A.probe", 0, 7), ("A.probe", 1, 3)]  # B has no topic "probe"
    assert producer.sent[0][0] == "group-metadata"
    assert producer.aborts == 0 and source.seeks == []


def test_an_abortable_commit_is_aborted_and_the_source_read_again_from_the_targets_group():
    producer, source = FakeProducer(), ReadingConsumer({0: 7, 1: 3})
    ledger = ReadingConsumer({}, offsets={0: 5})
    producer.commit_fails_with = KafkaError(KafkaError._MSG_TIMED_OUT)
    producer.produce("A.probe", b"v", b"1", 0)
    assert not commit(producer, source, ledger)
    assert producer.aborts == 1 and producer.committed == []
    # partition 1 has no committed offset: read again from the start
    seeks = [(tp.topic, tp.partition, tp.offset) for tp in source.seeks]
    assert seeks == [("probe", 0, 5), ("probe", 1, 0)]


def test_an_error_that_neither_retries_nor_aborts_ends_the_loop():
    producer, source, ledger = FakeProducer(), ReadingConsumer({0: 1, 1: 1}), ReadingConsumer({})
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    def send_offsets(*_a: object) -> None:
        raise fenced

    producer.send_offsets_to_transaction = send_offsets  # type: ignore[method-assign]
    with pytest.raises(KafkaException):
        commit(producer, source, ledger)
    assert producer.aborts == 0


def test_a_retriable_commit_error_is_raised_once_the_loop_is_told_to_stop():
    """A broker that keeps refusing must not hold the loop past SIGTERM: the bench's grace ends
    in SIGKILL, and the loop's closing figures would be lost."""
    producer, source, ledger = FakeProducer(), ReadingConsumer({0: 1, 1: 1}), ReadingConsumer({})
    producer.commit_retries = 1_000_000  # as good as never
    stop = threading.Event()
    stop.set()
    with pytest.raises(KafkaException) as refused:
        commit(producer, source, ledger, stop)
    assert refused.value.args[0].retriable()
    assert producer.commit_retries == 1_000_000 - 1  # tried once, not again
