"""Copy planned offset ranges from the source to the target inside one task slot (D2-D4, D8).

Per slot: a transactional producer with a stable ``transactional.id`` (fences zombies), a
``read_committed`` source consumer and the ledger (:mod:`mirror_lib.ledger`). Work is committed
in chunks: records, their offset syncs (when the offset-syncs topic is on the target), the
metrics records and the ledger offsets go into one transaction, so a crash at any point leaves
either all of a chunk or none of it, and a replay skips exactly what was delivered.
"""

from __future__ import annotations

import contextlib
import time
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mirror_lib import events
from mirror_lib.errors import BrokerError, DataLossError, RecordTooLargeError
from mirror_lib.flow import FlowContext, produce_plain
from mirror_lib.formats import OffsetSync
from mirror_lib.ledger import ledger_consumer, ledger_offsets, read_ledger
from mirror_lib.offset_sync import SegmentTracker, mm2_compatible_points
from mirror_lib.testhooks import hold_before_commit

TP = tuple[str, int]
CHUNK_RECORDS = 200_000
CHUNK_SECONDS = 5.0
STALL_SECONDS = 60.0
_FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.INVALID_PRODUCER_ID_MAPPING,
    KafkaError._FATAL,
}
_CLIENTS: dict[tuple[str, str, int], Any] = {}


class _Fenced(Exception):
    """The cached transactional producer was fenced by a newer instance: rebuild and retry."""


@dataclass
class CopyResult:
    """The commit message of one task: what it copied (picklable, small)."""

    slot: int
    records: int = 0
    bytes: int = 0
    skipped: int = 0
    next_offsets: dict[str, int] = field(default_factory=dict)


@dataclass
class _Stats:
    records: int = 0
    bytes: int = 0
    first_u: int = -1
    last_u: int = -1
    latency: array = field(default_factory=lambda: array("d"))
    age: array = field(default_factory=lambda: array("d"))


def _summary(values: Any) -> dict[str, float]:
    """min/avg/max/p50/p99 of an array('d') or numpy array (empty: {})."""
    a = np.asarray(values, dtype=np.float64)
    if not a.size:
        return {}
    p50, p99 = np.percentile(a, [50, 99])
    return {
        "min": float(a.min()),
        "avg": float(a.mean()),
        "max": float(a.max()),
        "p50": float(p50),
        "p99": float(p99),
    }


def _client(key: tuple[str, str, int], make: Any) -> Any:
    if key not in _CLIENTS:
        _CLIENTS[key] = make()
    return _CLIENTS[key]


def _drop_clients(options_key: str, slot: int) -> None:
    for key in [k for k in _CLIENTS if k[0] == options_key and k[2] == slot]:
        _CLIENTS.pop(key, None)


def _producer(ctx: FlowContext, slot: int) -> Producer:
    defaults = {
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "acks": "all",
        "queue.buffering.max.messages": 500_000,
    }
    if ctx.settings.exactly_once:
        producer = Producer(
            ctx.client(
                "target",
                "producer",
                defaults,
                **{
                    "transactional.id": ctx.transactional_id(slot),
                    "enable.idempotence": True,
                },
            )
        )
        producer.init_transactions(60)
        return producer
    return Producer(ctx.client("target", "producer", defaults, **{"enable.idempotence": True}))


def _consumer(ctx: FlowContext) -> Consumer:
    defaults = {
        "fetch.wait.max.ms": 50,
        "fetch.error.backoff.ms": 50,
        "queued.max.messages.kbytes": 65536,
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


class RangeCopy:
    """One task's copy of its ranges; create, then :meth:`run`."""

    def __init__(
        self,
        ctx: FlowContext,
        options_key: str,
        slot: int,
        ranges: Sequence[tuple[str, int, int, int]],
        batch_id: int,
        query_id: str,
    ):
        self.ctx, self.slot, self.batch_id, self.query_id = ctx, slot, batch_id, query_id
        self.ranges = ranges
        # A transactional producer is made per task: pooled workers caching one per slot would
        # fence each other; init_transactions here fences real zombies of this slot.
        self.producer: Producer = (
            _producer(ctx, slot)
            if ctx.settings.exactly_once
            else _client((options_key, "producer", slot), lambda: _producer(ctx, slot))
        )
        self.consumer: Consumer = _client((options_key, "consumer", slot), lambda: _consumer(ctx))
        self.ledger: Consumer = _client(
            (options_key, "ledger", slot), lambda: ledger_consumer(ctx, slot)
        )
        self.eos = ctx.settings.exactly_once
        self.result = CopyResult(slot)

    # -- delivery tracking -----------------------------------------------------------------
    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        try:
            key = (msg.topic(), msg.partition())
            upstream = self.pending[key].popleft()
            if err is not None:
                self.errors.append((err, key, upstream))
                return
            self.trackers[key].add(upstream, msg.offset())
            self.acks[key].append(time.time() * 1000.0)
        except Exception as exc:  # never raise into librdkafka; re-raised in _commit_chunk
            self.callback_errors.append(exc)

    def run(self) -> CopyResult:
        ctx = self.ctx
        remote = {(t, p): (ctx.remote_topic(t), p) for t, p, _, _ in self.ranges}
        delivered = read_ledger(self.ledger, remote.values())
        self.todo: dict[TP, int] = {}
        begin: dict[TP, int] = {}
        for t, p, start, end in self.ranges:
            first = max(start, delivered.get(remote[(t, p)], start))
            self.result.skipped += min(first, end) - start
            if first < end:
                self.todo[(t, p)], begin[(t, p)] = end, first
        if not self.todo:
            return self.result
        self.remote = remote
        assignment = [TopicPartition(t, p, off) for (t, p), off in begin.items()]
        self.consumer.assign(assignment)
        self.consumer.resume(assignment)  # a reused consumer keeps pauses of earlier tasks
        self._new_chunk()
        self.in_txn = False
        self._begin()
        chunk_start, last_progress = time.monotonic(), time.monotonic()
        while self.todo:
            msgs = self.consumer.consume(num_messages=10_000, timeout=0.2)
            consumed_ms = time.time() * 1000.0
            if msgs:
                last_progress = time.monotonic()
            for msg in msgs:
                self._handle(msg, consumed_ms)
            self.producer.poll(0)
            chunk_full = self.chunk_records >= CHUNK_RECORDS
            if self.chunk_records and (
                chunk_full or not self.todo or time.monotonic() - chunk_start >= CHUNK_SECONDS
            ):
                self._commit_chunk(more=bool(self.todo))
                chunk_start = time.monotonic()
            if time.monotonic() - last_progress > STALL_SECONDS:
                raise BrokerError(
                    f"no data from {ctx.where('source')} for {STALL_SECONDS:.0f}s while copying "
                    f"{sorted(self.todo)}",
                    transient=True,
                )
        if self.in_txn:
            self.producer.abort_transaction(30)
            self.in_txn = False
        self.consumer.unassign()
        return self.result

    def _handle(self, msg: Any, consumed_ms: float) -> None:
        tp = (msg.topic(), msg.partition())
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                if tp in self.todo and msg.offset() >= self.todo[tp]:
                    self._done(tp)
                return
            if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                raise DataLossError(
                    f"{tp[0]}[{tp[1]}]: the planned range is no longer on "
                    f"{self.ctx.where('source')} ({err.str()}); nothing after it was committed"
                )
            raise BrokerError(
                f"consuming {tp[0]}[{tp[1]}] from {self.ctx.where('source')} failed: {err.str()}",
                transient=err.retriable(),
            )
        end = self.todo.get(tp)
        offset = msg.offset()
        if end is None or offset >= end:
            if end is not None:
                self._done(tp)
            return
        rt, p = self.remote[tp]
        ts_type, ts = msg.timestamp()
        key, value, headers = msg.key(), msg.value(), msg.headers()
        self.pending[(rt, p)].append(offset)
        while True:
            try:
                self.producer.produce(
                    rt,
                    value,
                    key,
                    partition=p,
                    timestamp=max(ts, 0),
                    headers=headers,
                    on_delivery=self._on_delivery,
                )
                break
            except BufferError:
                self.producer.poll(0.05)
            except KafkaException as exc:
                self.pending[(rt, p)].pop()
                self._fail_record(exc.args[0], tp, offset)
        size = (len(key) if key else 0) + (len(value) if value else 0)
        st = self.stats[tp]
        st.records += 1
        st.bytes += size
        st.first_u = offset if st.first_u < 0 else st.first_u
        st.last_u = offset
        created = float(ts) if ts_type else consumed_ms
        st.age.append(consumed_ms - created)
        self.create_ts[(rt, p)].append(created)
        self.chunk_records += 1
        if offset == end - 1:
            self._done(tp)

    def _done(self, tp: TP) -> None:
        self.todo.pop(tp, None)
        self.consumer.pause([TopicPartition(*tp)])

    def _begin(self) -> None:
        if self.eos:
            self.producer.begin_transaction()
            self.in_txn = True

    def _fail_record(self, err: KafkaError, tp: TP, offset: int) -> None:
        if self.in_txn:
            self.in_txn = False
            with contextlib.suppress(KafkaException):
                self.producer.abort_transaction(30)
        code = err.code()
        where = f"{tp[0]}[{tp[1]}] offset {offset}"
        if code in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE):
            raise RecordTooLargeError(
                f"record {where} is larger than {self.ctx.where('target')} accepts ({err.str()}); "
                "nothing from this chunk on was committed: raise the target topic's "
                "max.message.bytes and the producer's message.max.bytes"
            )
        if code in _FENCED or err.fatal():
            raise _Fenced(str(err))
        raise BrokerError(
            f"producing {where} to {self.ctx.where('target')} failed: {err.str()}",
            transient=err.retriable(),
        )

    def _new_chunk(self) -> None:
        self.pending: dict[TP, deque] = {rp: deque() for rp in self.remote.values()}
        self.trackers = {rp: SegmentTracker() for rp in self.remote.values()}
        self.acks: dict[TP, array] = {rp: array("d") for rp in self.remote.values()}
        self.create_ts: dict[TP, array] = {rp: array("d") for rp in self.remote.values()}
        self.stats = {tp: _Stats() for tp in self.remote}
        self.errors: list[tuple[KafkaError, TP, int]] = []
        self.callback_errors: list[Exception] = []
        self.chunk_records = 0

    def _commit_chunk(self, more: bool) -> None:
        ctx = self.ctx
        if self.producer.flush(60) > 0:
            raise BrokerError(
                f"{ctx.where('target')} did not acknowledge records in 60s", transient=True
            )
        if self.callback_errors:
            raise self.callback_errors[0]
        if self.errors:
            err, (rt, p), upstream = self.errors[0]
            source = next(tp for tp, r in self.remote.items() if r == (rt, p))
            self._fail_record(err, source, upstream)
        metrics = [events.encode(m) for m in self._metrics()]
        syncs = self._sync_records()
        next_u = {self.remote[tp]: st.last_u + 1 for tp, st in self.stats.items() if st.records}
        extra_out = [(ctx.metrics_topic, k, v) for k, v in metrics]
        if ctx.offset_syncs_on_target:
            extra_out += [(ctx.offset_syncs_topic, s.key(), s.value()) for s in syncs]
        for topic, k, v in extra_out:
            self.producer.produce(topic, v, k, partition=0)
        try:
            if self.eos:
                self.producer.send_offsets_to_transaction(
                    ledger_offsets(next_u), self.ledger.consumer_group_metadata(), 60
                )
                hold_before_commit()
                self.producer.commit_transaction(60)
                self.in_txn = False
            else:
                if self.producer.flush(60) > 0:
                    raise BrokerError(
                        f"metrics/offset syncs not acknowledged by {ctx.where('target')}",
                        transient=True,
                    )
                self.ledger.commit(offsets=ledger_offsets(next_u), asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() in _FENCED or err.fatal():
                raise _Fenced(str(err)) from exc
            raise BrokerError(
                f"committing to {ctx.where('target')} failed: {err.str()}",
                transient=err.retriable(),
            ) from exc
        if not ctx.offset_syncs_on_target and syncs:
            produce_plain(
                ctx, "source", ctx.offset_syncs_topic, [(x.key(), x.value()) for x in syncs]
            )
        for tp, st in self.stats.items():
            self.result.records += st.records
            self.result.bytes += st.bytes
            if st.records:
                self.result.next_offsets[f"{tp[0]}:{tp[1]}"] = st.last_u + 1
        self._new_chunk()
        if more:
            self._begin()

    def _sync_records(self) -> list[OffsetSync]:
        lag_max = self.ctx.settings.offset_lag_max
        out = []
        if not self.ctx.settings.emit_offset_syncs:
            return out
        for tp, (rt, p) in self.remote.items():
            for segment in self.trackers[(rt, p)].close():
                for point in mm2_compatible_points(segment, lag_max):
                    out.append(OffsetSync(tp[0], p, point.upstream, point.downstream))
        return out

    def _metrics(self) -> list[dict[str, Any]]:

        out = []
        for tp, st in self.stats.items():
            if not st.records:
                continue
            rp = self.remote[tp]
            segments = self.trackers[rp].segments()
            acks, created = np.asarray(self.acks[rp]), np.asarray(self.create_ts[rp])
            n = min(len(acks), len(created))
            _low, high = self.consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)
            common = {
                "topic": tp[0],
                "remote_topic": rp[0],
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
                    records=st.records,
                    bytes=st.bytes,
                    upstream_first=st.first_u,
                    upstream_last=st.last_u,
                    downstream_first=segments[0].downstream_start if segments else None,
                    downstream_last=segments[-1].downstream_end if segments else None,
                    lag=max(high - (st.last_u + 1), 0) if high >= 0 else None,
                    latency_ms=_summary(acks[:n] - created[:n]),
                    age_ms=_summary(st.age),
                )
            )
            out.append(
                events.flow_event(
                    self.ctx,
                    "segments",
                    **common,
                    segments=[
                        [g.upstream_start, g.upstream_end, g.downstream_start, g.downstream_end]
                        for g in segments
                    ],
                )
            )
        return out


def copy_ranges(
    ctx: FlowContext,
    options_key: str,
    slot: int,
    ranges: Sequence[tuple[str, int, int, int]],
    batch_id: int,
    query_id: str,
) -> CopyResult:
    """Copy ``ranges`` for ``slot``; a fenced cached producer is rebuilt and the copy redone."""
    for attempt in range(3):
        try:
            return RangeCopy(ctx, options_key, slot, ranges, batch_id, query_id).run()
        except (_Fenced, SystemError):  # SystemError: librdkafka failed inside a callback
            _drop_clients(options_key, slot)
            if attempt == 2:
                raise
        except Exception:
            _drop_clients(options_key, slot)
            raise
    raise AssertionError("unreachable")
