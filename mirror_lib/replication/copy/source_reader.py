"""A copy task's source consumer (:class:`Reader`): what it fetches, when, and for which writers.

Behind the source's head the consumer prefetches and fetches again as soon as its queue drains;
at the head it fetches again as soon as its records were taken, which on Apache Kafka costs a
fetch per producer batch and keeps the wait short. With ``mirror.fetch.pace.ms`` set, a reader
that stays at the head swaps its consumer for one that fetches a partition again only that long
after its last records arrived: a fetch per few records made the test broker tansu, whose fetch
cost grows with the partition, hold up its producers' acknowledgements for seconds
(docs/how-it-works.md#fetches-at-the-head). librdkafka reads its settings once, so the reader
swaps consumers, at the writers' positions.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import admin as ka

from mirror_lib.kafka.admin import left_in, metadata_now
from mirror_lib.mm2.formats import TP

if TYPE_CHECKING:
    from mirror_lib.replication.context import FlowContext
    from mirror_lib.replication.copy.writer import TargetWriter

CONSUME_BATCH = 10_000
HEAD_LAG_RECORDS = CONSUME_BATCH  # fewer records than this to the high watermark: at the head
HEAD_CALM_S = 2.0  # ... for this long before the consumer is swapped for a paced one
LAG_CHECK_S = 1.0
FETCH_WAIT_MS = 1000  # twice MirrorMaker 2's: see make_consumer
LEFT_LOOKUP_S = 2.0  # a look at the source's brokers, after it held records, may take this long
#: ... and its answer serves this long: a source whose producers hold records back (a long
#: linger.ms over many quiet partitions) may have a wait told at every commit
LEFT_REUSE_S = 2.0

#: A record's headers, as confluent-kafka gives and takes them.
Headers = dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]]


class Record(Protocol):
    """A consumed record as the copy reads it (confluent-kafka's ``Message``), or an event of the
    consumer (:meth:`error` set: an end of partition, a failure) that names its partition."""

    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def headers(self) -> Headers | None: ...
    def error(self) -> KafkaError | None: ...


def consumed(consumer: Consumer, n: int, wait: float) -> list[Record]:
    """``consumer.consume(n, wait)``: what a source consumer returns names its partition and
    offset (confluent-kafka types them optional, for the events of other kinds of clients)."""
    return cast("list[Record]", consumer.consume(n, wait))


def make_consumer(ctx: FlowContext, *, paced: bool = False, to_end: bool = False) -> Consumer:
    """A ``read_committed`` source consumer that never joins a group or commits; ``paced``: the
    head's fetch pacing (``mirror.fetch.pace.ms``); ``to_end``: a read that stops at the end, which
    only an empty fetch tells. A flow's own consumer settings win over these defaults."""
    defaults: dict[str, Any] = {
        # a broker answers a waiting fetch as soon as a record is readable, so the wait sets
        # how often quiet partitions are asked, each fetch listing every one of them (librdkafka
        # has no fetch sessions, which spare MirrorMaker 2's consumer, waiting 500 ms, that
        # listing): 1,000 quiet partitions kept the source broker three times as busy at 100 ms
        # as at 500, and a quarter busier at 500 than at 1,000 (docs/performance.md). An end is
        # known only from an empty fetch, and a paced partition is asked again only after the
        # fetch in flight: those wait less.
        "fetch.wait.max.ms": 100 if paced or to_end else FETCH_WAIT_MS,
        "fetch.error.backoff.ms": 50,
        # librdkafka's own default; 32 MB halved the copy rate of 10 KB records
        # (bench/journal/2026-11-23-lean-local-jvm.md)
        "queued.max.messages.kbytes": 65536,
        # librdkafka prefetches 100,000 records per partition by default, and once a queue is
        # over a threshold it waits fetch.queue.backoff.ms (1 s) before fetching it again:
        # 20,000 small records a partition are enough to keep the copy busy, and a short wait
        # keeps the queue from running dry (docs/how-it-works.md#a-cheap-per-record-path)
        "queued.min.messages": 20000,
        "fetch.queue.backoff.ms": 10,
    }
    if paced:  # a partition with records waiting is fetched again mirror.fetch.pace.ms later
        pace = ctx.settings.fetch_pace_ms
        defaults.update({"queued.min.messages": 1, "fetch.queue.backoff.ms": pace})
    return Consumer(
        ctx.client(
            "source",
            "consumer",
            defaults,
            **{
                "group.id": ctx.reader_group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            },
        )
    )


class Reader:
    """One source consumer and the writers it feeds, assigned where the furthest-behind of
    them continues."""

    def __init__(self, ctx: FlowContext, writers: list[TargetWriter]) -> None:
        self.ctx = ctx
        self.consumer = make_consumer(ctx)
        self.writers = writers
        self.paced = False
        self.calm_since: float | None = None  # since when the lag is below HEAD_LAG_RECORDS
        self.next_check = time.monotonic() + LAG_CHECK_S
        self._source_seen: tuple[float, ka.ClusterMetadata | None] = (float("-inf"), None)
        for w in writers:  # a wait the source held is told by what this reader's consumer sees
            w.source_lost = self.left_cluster

    def left_cluster(self, partitions: Iterable[TP]) -> str | None:
        """The brokers that left the source's cluster, of those holding replicas of
        ``partitions``, as this reader's consumer saw them at most :data:`LEFT_REUSE_S` ago
        (None: none, or no answer)."""
        at, cluster = self._source_seen
        now = time.monotonic()
        if now - at >= LEFT_REUSE_S:
            cluster = metadata_now(self.consumer, LEFT_LOOKUP_S)
            self._source_seen = (now, cluster)
        return left_in(cluster, partitions)

    def positions(self) -> dict[TP, int]:
        """Where each open partition continues: the lowest position of the writers."""
        starts: dict[TP, int] = {}
        for w in self.writers:
            for tp, pos in w.open_positions().items():
                starts[tp] = min(pos, starts.get(tp, pos))
        return starts

    def assign(self) -> None:
        """(Re)assign every open partition at the lowest position of its writers."""
        todo = [TopicPartition(t, p, off) for (t, p), off in sorted(self.positions().items())]
        self.consumer.assign(todo)
        self.consumer.resume(todo)  # a reused consumer keeps pauses of earlier tasks

    def take(self, wait: float) -> list[Record]:
        """Up to CONSUME_BATCH records, waiting at most ``wait`` seconds for the first.

        ``consume(n, wait)`` returns only once n records are there or ``wait`` is over, so the
        first record ends the wait and the rest is what is there already: records go to the
        target as they arrive (at least once, that is when they are visible) and a commit that
        falls due is not held up waiting for a full batch.
        """
        if wait <= 0:
            return consumed(self.consumer, CONSUME_BATCH, wait)
        first = consumed(self.consumer, 1, wait)
        return first + consumed(self.consumer, CONSUME_BATCH - 1, 0) if first else first

    def lag(self) -> int:
        """Records between the writers' positions and the last high watermarks fetched."""
        total = 0
        for (t, p), pos in self.positions().items():
            with contextlib.suppress(KafkaException):
                _low, high = self.consumer.get_watermark_offsets(TopicPartition(t, p), cached=True)
                total += max(high - pos, 0)
        return total

    def repace(self, now: float) -> bool:
        """With ``mirror.fetch.pace.ms`` set: swap to a paced consumer once at the head for
        HEAD_CALM_S, back once behind it; True when swapped. Not while a writer holds records (a
        fan-out commit pending)."""
        if now < self.next_check or not self.ctx.settings.fetch_pace_ms:
            return False
        self.next_check = now + LAG_CHECK_S
        behind = self.lag() >= HEAD_LAG_RECORDS
        self.calm_since = None if behind else (self.calm_since or now)
        at_head = self.calm_since is not None and now - self.calm_since >= HEAD_CALM_S
        paced = not behind if self.paced else at_head
        if paced == self.paced or any(w.strategy.held or w.strategy.holding for w in self.writers):
            return False
        old, self.consumer = self.consumer, make_consumer(self.ctx, paced=paced)
        self.paced = paced
        self.assign()
        with contextlib.suppress(Exception):
            old.close()
        return True

    def maybe_pause(self, tp: TP) -> None:
        """Stop fetching ``tp`` once no writer of this reader needs more of it."""
        if all(tp not in w.open_positions() for w in self.writers):
            with contextlib.suppress(KafkaException):
                self.consumer.pause([TopicPartition(*tp)])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.consumer.close()
