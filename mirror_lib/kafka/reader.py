"""Read a topic to its end: the committed records of every partition, or a transient error.

Shared by translation (segments), checkpoints, cutover and MirrorClient; :func:`read_ranges`
by the materialization of internal topics (its Spark source and its `--once` catch-up).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.admin import AUTH_ERRORS

#: Consumer settings of a read to the end, under the caller's own. The end of a partition is
#: known only from an empty fetch, which the broker holds for ``fetch.wait.max.ms``: at
#: librdkafka's 500 ms every read of a topic with nothing new took half a second or more.
READ_TO_END: dict[str, Any] = {"fetch.wait.max.ms": 100, "fetch.error.backoff.ms": 50}


class Consumed(Protocol):
    """A record a consumer of assigned partitions returns (confluent-kafka's ``Message``), or an
    event of it (:meth:`error` set: an end of partition, a failure); also a delivered record, as
    a producer reports it.

    Records and ends of partitions name their topic, partition and offset, which confluent-kafka
    types optional for the messages of other kinds of clients; a record's headers are a list of
    ``(name, bytes or None)``.
    """

    def error(self) -> KafkaError | None: ...
    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def timestamp(self) -> tuple[int, int]: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[tuple[str, bytes | None]] | None: ...


def consume(consumer: Consumer, n: int, timeout: float) -> list[Consumed]:
    """``consumer.consume(n, timeout=timeout)``, typed as what a consumer of assigned partitions
    returns (:class:`Consumed`)."""
    return cast("list[Consumed]", consumer.consume(n, timeout=timeout))


def _read_error(what: str, err: KafkaError, conf: dict[str, Any]) -> BrokerError:
    """A read's error: transient, unless credentials or ACLs refused it (no retry mends that;
    the group is named, as a principal needs READ on it too)."""
    if err.name() not in AUTH_ERRORS:
        return BrokerError(f"reading {what}: {err.str()}", transient=True)
    group = conf.get("group.id")
    as_group = f" with consumer group {group}" if group else ""
    return BrokerError(f"reading {what}{as_group} was refused: {err.str()}", transient=False)


def read_topic(
    conf: dict[str, Any],
    topic: str,
    timeout_s: float = 60,
    start: int = 0,
    partition: int | None = None,
    until: Mapping[int, int] | None = None,
) -> Iterator[Consumed]:
    """Committed records of ``topic`` (every partition, or only ``partition``) from offset
    ``start`` to the end.

    Yields nothing for a missing topic. ``timeout_s`` bounds the wait for progress, not the
    whole read (a long topic takes as long as it takes): no record and no end for ``timeout_s``
    raises a transient :class:`BrokerError` rather than returning a partial answer. ``until``
    (partition -> offset) reads on past an end found below that offset: a transaction still open
    there holds back the end a read_committed reader finds, and with it the committed records
    written after that transaction began.
    """
    conf = {
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **READ_TO_END,
        **conf,
        "enable.partition.eof": True,
    }
    conf.setdefault("isolation.level", "read_committed")
    consumer = Consumer(conf)
    try:
        md = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if md is None or md.error is not None:
            return
        pending = set(md.partitions) if partition is None else {partition} & set(md.partitions)
        consumer.assign([TopicPartition(topic, p, start) for p in pending])
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"reading {topic}: no record and no end for {timeout_s}s", transient=True
                )
            msgs = consume(consumer, 10_000, timeout=0.1)  # consume() waits for all 10k
            if msgs:  # progress: the wait starts again (once per batch, not per record)
                deadline = time.monotonic() + timeout_s
            for msg in msgs:
                err = msg.error()
                if err is None:
                    yield msg
                elif err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= (until or {}).get(msg.partition(), 0):
                        pending.discard(msg.partition())
                else:
                    raise _read_error(topic, err, conf)
    except KafkaException as exc:
        raise BrokerError(f"reading {topic}: {exc}", transient=True) from exc
    finally:
        consumer.close()


#: The longest chunk of :func:`read_back`: its reader's own time per record counts toward the
#: chunk's timeout (about 10 us per metrics record here, so a few seconds a chunk).
MAX_CHUNK = 250_000


class Chunk(NamedTuple):
    """Records of offsets ``[start, stop)`` of a partition; ``at_start``: nothing before.

    ``records`` is read as it is iterated: iterate it before taking the next chunk.
    """

    start: int
    stop: int
    records: Iterable[Consumed]
    at_start: bool


def read_back(
    conf: dict[str, Any],
    topic: str,
    end: int | None = None,
    timeout_s: float = 60,
    first: int = 20_000,
) -> Iterator[Chunk]:
    """Partition 0 of ``topic`` from ``end`` (default: its end) backwards, in :class:`Chunk` s.

    Each chunk holds the committed records of offsets ``[start, stop)`` in offset order. The
    first is ``first`` offsets long (without ``end`` it reads on to the end it finds, past its
    ``stop`` when the broker's end offset was behind), each next one twice as long, at most
    ``MAX_CHUNK``; the last starts at the partition's earliest offset. For readers that need
    only the newest part of a long topic and know when they have enough. Nothing for a missing
    topic.
    """
    conf = {**conf, "isolation.level": "read_committed"}
    consumer = Consumer(conf)
    try:
        md = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if md is None or md.error is not None or 0 not in md.partitions:
            return
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerError(f"reading {topic}: {exc}", transient=True) from exc
    finally:
        consumer.close()
    size = first
    # the broker's end can be a hint only (tansu's, docs/testing.md#test-broker-limits)
    if end is None:
        start = max(low, high - size)
        tail = read_topic(conf, topic, timeout_s, start=start, partition=0)
        yield Chunk(start, max(start, high), tail, start == low)  # may go past ``stop``
        stop = start
        size = min(size * 2, MAX_CHUNK)
    else:
        stop = end
    while stop > low:
        start = max(low, stop - size)
        yield Chunk(
            start, stop, read_ranges(conf, [(topic, 0, start, stop)], timeout_s), start == low
        )
        stop, size = start, min(size * 2, MAX_CHUNK)


def read_ranges(
    conf: dict[str, Any],
    ranges: Iterable[tuple[str, int, int, int]],
    timeout_s: float | None = None,
) -> Iterator[Consumed]:
    """The committed records of each ``(topic, partition, start, stop)`` range, in offset order.

    A range ends at its stop offset, or at the partition's end when compaction, retention or
    transaction markers leave nothing more below it. ``timeout_s`` bounds the whole read with a
    transient :class:`BrokerError`; ``None`` reads until every range ends.
    """
    ranges = list(ranges)
    conf = {  # not the cluster's consumer settings: aborted records must never become rows
        **READ_TO_END,
        **conf,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",  # a range that retention removed ends, not fails
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
    }
    consumer = Consumer(conf)
    todo = {(t, p): stop for t, p, _, stop in ranges}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(t, p, start) for t, p, start, _ in ranges])
        while todo:
            if deadline is not None and time.monotonic() > deadline:
                left = ", ".join(f"{t}-{p}" for t, p in sorted(todo))
                raise BrokerError(f"reading {left}: no end after {timeout_s}s", transient=True)
            for msg in consume(consumer, 5000, timeout=0.2):
                tp = (msg.topic(), msg.partition())
                stop = todo.get(tp)
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise _read_error(f"{tp[0]}-{tp[1]}", err, conf)
                    if stop is not None and msg.offset() >= stop:
                        todo.pop(tp, None)
                    continue
                if stop is None or msg.offset() >= stop:
                    todo.pop(tp, None)
                    continue
                yield msg
                if msg.offset() >= stop - 1:
                    todo.pop(tp, None)
    except KafkaException as exc:
        raise BrokerError(f"reading {len(ranges)} partitions: {exc}", transient=True) from exc
    finally:
        consumer.close()
