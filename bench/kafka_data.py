"""Kafka data for the benchmark: bulk load, verifying scans, topics, the metrics topic.

Every copy is verified by ``scan``: read to end-of-partition (read_committed), per-partition
record counts and a CRC32 chain over key+value, compared with the source.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

PARTITIONS = 4


def value_pool() -> bytes:
    """1 MiB of random bytes that record values are cut from."""
    return os.urandom(1 << 20)


def make_value(pool: bytes, i: int, size: int) -> bytes:
    """The value of record ``i``: ``size`` bytes of the pool."""
    off = (i * 7919) % (len(pool) - size)
    return pool[off : off + size]


def produce_bulk(bootstrap: str, topic: str, n: int, size: int) -> int:
    """``n`` records of ``size`` bytes over the partitions, batched; the last record of each
    partition alone in its batch (tansu high-watermark workaround). Returns key+value bytes."""
    pool = value_pool()
    errors: list[str] = []

    def error_cb(err: ck.KafkaError) -> None:
        errors.append(str(err))

    fast = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "acks": "all",
            "error_cb": error_cb,
        }
    )
    total = 0
    for i in range(n - PARTITIONS):
        key, value = b"k%d" % (i % 100_000), make_value(pool, i, size)
        total += len(key) + len(value)
        while True:
            try:
                fast.produce(topic, value, key, partition=i % PARTITIONS)
                break
            except BufferError:
                fast.poll(0.05)
        if i % 10_000 == 0:
            fast.poll(0)
    if fast.flush(300) > 0 or errors:
        raise RuntimeError(f"bulk produce to {topic} failed: {errors or 'flush timed out'}")
    single = ck.Producer(
        {"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0, "acks": "all"}
    )
    for i in range(n - PARTITIONS, n):
        key, value = b"k%d" % (i % 100_000), make_value(pool, i, size)
        total += len(key) + len(value)
        single.produce(topic, value, key, partition=i % PARTITIONS)
        single.flush(30)
    if single.flush(30) > 0:
        raise RuntimeError(f"tail produce to {topic} failed")
    return total


@dataclass
class Scan:
    """What a topic holds: per-partition counts and CRC32 chains, key+value bytes."""

    counts: dict[int, int]
    crcs: dict[int, int]
    bytes: int

    @property
    def records(self) -> int:
        return sum(self.counts.values())


def scan(bootstrap: str, topic: str, timeout_s: float = 900) -> Scan:
    """Read every partition to end-of-partition (read_committed): counts and CRC32 chains."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-scan-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
            "fetch.error.backoff.ms": 10,
            "queued.max.messages.kbytes": 65536,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        parts = sorted(meta.partitions)
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in parts])
        counts, crcs, nbytes = dict.fromkeys(parts, 0), dict.fromkeys(parts, 0), 0
        pending = set(parts)
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"scan of {topic}: no EOF on {sorted(pending)}")
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == ck.KafkaError._PARTITION_EOF:
                        pending.discard(m.partition())
                        continue
                    raise RuntimeError(f"scan of {topic}: {err}")
                p, k, v = m.partition(), m.key() or b"", m.value() or b""
                counts[p] += 1
                crcs[p] = zlib.crc32(v, zlib.crc32(k, crcs[p]))
                nbytes += len(k) + len(v)
        return Scan(counts, crcs, nbytes)
    finally:
        consumer.close()


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    """Create a topic with the engine's test helper (waits until it is there)."""
    # mirror_lib is imported when used: a --engine-ref export must come first on sys.path
    from mirror_lib.testing.kafka_io import create_topic as _create

    _create(bootstrap, name, partitions)


def wipe(bootstrap: str, groups: tuple[str, ...] = ()) -> None:
    """Delete every (non-``__``) topic and the given consumer groups on a broker."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=30).topics if not t.startswith("__")]
    if names:
        for fut in admin.delete_topics(names, operation_timeout=30).values():
            with contextlib.suppress(ck.KafkaException):
                fut.result(60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = set(names) & set(admin.list_topics(timeout=30).topics)
            if not left:
                break
            time.sleep(0.2)
    if groups:
        for fut in admin.delete_consumer_groups(list(groups), request_timeout=30).values():
            with contextlib.suppress(ck.KafkaException):
                fut.result(60)


def read_metrics(bootstrap: str, topic: str = "mm2-metrics.A.internal") -> list[dict[str, Any]]:
    """Every record of the flow's metrics topic, decoded (none if it does not exist)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for attempt in range(3):  # brokers just rolled can fail a first metadata request
        try:
            topics = admin.list_topics(timeout=30).topics
            break
        except ck.KafkaException:
            if attempt == 2:
                raise
            time.sleep(5)
    if topic not in topics:
        return []
    from mirror_lib.testing.kafka_io import consume_all

    return [json.loads(r.value) for r in consume_all(bootstrap, topic, timeout_s=120)]


def high_watermark(bootstrap: str, topic: str, p: int) -> int:
    """The high watermark of one partition."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-hw"})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1]
    finally:
        c.close()


def last_records(bootstrap: str, topic: str) -> dict[int, bytes]:
    """Key+value of the last record of each partition (at its high watermark - 1)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-last-{uuid.uuid4().hex}"})
    try:
        out: dict[int, bytes] = {}
        for p in range(PARTITIONS):
            hw = c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1]
            c.assign([ck.TopicPartition(topic, p, hw - 1)])
            m = c.poll(30)
            if m is None or m.error() is not None:
                raise RuntimeError(
                    f"cannot read the last record of {topic}[{p}]: {m and m.error()}"
                )
            out[p] = (m.key() or b"") + (m.value() or b"")
        return out
    finally:
        c.close()


class TailWatch:
    """Whether a copy holds the source's last record of every partition yet: a copy that keeps
    each partition's order (MM2, the connector told the partition) is then complete, which the
    verifying ``scan`` confirms. Reads only the last few offsets of each copied partition
    (read_committed; transaction markers take offsets too)."""

    def __init__(self, bootstrap: str, topic: str, last: dict[int, bytes]) -> None:
        self.topic, self.last = topic, last
        self.done: set[int] = set()
        self.closed = False
        self.consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-tail-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )

    def complete(self) -> bool:
        """True once every partition's last record is in the copy."""
        for p in set(self.last) - self.done:
            tp = ck.TopicPartition(self.topic, p)
            try:
                hw = self.consumer.get_watermark_offsets(tp, timeout=5)[1]
            except ck.KafkaException:
                return False  # the copy's topic is not there yet
            if hw <= 0:
                return False
            self.consumer.assign([ck.TopicPartition(self.topic, p, max(0, hw - 8))])
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                m = self.consumer.poll(0.1)
                if m is None or m.error() is not None:
                    continue  # not fetched yet, or an open transaction (read_committed waits)
                if (m.key() or b"") + (m.value() or b"") == self.last[p]:
                    self.done.add(p)
                    break
                if m.offset() >= hw - 1:
                    break
            if p not in self.done:
                return False
        return True

    def close(self) -> None:
        """Close the consumer (once; again is a no-op)."""
        if not self.closed:
            self.closed = True
            self.consumer.close()
