"""A copy task's watch on its source (SourceWatch): a source that stops answering and a bounded
slice that stops moving become transient errors that say where each target and the reader were
(no Kafka: the readers are stand-ins)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy import source_watch
from mirror_lib.replication.copy.source_watch import SourceWatch

ONE_FLOW = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
            "A->B.enabled": "true"}  # fmt: skip
UNTIL = {("t", 0): 200, ("t", 1): 90}


def _watch(until: dict | None = None) -> SourceWatch:
    return SourceWatch(FlowContext.create(parse_config(ONE_FLOW), "A->B"), until or {})


def _reader(position=None, list_topics=None) -> SimpleNamespace:
    writer = SimpleNamespace(
        name="A->B",
        strategy=SimpleNamespace(holding=True),
        open_positions=lambda: {("t", 0): 120},
    )
    consumer = SimpleNamespace(position=position, list_topics=list_topics)
    return SimpleNamespace(writers=[writer], positions=writer.open_positions, consumer=consumer)


def _unreachable(timeout: float):
    raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))


def test_a_stalled_slice_says_where_each_target_and_the_reader_are():
    """Beside two busy loops a fan-out slice once failed with only "while copying [(t, 0)]":
    the error now tells a silent source from a reader gone past the target's records."""
    reader = _reader(lambda tps: [TopicPartition(tp.topic, tp.partition, 150) for tp in tps])
    error = _watch(UNTIL).stall_error([reader])
    text = str(error)
    assert "for 60s while copying t[0] for A->B at offset 120 of 200 (the reader at 150; " in text
    assert "its commit waits for acknowledgements)" in text and error.transient


def test_a_stalled_slice_whose_consumer_cannot_answer_still_says_where_the_target_is():
    def fails(_tps):
        raise KafkaException(KafkaError(KafkaError._STATE))

    text = str(_watch(UNTIL).stall_error([_reader(fails)]))
    assert "t[0] for A->B at offset 120 of 200 (the reader at ?;" in text


def test_only_a_bounded_slice_that_read_nothing_for_a_minute_stalls():
    reader = _reader(lambda tps: [])
    bounded, open_ended = _watch(UNTIL), _watch()
    bounded.check_stalled([reader])
    bounded.last_progress = open_ended.last_progress = bounded.last_progress - 61
    open_ended.check_stalled([reader])
    with pytest.raises(BrokerError, match=r"no data from .* for 60s"):
        bounded.check_stalled([reader])
    bounded.moved()
    bounded.check_stalled([reader])


def test_a_silent_source_is_asked_and_fails_the_slice_only_after_30_s(monkeypatch):
    """An idle source sends nothing: after 10 s of silence the watch asks it for metadata (at
    most every 5 s), and only a source that has not answered for 30 s fails the slice."""
    asked: list[float] = []

    def refused(timeout: float):
        asked.append(timeout)
        _unreachable(timeout)

    watch, reader = _watch(), _reader(list_topics=refused)
    watch.check_source([reader], [])
    assert not asked  # heard from it just now
    watch.last_heard -= source_watch.SILENCE_PROBE_S + 1
    watch.check_source([reader], [])  # asked, no answer, but not for 30 s yet
    watch.check_source([reader], [])  # not asked again within 5 s
    assert asked == [5]
    watch.last_heard -= source_watch.SOURCE_DOWN_S
    watch.next_probe = 0.0
    with pytest.raises(BrokerError, match=r"did not answer for 4[0-9]s") as caught:
        watch.check_source([reader], [])
    assert caught.value.transient and "nothing was lost" in str(caught.value)


def test_a_record_or_an_end_of_partition_counts_as_an_answer():
    watch = _watch()
    watch.last_heard -= 100
    eof = SimpleNamespace(error=lambda: KafkaError(KafkaError._PARTITION_EOF))
    watch.check_source([_reader(list_topics=_unreachable)], [eof])
    assert watch.last_heard > watch.next_probe  # heard now, without asking
