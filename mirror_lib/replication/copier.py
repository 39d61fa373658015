"""Copy a task slot's partitions for one time slice (D2-D4, D8).

A slice task keeps one ``read_committed`` source consumer and one transactional producer (one
``init_transactions`` per slot per slice, which fences zombies) and copies records as they arrive.
It commits a Kafka transaction every ``mirror.commit.interval.ms`` while at the source's head (or
after ``mirror.commit.max.records`` / ``.bytes``); behind the head, transactions grow up to ten
intervals. Each transaction holds the records, their offset syncs (when that topic is on the
target), the metrics and segment records, and the ledger offsets
(:mod:`mirror_lib.replication.ledger`), so a
crash at any point leaves all of a transaction or none of it, and the next task continues exactly
where the ledger says.

The per-record path is a consume -> produce loop. Downstream offsets come from two delivery
reports per partition and consume batch (the first record of a transaction and the last of each
batch): records of one transaction to one partition are contiguous downstream, which the copier
checks (count = last - first + 1; the bookkeeping is :mod:`mirror_lib.replication.copy_state`).
Should
another producer write into a remote partition, the transaction is aborted and the rest of the
slice reports every record (exact, slower).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mirror_lib.config import stale
from mirror_lib.config.stale import PartitionSkips, SkipPolicy, skip_event_fields, split_stale
from mirror_lib.errors import BrokerError, DataLossError, RecordTooLargeError
from mirror_lib.kafka.lookups import topic_ids
from mirror_lib.mm2.formats import OffsetSync
from mirror_lib.offsets.segments import Segment, mm2_compatible_points
from mirror_lib.replication import events, testhooks
from mirror_lib.replication.context import FlowContext, produce_plain
from mirror_lib.replication.copy_state import Interleaved, PartState
from mirror_lib.replication.ledger import ledger_consumer, ledger_offsets, read_ledger

log = logging.getLogger(__name__)

TP = tuple[str, int]
NO_END = 2**63 - 1
CONSUME_BATCH = 10_000
IDLE_POLL_S = 0.1
STALL_SECONDS = 60.0
BEHIND_FACTOR = 10  # behind the head, a transaction may last this many commit intervals
SILENCE_PROBE_S = 10.0  # no word from the source this long: ask it for metadata, every 5 s
SOURCE_DOWN_S = 30.0  # no answer this long: the slice fails (transient) so the run reports it
DISCOVERY_SECONDS = 60.0  # inside a slice, new topics/partitions are looked for at least this often
_FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.INVALID_PRODUCER_ID_MAPPING,
}
_PASSING = {  # delivery failures an outage causes: the run retries them
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
}
FLUSH_S = 30.0  # a target that acknowledges nothing this long fails the slice (transient)
_GONE = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}


@dataclass
class CopyResult:
    """The commit message of one task: what it copied (picklable, small)."""

    slot: int
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    next_offsets: dict[str, int] = field(default_factory=dict)


def make_producer(ctx: FlowContext, slot: int) -> Producer:
    """The slot's producer: transactional (fencing older instances) or plain idempotent."""
    defaults = {
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "acks": "all",
        "queue.buffering.max.messages": 500_000,
    }
    extra: dict[str, Any] = {"enable.idempotence": True}
    if ctx.settings.exactly_once:
        extra["transactional.id"] = ctx.transactional_id(slot)
    producer = Producer(ctx.client("target", "producer", defaults, **extra))
    if ctx.settings.exactly_once:
        producer.init_transactions(60)
    return producer


def make_consumer(ctx: FlowContext) -> Consumer:
    """A ``read_committed`` source consumer that never joins a group or commits."""
    defaults = {
        "fetch.wait.max.ms": 100,
        "fetch.error.backoff.ms": 50,
        "queued.max.messages.kbytes": 32768,
    }
    return Consumer(
        ctx.client(
            "source",
            "consumer",
            defaults,
            **{
                "group.id": f"__mirror_reader.{ctx.flow.name}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            },
        )
    )


class SliceCopy:
    """One task's slice: create, then :meth:`run`."""

    def __init__(
        self,
        ctx: FlowContext,
        options_key: str,
        slot: int,
        partitions: Sequence[TP],
        *,
        until: dict[TP, int] | None = None,
        counts: dict[str, int] | None = None,
        ids: dict[str, str] | None = None,
        duration_s: float | None = None,
        batch_id: int = -1,
        query_id: str = "",
    ) -> None:
        self.ctx, self.slot, self.batch_id, self.query_id = ctx, slot, batch_id, query_id
        self.options_key = options_key
        s = ctx.settings
        self.partitions = list(partitions)
        self._mine = {t for t, _p in self.partitions}
        self.until = until or {}
        self.counts = counts
        self.ids = ids or {}
        self.duration_s = s.batch_duration if duration_s is None else duration_s
        self.eos = s.exactly_once
        self.interval = s.commit_interval_ms / 1000.0
        self.max_records, self.max_bytes = s.commit_max_records, s.commit_max_bytes
        self.exact = False
        self.result = CopyResult(slot)
        self.skip_policy = SkipPolicy.from_settings(s)
        self.skips: dict[TP, PartitionSkips] = {}  # partitions the stale-data policy covers
        # Clients live for one slice (minutes): a client that outlived a topic's re-creation
        # can crash librdkafka 2.16 in its metadata cache (upstream #4964).
        self.consumer: Consumer = make_consumer(ctx)
        self.ledger: Consumer = ledger_consumer(ctx, slot)
        self.producer: Producer = make_producer(ctx, slot)
        self.in_txn = False
        self.txn_start = 0.0
        self.txn_records = self.txn_bytes = 0
        self.end_early = False
        self._admin: Any = None
        self.aborts_unreported = 0  # aborted transactions, told in the next batch events

    # -- set-up ------------------------------------------------------------------------------
    def _start(self) -> None:
        ctx = self.ctx
        if self._replaced():
            log.warning("a source topic was re-created since planning: ending the slice")
            self.parts = {}
            self.end_early = True
            return
        remote = {(t, p): (ctx.remote_topic(t), p) for t, p in self.partitions}
        delivered = read_ledger(self.ledger, remote.values(), where=ctx.where("target"))
        self.parts: dict[TP, PartState] = {}
        for (t, p), (rt, _p) in remote.items():
            start = delivered.get((rt, p))
            if start is None:
                raise BrokerError(
                    f"no delivery ledger entry for {t}[{p}] in group {ctx.ledger_group(self.slot)} "
                    f"on {ctx.where('target')}; the planner writes one before a slice starts",
                    transient=True,
                )
            self.parts[(t, p)] = PartState(t, p, rt, start, self.until.get((t, p), NO_END))
        todo = [TopicPartition(t, p, part.expect) for (t, p), part in self.parts.items()]
        todo = [tp for tp in todo if not self.parts[(tp.topic, tp.partition)].done]
        self.consumer.assign(todo)
        self.consumer.resume(todo)  # a reused consumer keeps pauses of earlier tasks

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> CopyResult:
        try:
            self._start()
            try:
                self._loop(time.monotonic() + self.duration_s)
            except Interleaved as exc:
                log.warning("another producer writes into %s: exact delivery reports now", exc)
                self._abort()
                self.exact = True
                self._start()
                self._loop(time.monotonic() + self.duration_s)
        except BaseException:
            # no abort_transaction here: it would wait on a target that may be down; the next
            # slice's init_transactions fences this producer and aborts what it left open
            self.in_txn = False
            raise
        finally:
            if self.in_txn:
                self._abort()
            self._close()
        return self.result

    def _close(self) -> None:
        for tp, skips in self.skips.items():
            if tp in getattr(self, "parts", {}):
                stale.keep(self.options_key, *tp, self.parts[tp].committed, skips)
        for consumer in (self.consumer, self.ledger):
            with contextlib.suppress(Exception):
                consumer.close()
        with contextlib.suppress(Exception):
            self.producer.flush(0)

    def _loop(self, deadline: float) -> None:
        refresh = min(self.ctx.settings.refresh_topics_interval, DISCOVERY_SECONDS)
        next_refresh = time.monotonic() + refresh
        last_progress = time.monotonic()
        self.last_heard = self.next_probe = time.monotonic()
        while not self._all_done():
            now = time.monotonic()
            if now >= deadline:
                break
            timeout = max(self.txn_start + self.interval - now, 0.0) if self.in_txn else IDLE_POLL_S
            msgs = self.consumer.consume(CONSUME_BATCH, min(timeout, deadline - now))
            if msgs:
                last_progress = time.monotonic()
                self._copy(msgs)
            self._check_source(msgs)
            self._maybe_commit(behind=len(msgs) >= CONSUME_BATCH)
            if self.until and time.monotonic() - last_progress > STALL_SECONDS:
                raise BrokerError(
                    f"no data from {self.ctx.where('source')} for {STALL_SECONDS:.0f}s while "
                    f"copying {sorted(tp for tp, part in self.parts.items() if not part.done)}",
                    transient=True,
                )
            if self.end_early:
                break
            if self.counts is not None and time.monotonic() >= next_refresh:
                next_refresh = time.monotonic() + refresh
                if self._new_partitions() or self._replaced():
                    break  # end the slice early: the planner sets them up
        self._commit()

    def _check_source(self, msgs: list[Any]) -> None:
        """Fail the slice (transient) when the source has not answered for SOURCE_DOWN_S.

        An idle source sends nothing, so after SILENCE_PROBE_S of silence the task asks it for
        metadata; librdkafka itself only retries, which would hide an outage from the run.
        """
        now = time.monotonic()
        if any(m.error() is None or m.error().code() == KafkaError._PARTITION_EOF for m in msgs):
            self.last_heard = now
            return
        if now - self.last_heard < SILENCE_PROBE_S or now < self.next_probe:
            return
        self.next_probe = now + 5.0
        try:
            self.consumer.list_topics(timeout=5)
            self.last_heard = time.monotonic()
        except KafkaException as exc:
            silent = time.monotonic() - self.last_heard
            if silent > SOURCE_DOWN_S:
                raise BrokerError(
                    f"{self.ctx.where('source')} did not answer for {silent:.0f}s "
                    f"({exc.args[0].str()}); nothing was lost, the run retries",
                    transient=True,
                ) from exc

    def _all_done(self) -> bool:
        return bool(self.until) and all(part.done for part in self.parts.values())

    def _copy(self, msgs: list[Any]) -> None:
        groups: dict[TP, list[Any]] = {}
        notices = []
        for msg in msgs:
            if msg.error() is not None:
                notices.append(msg)
            else:
                groups.setdefault((msg.topic(), msg.partition()), []).append(msg)
        consumed_ms = time.time() * 1000.0
        for tp, group in groups.items():
            part = self.parts.get(tp)
            if part is None or part.done:
                continue
            finished = group[-1].offset() >= part.until
            if finished:
                group = [m for m in group if m.offset() < part.until]
            skipped_end = None
            if self.skip_policy.applies_to(tp[0]):
                if tp not in self.skips:  # the budget an earlier slice of this process left
                    key, policy = self.options_key, self.skip_policy
                    self.skips[tp] = stale.resume(key, *tp, part.committed, policy)
                group, skipped_end = split_stale(self.skips[tp], group, consumed_ms)
            if group:
                if not self.in_txn:
                    self._begin()
                self._produce(part, group, consumed_ms)
            if skipped_end is not None:
                self._move(part, skipped_end)  # the ledger moves past the skipped records
            if finished:
                self._finish(part, part.until)
        for msg in notices:  # after the records: an end-of-partition follows its records
            self._event(msg)

    def _produce(self, part: PartState, group: list[Any], consumed_ms: float) -> None:
        produce = self.producer.produce
        rt, p, exact = part.remote, part.partition, self.exact
        runs, ts_append, us_append = part.runs, part.ts.append, part.us.append
        expect, n, size = part.expect, part.n, 0
        if n == 0:  # a transaction's first record always opens a run
            expect = group[0].offset()
            runs.append((expect, 0))
        last = len(group) - 1
        for i, msg in enumerate(group):
            off = msg.offset()
            if off != expect:
                runs.append((off, n))
            expect = off + 1
            key, value = msg.key(), msg.value()
            ts = msg.timestamp()[1]
            ts_append(ts)
            if exact:
                us_append(off)
                cb = part.ack_each
            elif n == 0:
                cb = part.ack_both if i == last else part.ack_first
            else:
                cb = part.ack_last if i == last else None
            try:
                produce(
                    rt,
                    value,
                    key,
                    partition=p,
                    timestamp=ts if ts > 0 else 0,
                    headers=msg.headers(),
                    on_delivery=cb,
                )
            except BufferError:
                self._produce_when_room(part, msg, cb)
            except KafkaException as exc:
                self._fail_record(exc.args[0], part, off)
            n += 1
            size += (len(key) if key else 0) + (len(value) if value else 0)
        part.expect, part.n = expect, n
        part.bytes += size
        part.consumed.append((consumed_ms, len(group)))
        self.txn_records += len(group)
        self.txn_bytes += size

    def _produce_when_room(self, part: PartState, msg: Any, cb: Any) -> None:
        while True:
            self.producer.poll(0.05)
            try:
                self.producer.produce(
                    part.remote,
                    msg.value(),
                    msg.key(),
                    partition=part.partition,
                    timestamp=max(msg.timestamp()[1], 0),
                    headers=msg.headers(),
                    on_delivery=cb,
                )
                return
            except BufferError:
                continue
            except KafkaException as exc:
                self._fail_record(exc.args[0], part, msg.offset())

    def _event(self, msg: Any) -> None:
        err = msg.error()
        code = err.code()
        part = self.parts.get((msg.topic(), msg.partition()))
        if code == KafkaError._PARTITION_EOF:
            if part is not None and not part.done:
                self._move(part, min(msg.offset(), part.until))
                if part.expect >= part.until:
                    self._finish(part, part.until)
            return
        where = f"{msg.topic()}[{msg.partition()}]"
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            raise DataLossError(
                f"{where}: the records from offset {part.expect if part else '?'} are no longer "
                f"on {self.ctx.where('source')} ({err.str()}); nothing after them was copied, "
                "the next slice records the gap"
            )
        if code in _GONE:  # deleted (maybe re-created): the planner decides between slices
            log.warning(
                "%s vanished on %s (%s): ending the slice", where, self.ctx.where("source"), err
            )
            self.end_early = True
            return
        if err.fatal():
            raise BrokerError(
                f"consuming {where} from {self.ctx.where('source')} failed: {err.str()}",
                transient=False,
            )
        log.warning("%s: %s (retrying)", self.ctx.where("source"), err.str())

    def _move(self, part: PartState, end: int) -> None:
        """Everything before ``end`` was seen: the ledger may move past markers and aborts."""
        if end > part.expect:
            part.expect = end
            if not self.in_txn:
                self._begin()

    def _finish(self, part: PartState, end: int) -> None:
        self._move(part, end)
        part.done = True
        with contextlib.suppress(KafkaException):
            self.consumer.pause([TopicPartition(part.topic, part.partition)])

    def _replaced(self) -> bool:
        """True when a topic's id differs from the planner's: deleted and re-created since.

        Checked at slice start (a replayed slice was planned before) and on every refresh.
        """
        if not self.ids:
            return False
        if self._admin is None:
            self._admin = self.ctx.admin("source")
        admin = self._admin
        try:
            now = topic_ids(admin, {t for t, _p in self.partitions})
        except BrokerError:
            return True  # a topic of the plan is gone
        return any(now.get(t) != self.ids[t] for t in self._mine if t in self.ids)

    def _new_partitions(self) -> bool:
        try:
            md = self.consumer.list_topics(timeout=5)
        except KafkaException:
            return False
        counts = self.counts or {}
        return any(
            topic.error is None
            and len(topic.partitions) > counts.get(name, 0)
            and self.ctx.should_replicate(name)
            for name, topic in md.topics.items()
        )

    # -- transactions ------------------------------------------------------------------------
    def _begin(self) -> None:
        if self.eos:
            self.producer.begin_transaction()
        self.in_txn = True
        self.txn_start = time.monotonic()
        self.txn_records = self.txn_bytes = 0

    def _maybe_commit(self, behind: bool) -> None:
        if not self.in_txn:
            return
        age = time.monotonic() - self.txn_start
        if (
            self.txn_records >= self.max_records
            or self.txn_bytes >= self.max_bytes
            or age >= self.interval * (BEHIND_FACTOR if behind else 1)
        ):
            self._commit()

    def _abort(self) -> None:
        if self.eos and self.in_txn:
            self.aborts_unreported += 1
            with contextlib.suppress(KafkaException):
                self.producer.abort_transaction(30)
        self.in_txn = False
        for part in self.parts.values():
            part.reset()
        for skips in self.skips.values():
            skips.abort()

    def _fail_record(self, err: KafkaError, part: PartState, offset: int) -> None:
        code = err.code()
        if code not in _PASSING:  # the target answers: end the transaction now
            self._abort()
        where = f"{part.topic}[{part.partition}] offset {offset}"
        if code in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE):
            raise RecordTooLargeError(
                f"record {where} is larger than {self.ctx.where('target')} accepts ({err.str()}); "
                "nothing from this transaction on was committed: raise the target topic's "
                "max.message.bytes and the producer's message.max.bytes"
            )
        raise BrokerError(
            f"producing {where} to {self.ctx.where('target')} failed: {err.str()}",
            transient=(err.retriable() or code in _PASSING) and code not in _FENCED,
        )

    def _commit(self) -> None:
        if not self.in_txn:
            return
        ctx = self.ctx
        if self.producer.flush(FLUSH_S) > 0:
            raise BrokerError(
                f"{ctx.where('target')} did not acknowledge records in {FLUSH_S:.0f}s",
                transient=True,
            )
        acked_ms = time.time() * 1000.0
        moved = {tp: part for tp, part in self.parts.items() if part.expect != part.committed}
        for part in moved.values():
            if part.error is not None:
                err, _ = part.error
                first = part.runs[0][0] if part.runs else part.committed
                self._fail_record(err, part, first)
        segments = {tp: part.segments(self.exact) for tp, part in moved.items() if part.n}
        out = [(ctx.metrics_topic, *events.encode(e)) for e in self._metrics(segments, acked_ms)]
        out += [(ctx.metrics_topic, *events.encode(e)) for e in self._skip_events()]
        syncs = self._sync_records(segments)
        if ctx.offset_syncs_on_target:
            out += [(ctx.offset_syncs_topic, s.key(), s.value()) for s in syncs]
        for topic, k, v in out:
            self.producer.produce(topic, v, k, partition=0)
        ledger = {(part.remote, part.partition): part.expect for part in moved.values()}
        try:
            if self.eos:
                self.producer.send_offsets_to_transaction(
                    ledger_offsets(ledger), self.ledger.consumer_group_metadata(), 60
                )
                testhooks.hold_before_commit()
                self.producer.commit_transaction(60)
            else:
                if self.producer.flush(60) > 0:
                    raise BrokerError(
                        f"metrics/offset syncs not acknowledged by {ctx.where('target')}",
                        transient=True,
                    )
                if ledger:
                    self.ledger.commit(offsets=ledger_offsets(ledger), asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0]
            raise BrokerError(
                f"committing to {ctx.where('target')} failed: {err.str()}",
                transient=(err.retriable() or err.code() in _PASSING)
                and err.code() not in _FENCED
                and not err.fatal(),
            ) from exc
        self.in_txn = False
        if out:
            self.aborts_unreported = 0
        if not ctx.offset_syncs_on_target and syncs:
            produce_plain(
                ctx, "source", ctx.offset_syncs_topic, [(x.key(), x.value()) for x in syncs]
            )
        self.result.transactions += 1
        for part in moved.values():
            part.committed = part.expect
            self.result.records += part.n
            self.result.bytes += part.bytes
            self.result.next_offsets[f"{part.topic}:{part.partition}"] = part.expect
            part.reset()
        for skips in self.skips.values():
            skips.commit()

    def _sync_records(self, segments: dict[TP, list[Segment]]) -> list[OffsetSync]:
        if not self.ctx.settings.emit_offset_syncs:
            return []
        lag_max = self.ctx.settings.offset_lag_max
        return [
            OffsetSync(tp[0], tp[1], point.upstream, point.downstream)
            for tp, segs in segments.items()
            for seg in segs
            for point in mm2_compatible_points(seg, lag_max)
        ]

    def _skip_events(self) -> list[dict]:
        """One ``skip`` event per partition and skipped range of the open transaction."""
        return [
            events.flow_event(
                self.ctx,
                "skip",
                topic=tp[0],
                remote_topic=self.ctx.remote_topic(tp[0]),
                partition=tp[1],
                batch_id=self.batch_id,
                slot=self.slot,
                **skip_event_fields(rng, self.skip_policy),
            )
            for tp, skips in self.skips.items()
            for rng in skips.pending
        ]

    def _metrics(self, segments: dict[TP, list[Segment]], acked_ms: float) -> list[dict]:
        out = []
        for tp, segs in segments.items():
            part = self.parts[tp]
            latency, age = part.latency_and_age(acked_ms)
            _low, high = self.consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)
            common = {
                "topic": tp[0],
                "remote_topic": part.remote,
                "partition": tp[1],
                "batch_id": self.batch_id,
            }
            out.append(
                events.flow_event(
                    self.ctx,
                    "batch",
                    **common,
                    query_id=self.query_id,
                    slot=self.slot,
                    records=part.n,
                    bytes=part.bytes,
                    upstream_first=segs[0].upstream_start,
                    upstream_last=segs[-1].upstream_end,
                    downstream_first=segs[0].downstream_start,
                    downstream_last=segs[-1].downstream_end,
                    lag=max(high - part.expect, 0) if high >= 0 else None,
                    latency_ms=latency,
                    age_ms=age,
                    latency_ms_buckets=part.latency_buckets(acked_ms),
                    txn=self.result.transactions,
                    aborted=self.aborts_unreported,
                )
            )
            out.append(
                events.flow_event(
                    self.ctx,
                    "segments",
                    **common,
                    segments=[
                        [g.upstream_start, g.upstream_end, g.downstream_start, g.downstream_end]
                        for g in segs
                    ],
                )
            )
        return out


def copy_slice(
    ctx: FlowContext,
    options_key: str,
    slot: int,
    partitions: Sequence[TP],
    **kwargs: Any,
) -> CopyResult:
    """Copy ``partitions`` for ``slot`` for one slice (see :class:`SliceCopy` for ``kwargs``)."""
    return SliceCopy(ctx, options_key, slot, partitions, **kwargs).run()
