"""Exact produce and read-back helpers over confluent-kafka for tests, the bench and the demo.

:func:`create_topic`, :func:`produce_exact` (keys, values, headers, timestamps as given) and
:func:`consume_all` (every committed record of a topic, in order per partition).
"""

from __future__ import annotations

import dataclasses
import functools
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import confluent_kafka as ck
from confluent_kafka.admin import NewTopic

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.admin import admin_client, is_transient
from mirror_lib.kafka.reader import Consumed


@dataclasses.dataclass(frozen=True)
class Record:
    """A record as produced/consumed; ``timestamp`` is CreateTime in ms (None if not available)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None


def _to_record(m: Consumed) -> Record:
    ts_type, ts = m.timestamp()
    headers = tuple((k, v) for k, v in (m.headers() or []))
    stamp = None if ts_type == 0 else ts  # 0 = TIMESTAMP_NOT_AVAILABLE
    return Record(m.topic(), m.partition(), m.offset(), m.key(), m.value(), headers, stamp)


def produce_exact(
    bootstrap: str,
    topic: str,
    records: Iterable[Mapping[str, Any] | Record],
    config: Mapping[str, Any] | None = None,
    timeout_s: float = 30,
) -> list[Record]:
    """Produce one record per batch (tansu watermark workaround); return the delivered records.

    Each item is a :class:`Record` or a mapping with optional ``key``, ``value``, ``headers``,
    ``partition`` and ``timestamp`` (ms); str keys/values are sent as UTF-8.
    """
    conf = {
        "bootstrap.servers": bootstrap,
        "batch.num.messages": 1,
        "linger.ms": 0,
        "acks": "all",
        "max.in.flight.requests.per.connection": 1,  # keeps order; idempotence costs 0.5 s here
        **(config or {}),
    }
    producer = ck.Producer(conf)
    _learn_leaders(producer, topic, time.monotonic() + timeout_s)
    delivered: list[tuple[int, Record]] = []  # (the order it was given in, the record)
    errors: list[str] = []

    def on_delivery(
        headers: tuple[tuple[str, bytes | None], ...],
        order: int,
        err: ck.KafkaError | None,
        msg: Consumed,
    ) -> None:  # delivery reports carry no headers: keep the ones we sent
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append((order, dataclasses.replace(_to_record(msg), headers=headers)))

    for order, r in enumerate(records):
        d = r.__dict__ if isinstance(r, Record) else r
        kw: dict[str, Any] = {k: d[k] for k in ("partition", "timestamp") if d.get(k) is not None}
        hdrs = tuple(
            (k, v.encode() if isinstance(v, str) else v) for k, v in d.get("headers") or ()
        )
        if hdrs:
            kw["headers"] = list(hdrs)
        cb = functools.partial(on_delivery, hdrs, order)
        producer.produce(topic, d.get("value"), d.get("key"), on_delivery=cb, **kw)
        if order == 0:
            # The producer's own handle of the topic learns its partitions only after the first
            # produce: until then librdkafka parks records unassigned and may queue them behind
            # later ones once it learns them. The first record, delivered alone, teaches it.
            producer.flush(timeout_s)
        producer.poll(0)
    if producer.flush(timeout_s) > 0 or errors:
        raise BrokerError(
            f"produce to {topic} on {bootstrap} failed: {errors or 'flush timed out'}",
            transient=True,
        )
    _check_order(topic, bootstrap, delivered)
    return sorted((rec for _order, rec in delivered), key=lambda x: (x.partition, x.offset))


def _learn_leaders(producer: ck.Producer, topic: str, deadline: float) -> None:
    """Wait until the producer knows a leader for every partition of ``topic``.

    Without idempotence librdkafka parks a record whose partition has no known leader and may
    send it behind the next ones once the leader is known. A topic this call auto-creates is
    first reported with no leader, so knowing the topic is not enough: know its leaders.
    """
    while True:
        left = deadline - time.monotonic()
        meta = producer.list_topics(topic, timeout=max(0.2, min(left, 5.0))).topics.get(topic)
        if (
            meta is not None
            and meta.error is None
            and meta.partitions
            and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())
        ):
            return
        if left <= 0:
            return  # produce anyway: flush and the order check below report what went wrong
        time.sleep(0.1)


def _check_order(topic: str, bootstrap: str, delivered: list[tuple[int, Record]]) -> None:
    """Records of one partition must land in the order they were given: a test that expects
    ``a0, a1, ...`` on a copy must not start from a source that holds ``a1, a0, ...``."""
    last: dict[int, tuple[int, int]] = {}
    for order, rec in sorted(delivered, key=lambda pair: pair[0]):
        before = last.get(rec.partition)
        if before is not None and rec.offset < before[1]:
            raise BrokerError(
                f"produce to {topic} on {bootstrap}: record {order} landed at offset "
                f"{rec.offset} of partition {rec.partition}, before record {before[0]} "
                f"(offset {before[1]})"
            )
        last[rec.partition] = (order, rec.offset)


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: Sequence[int] | None = None,
    isolation_level: str = "read_committed",
    timeout_s: float = 30,
    config: Mapping[str, Any] | None = None,
) -> list[Record]:
    """Read partitions from the beginning to end-of-partition (not watermarks), ordered."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"mirror-test-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation_level,
        "fetch.wait.max.ms": 10,  # the defaults make every EOF take about 1 s
        "fetch.error.backoff.ms": 10,
        **(config or {}),
    }
    consumer = ck.Consumer(conf)
    try:
        if partitions is None:
            meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
            if meta is None or meta.error is not None:
                raise BrokerError(f"topic {topic} not found on {bootstrap}")
            partitions = sorted(meta.partitions)
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
        pending, out = set(partitions), []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{topic}: partitions {sorted(pending)} did not reach EOF in "
                    f"{timeout_s}s on {bootstrap}",
                    transient=True,
                )
            m = cast("Consumed | None", consumer.poll(0.2))  # of assigned partitions
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == ck.KafkaError._PARTITION_EOF:
                    pending.discard(m.partition())
                    continue
                raise BrokerError(f"consume {topic} on {bootstrap}: {err}")
            out.append(_to_record(m))
        return sorted(out, key=lambda x: (x.partition, x.offset))
    finally:
        consumer.close()


def commit_group(
    bootstrap: str, group: str, offsets: Iterable[ck.TopicPartition], timeout_s: float = 60
) -> None:
    """Commit ``offsets`` for ``group`` without joining it, asking again while a new cluster's
    group coordinator loads or moves (COORDINATOR_LOAD_IN_PROGRESS and the other codes of
    :func:`~mirror_lib.kafka.admin.is_transient`: librdkafka flags no failed commit retriable)."""
    tps = list(offsets)
    deadline = time.monotonic() + timeout_s
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    try:
        while True:
            try:
                consumer.commit(offsets=tps, asynchronous=False)
                return
            except ck.KafkaException as exc:
                if not is_transient(exc.args[0]) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 30,
    replication_factor: int = -1,
) -> None:
    """Create a topic and wait until its metadata is visible. Replication factor -1: the
    cluster's ``default.replication.factor`` (3 on a multi-broker test cluster)."""
    # errors only: an info line of librdkafka's (BGQUEUE when the client goes with an answer
    # pending) would reach the output of `mirror demo`, which creates its topics here
    admin = admin_client({"bootstrap.servers": bootstrap, "log_level": 3})
    topic = NewTopic(name, partitions, replication_factor, config=dict(config or {}))
    fut = admin.create_topics([topic])[name]
    fut.result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        t = admin.list_topics(name, timeout=5).topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.05)
    raise BrokerError(f"topic {name} not visible on {bootstrap} after {timeout_s}s", transient=True)
