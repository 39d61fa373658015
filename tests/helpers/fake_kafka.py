"""Stand-ins for confluent-kafka's Producer, Consumer and Message, for unit tests of a
copy task's per-target bookkeeping (:mod:`mirror_lib.replication.copy.writer`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

#: (error code, transient): what a lookup meets, an outage it retries or a refusal it does not.
OUTAGES_AND_REFUSALS = [
    (KafkaError._TRANSPORT, True),
    (KafkaError._TIMED_OUT, True),
    (KafkaError._AUTHENTICATION, False),
    (KafkaError.SASL_AUTHENTICATION_FAILED, False),
    (KafkaError.GROUP_AUTHORIZATION_FAILED, False),
]


class FakeMessage:
    """A consumed record: topic, partition, offset, key, value (``k<offset>``/``v<offset>``
    unless given), CreateTime."""

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        ts: int = 1000,
        key: bytes | None = None,
        value: bytes | None = None,
    ) -> None:
        self._t, self._p, self._o, self._ts = topic, partition, offset, ts
        self._k = b"k%d" % offset if key is None else key
        self._v = b"v%d" % offset if value is None else value

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes:
        return self._k

    def value(self) -> bytes:
        return self._v

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts)

    def headers(self) -> None:
        return None

    def error(self) -> None:
        return None


class FakeEof(FakeMessage):
    """The end-of-partition event ``enable.partition.eof`` delivers as a message."""

    def error(self) -> KafkaError:  # type: ignore[override]
        return KafkaError(KafkaError._PARTITION_EOF)


class FakeErrorEvent(FakeMessage):
    """A consumer error event of ``code`` on a partition, as librdkafka delivers it."""

    def __init__(self, topic: str, partition: int, code: int) -> None:
        super().__init__(topic, partition, -1)
        self._code = code

    def error(self) -> KafkaError:  # type: ignore[override]
        return KafkaError(self._code)


class CommittingConsumer:
    """A group's consumer: counts commits, of which the first ``fail`` raise like librdkafka;
    ``committed`` answers "not coordinator" ``unready`` times first, then ``offsets``."""

    def __init__(
        self, fail: int = 0, unready: int = 0, offsets: dict[int, int] | None = None
    ) -> None:
        self.commits = 0
        self.fail, self.unready = fail, unready
        self.offsets = offsets or {}

    def commit(self, asynchronous: bool = True) -> None:
        assert asynchronous is False
        if self.fail:
            self.fail -= 1
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
        self.commits += 1

    def committed(self, parts: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        if self.unready:
            self.unready -= 1
            raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))
        return [
            TopicPartition(tp.topic, tp.partition, self.offsets.get(tp.partition, -1001))
            for tp in parts
        ]


class ReadingConsumer(CommittingConsumer):
    """A consumer that has read up to ``positions`` (partition -> next offset) and records
    where it was sought (:attr:`seeks`)."""

    def __init__(self, positions: dict[int, int], offsets: dict[int, int] | None = None) -> None:
        super().__init__(offsets=offsets)
        self.positions = positions
        self.seeks: list[TopicPartition] = []

    def position(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(t.topic, t.partition, self.positions[t.partition]) for t in parts]

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append(tp)

    def consumer_group_metadata(self) -> object:
        return "group-metadata"


class _Delivered:
    def __init__(self, offset: int) -> None:
        self._o = offset

    def offset(self) -> int:
        return self._o


class FakeProducer:
    """Queues records until :attr:`acking` is on; then ``flush``/``poll`` acknowledge them with
    consecutive downstream offsets per partition. Transactions are recorded, not enforced.
    :attr:`log` holds the values acknowledged per partition, :attr:`records` every acknowledged
    record as (topic, partition, key, value)."""

    def __init__(self) -> None:
        self.acking = True
        self.queue: list[tuple[str, int, Any, bytes, Any]] = []
        self.log: dict[tuple[str, int], list[bytes]] = {}
        self.records: list[tuple[str, int, Any, bytes]] = []
        self.next: dict[tuple[str, int], int] = {}
        self.committed: list[list[TopicPartition]] = []
        self.pending_offsets: list[TopicPartition] = []
        self.sent: list[tuple[object, list[TopicPartition]]] = []  # (group, offsets) per send
        self.aborts = 0
        self.left: tuple[int, ...] = ()  # brokers of the three that left the cluster (metadata)
        self.commit_fails_with: KafkaError | None = None  # the records left then fail delivery
        #: the next records queued were written once before and their acknowledgement lost:
        #: written twice, reported at the second copy (a retry without idempotence)
        self.lost_acks = 0
        self.transactional = False  # init_transactions was called
        self.commit_retries = 0  # the next commits fail this many times first, retriable

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: Any = None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        """confluent-kafka's order and defaults; ``callback`` wins over ``on_delivery``."""
        self.queue.append((topic, partition, key, value, callback or on_delivery))

    def _ack(self) -> None:
        if not self.acking:
            return
        lost, self.lost_acks = self.queue[: self.lost_acks], 0
        for topic, partition, key, value, cb in [*[(*r[:4], None) for r in lost], *self.queue]:
            off = self.next.get((topic, partition), 0)
            self.next[(topic, partition)] = off + 1
            self.log.setdefault((topic, partition), []).append(value)
            self.records.append((topic, partition, key, value))
            if cb is not None:
                cb(None, _Delivered(off))
        self.queue.clear()

    def flush(self, timeout: float = 0) -> int:
        self._ack()
        return len(self.queue)

    def poll(self, timeout: float = 0) -> int:
        self._ack()
        return 0

    def __len__(self) -> int:
        return len(self.queue)

    def init_transactions(self, timeout: float = 0) -> None:
        self.transactional = True

    def begin_transaction(self) -> None:
        self.pending_offsets = []

    def send_offsets_to_transaction(
        self, offsets: list[TopicPartition], group: object = None, *_a: Any
    ) -> None:
        self.pending_offsets = [*self.pending_offsets, *offsets]
        self.sent.append((group, offsets))

    def commit_transaction(self, timeout: float = 0) -> None:
        """As librdkafka: records still queued are flushed first; when any fails delivery
        (``commit_fails_with``), the commit ends with an abortable error."""
        if self.commit_retries:
            self.commit_retries -= 1
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))
        if self.commit_fails_with is not None and self.queue:
            failed, self.queue = self.queue, []
            for *_record, cb in failed:
                if cb is not None:
                    cb(self.commit_fails_with, None)
            raise KafkaException(
                KafkaError(
                    KafkaError._INCONSISTENT,
                    f"{len(failed)} message(s) failed delivery (see individual delivery reports)",
                    txn_requires_abort=True,
                )
            )
        self._ack()
        self.committed.append(self.pending_offsets)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """The target's metadata: three brokers, each a replica of the coordinators' topic,
        those in :attr:`left` gone from the broker list."""
        part = SimpleNamespace(id=0, leader=1, replicas=[1, 2, 3], isrs=[1, 2, 3], error=None)
        offsets = SimpleNamespace(partitions={0: part}, error=None)
        live = {b: SimpleNamespace(id=b) for b in (1, 2, 3) if b not in self.left}
        return SimpleNamespace(topics={"__consumer_offsets": offsets}, brokers=live)

    def abort_transaction(self, timeout: float = 0) -> None:
        self.aborts += 1

    def purge(self) -> None:
        self.queue.clear()


class FakeLedger:
    """A ledger consumer whose committed offsets are given: {(remote topic, partition): next}.
    An asynchronous commit's outcome (``fails_with``, else success) goes to ``on_commit`` at
    the next ``poll``."""

    def __init__(self, positions: dict[tuple[str, int], int], on_commit: Any = None) -> None:
        self.positions = positions
        self.commits: list[list[TopicPartition]] = []  # commits outside transactions
        self.on_commit = on_commit
        self.fails_with: KafkaError | None = None
        self.outcomes: list[tuple[KafkaError | None, list[TopicPartition]]] = []
        self.metadata: dict[tuple[str, int], str | None] = {}  # each entry's metadata string

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> None:
        if self.fails_with is not None:
            if not asynchronous:
                raise KafkaException(self.fails_with)
            self.outcomes.append((self.fails_with, offsets))
            return
        self.commits.append(offsets)
        self.positions.update({(tp.topic, tp.partition): tp.offset for tp in offsets})
        self.metadata.update({(tp.topic, tp.partition): tp.metadata for tp in offsets})
        if asynchronous:
            self.outcomes.append((None, offsets))

    def poll(self, timeout: float = 0) -> None:
        outcomes, self.outcomes = self.outcomes, []
        for err, offsets in outcomes:
            if self.on_commit is not None:
                self.on_commit(err, offsets)

    def committed(self, tps: list[TopicPartition], timeout: float = 0) -> list[TopicPartition]:
        out = []
        for tp in tps:
            key = (tp.topic, tp.partition)
            found = TopicPartition(tp.topic, tp.partition, self.positions.get(key, -1))
            if self.metadata.get(key):
                found = TopicPartition(tp.topic, tp.partition, found.offset, self.metadata[key])
            out.append(found)
        return out

    def consumer_group_metadata(self) -> object:
        return self  # what send_offsets_to_transaction is given names the group's consumer

    def close(self) -> None:
        pass


class FakeConsumer:
    """Hands out queued messages; records every ``consume(n, timeout)`` call and assignment;
    :attr:`high` holds the high watermarks it reports."""

    def __init__(self, messages: list[Any] | None = None, paced: bool = False) -> None:
        self.messages = list(messages or [])
        self.paced = paced
        self.calls: list[tuple[int, float]] = []
        self.assigned: list[tuple[str, int, int]] = []
        self.high: dict[tuple[str, int], int] = {}
        self.closed = False

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in tps]

    def resume(self, tps: list[TopicPartition]) -> None:
        pass

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return 0, self.high.get((tp.topic, tp.partition), 0)

    def list_topics(self, topic: str, timeout: float = -1) -> Any:
        """Metadata with ``topic`` and partition 0 only."""
        part = SimpleNamespace(id=0)
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: part}, error=None)})

    def close(self) -> None:
        self.closed = True

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        self.calls.append((num_messages, timeout))
        out, self.messages = self.messages[:num_messages], self.messages[num_messages:]
        return out


class LeaderlessAtFirst:
    """A producer's metadata view of a topic its first look auto-creates: the first ``leaderless``
    answers carry a partition with no leader (-1), as a broker reports a new topic."""

    def __init__(self, topic: str, leaderless: int) -> None:
        self.topic, self.leaderless, self.looks = topic, leaderless, 0

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        self.looks += 1
        leader = -1 if self.looks <= self.leaderless else 1
        partition = SimpleNamespace(id=0, leader=leader, error=None)
        meta = SimpleNamespace(topic=topic, error=None, partitions={0: partition})
        return SimpleNamespace(topics={self.topic: meta})


class UnassignedUntilLearned(LeaderlessAtFirst):
    """librdkafka's topic handle as a non-idempotent producer sees it (mirror_lib.testing.kafka_io).

    The handle is made at the first ``produce`` and knows no partitions yet: records wait
    unassigned. It learns them ``learn_after`` produce calls later, from then on queues records
    on their partitions directly, and moves the unassigned ones behind them at the next
    ``flush``. A ``flush`` before that learns the partitions at once. Records are acknowledged
    at ``flush`` with consecutive offsets per partition."""

    def __init__(self, topic: str, learn_after: int) -> None:
        super().__init__(topic, leaderless=0)
        self.learn_after, self.produced, self.learned = learn_after, 0, False
        self.unassigned: list[tuple[int, Any]] = []
        self.queued: list[tuple[int, Any]] = []
        self.next: dict[int, int] = {}

    def produce(
        self, topic: str, value: Any = None, key: Any = None, partition: int = 0, **kw: Any
    ) -> None:
        self.produced += 1
        (self.queued if self.learned else self.unassigned).append((partition, kw["on_delivery"]))
        if self.produced >= self.learn_after:
            self.learned = True

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        self.learned = True
        for partition, cb in [*self.queued, *self.unassigned]:
            offset = self.next.get(partition, 0)
            self.next[partition] = offset + 1
            msg = FakeMessage(self.topic, partition, offset, value=b"v")
            cb(None, msg)
        self.queued, self.unassigned = [], []
        return 0
