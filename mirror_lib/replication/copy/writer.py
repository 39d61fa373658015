"""One target of a copy task: what it copies of the records read, into its open transaction.

A copy task (:mod:`mirror_lib.replication.copy.copier`) reads its partitions once and hands every
consumed batch to one :class:`TargetWriter` per target: one for a flow ``A->B``, several for a
fan-out group ``A->B,C``. A writer copies what its target has not yet received (records before
its ledger position are dropped, so targets at different positions can share a read) and keeps
its own delivery guarantee through its transactions.

A writer *has* its producer, its ledger (:class:`~mirror_lib.replication.copy.ledger.TargetLedger`)
and one commit strategy, chosen when it is made
(:mod:`mirror_lib.replication.copy.commit_strategies`): exactly once, rolling at least once, or
held for a fan-out group. Each transaction holds the records, their offset syncs (when that topic
is on the target), the ``batch``, ``segments`` and ``skip`` events
(:mod:`mirror_lib.replication.copy.txn_events`) and the ledger offsets, so a crash leaves all of a
transaction or none. It commits every ``mirror.commit.interval.ms`` while at the source's head
(or after ``mirror.commit.max.records`` / ``.bytes``; behind the head, it grows up to
``BEHIND_FACTOR`` intervals, at least ``BEHIND_MIN_S``).

Downstream offsets come from two delivery reports per partition and consume batch (the first
record of a transaction and the last of each batch): records of one transaction to one partition
are contiguous downstream, which :mod:`mirror_lib.replication.copy.copy_state` checks. Should
another producer write into a remote partition,
:class:`~mirror_lib.replication.copy.copy_state.Interleaved` is raised at commit; the copier
aborts, and the writer reports every record from then on (``exact``).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Producer

from mirror_lib.config.settings import FlowSettings
from mirror_lib.config.stale import SkipPolicy, TargetSkips
from mirror_lib.errors import BrokerError
from mirror_lib.kafka.bounded import bounded
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.context import FlowContext, PlainProducer
from mirror_lib.replication.copy.commit_strategies import (
    FANOUT_INIT_S,
    FLUSH_S,
    CommitStrategy,
    commit_strategy,
)
from mirror_lib.replication.copy.copy_state import PartState
from mirror_lib.replication.copy.ledger import TargetLedger
from mirror_lib.replication.copy.metrics_window import MetricsWindow
from mirror_lib.replication.copy.source_reader import Record
from mirror_lib.replication.copy.target_producer import (
    DeliveryReport,
    make_producer,
    passing_code,
    record_error,
    timed_out_error,
)
from mirror_lib.replication.copy.txn_events import Watermarks
from mirror_lib.replication.events import QueryRestart

BEHIND_FACTOR = 10  # behind the head, a transaction may last this many commit intervals
BEHIND_MIN_S = 1.0  # ... and at least this long: a backlog is not copied in small commits


@dataclass
class CopyResult:
    """What one copy task copied in its slice (small; its row in the query is slot, records,
    transactions). ``detached``: flow -> why that target left the shared read during the slice.
    """

    slot: int
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    detached: dict[str, str] = field(default_factory=dict)
    #: without transactions: records the target holds twice (a retried request's first copy)
    unreported: int = 0

    def add(self, other: CopyResult) -> None:
        """Count in what ``other`` (a target's share of the slice) copied."""
        self.records += other.records
        self.bytes += other.bytes
        self.transactions += other.transactions
        self.unreported += other.unreported


@dataclass(frozen=True)
class CommitTiming:
    """When an open transaction falls due: ``interval`` seconds old at the source's head,
    ``behind_interval`` behind it, or once it holds ``max_records`` records or ``max_bytes``."""

    interval: float
    behind_interval: float
    max_records: int
    max_bytes: int

    @classmethod
    def of(cls, s: FlowSettings) -> CommitTiming:
        interval = s.commit_interval_ms / 1000.0
        behind = max(interval * BEHIND_FACTOR, BEHIND_MIN_S)
        return cls(interval, behind, s.commit_max_records, s.commit_max_bytes)

    def due(self, age: float, records: int, size: int, *, behind: bool) -> bool:
        """Whether a transaction ``age`` seconds old holding ``records`` and ``size`` bytes is
        due (``behind``: the copy loop is behind the source's head)."""
        return (
            records >= self.max_records
            or size >= self.max_bytes
            or age >= (self.behind_interval if behind else self.interval)
        )


class TargetWriter:
    """The target side of one slot's slice for one flow: create, :meth:`start`, feed, commit."""

    def __init__(
        self,
        ctx: FlowContext,
        slot: int,
        partitions: Sequence[TP],
        *,
        until: dict[TP, int],
        options_key: str,
        batch_id: int = -1,
        query_id: str = "",
        fanout: bool = False,
        topic_ids: dict[str, str] | None = None,
        shared: Sequence[int] = (),
        slots: int = 0,
        query_restart: QueryRestart | None = None,
    ) -> None:
        self.ctx, self.slot, self.batch_id, self.query_id = ctx, slot, batch_id, query_id
        self.topic_ids = topic_ids or {}  # source topic -> id as planned, in segments events
        s = ctx.settings
        self.partitions, self.until, self.fanout = list(partitions), until, fanout
        self.eos = s.exactly_once
        self.timing = CommitTiming.of(s)
        self.behind = False  # the copy loop says at each commit_due whether it is behind
        self.max_lag = s.fanout_max_lag_records
        # without idempotence a retry may write a batch twice: every record's offset is
        # reported, so that offsets are mapped around the copy nobody acknowledged
        self.exact = not ctx.idempotent("target")
        self.result = CopyResult(slot)
        self.skips = TargetSkips(f"{options_key}|{ctx.flow.name}", SkipPolicy.from_settings(s))
        self.parts: dict[TP, PartState] = {}
        self.in_txn = False
        self.txn_start = 0.0
        self.txn_records = self.txn_bytes = 0
        self.aborts_unreported = 0  # aborted transactions, told in the next batch events
        self.metrics = MetricsWindow(s.metrics_interval_ms, time.monotonic())  # not told yet
        # Clients live for one slice (minutes): a client that outlived a topic's re-creation
        # can crash librdkafka 2.16 in its metadata cache (upstream #4964).
        self.init_s = FANOUT_INIT_S if fanout else 60.0
        self.producer: Producer
        self.producer, self.txn_timeout_ms = make_producer(
            ctx, slot, remote_topics={ctx.remote_topic(t) for t, _ in partitions},
            init_timeout_s=self.init_s,
        )  # fmt: skip
        self.ledger = TargetLedger(ctx, slot, shared, slots)  # and the slots sharing its task
        # offset syncs on the source go out after each commit, from one producer per slice
        self.source_syncs: PlainProducer | None = None
        self.trouble: str | None = None  # what held the copy up, told with the next resumed event
        self.fresh_start = True  # no commit since the ledger was read: a (re)started copy
        self.query_restart = query_restart  # the outage the query was started again through
        # the brokers that left the source's cluster, of some partitions (its reader sets it)
        self.source_lost: Callable[[Iterable[TP]], str | None] = lambda _partitions: None
        self.commit_started_ms = 0.0  # the timing log's (txn_timing): when the commit started
        self.strategy: CommitStrategy = commit_strategy(self)

    @property
    def name(self) -> str:
        return self.ctx.flow.name

    # -- positions ---------------------------------------------------------------------------
    def start(self) -> None:
        """Read the ledger: where each partition continues (the truth about what was delivered)."""
        self.fresh_start = True
        self.parts = {}
        self.parts = self.ledger.positions(self.partitions, self.until, self.init_s)

    def open_positions(self) -> dict[TP, int]:
        """Where each partition not yet done continues."""
        return {tp: part.expect for tp, part in self.parts.items() if not part.done}

    def done(self) -> bool:
        return all(part.done for part in self.parts.values())

    # -- records -----------------------------------------------------------------------------
    def accept(self, tp: TP, group: list[Record], consumed_ms: float) -> bool:
        """Copy the records of ``group`` (one partition, in order) this target still needs.

        Returns True when the partition reached its ``until`` end.
        """
        part = self.parts.get(tp)
        if part is None or part.done:
            return False
        if self.strategy.holding:  # the bounded buffer: copied once the transaction committed
            self.strategy.hold(functools.partial(self.accept, tp, group, consumed_ms), len(group))
            return False
        if group[0].offset() < part.expect:  # another target of the read is behind this one
            group = [m for m in group if m.offset() >= part.expect]
            if not group:
                return False
        finished = group[-1].offset() >= part.until
        if finished:
            group = [m for m in group if m.offset() < part.until]
        group, skipped_end = self.skips.split(tp, part.committed, group, consumed_ms)
        if group:
            if not self.in_txn:
                self.begin()
            self._produce(part, group, consumed_ms)
        if skipped_end is not None:
            self.move(tp, skipped_end)  # the ledger moves past the skipped records
        if finished:
            self.finish(tp, part.until)
        return finished

    def _produce(self, part: PartState, group: list[Record], consumed_ms: float) -> None:
        produce = self.producer.produce
        rt, p, exact = part.remote, part.partition, self.exact
        runs, ts_append, us_append = part.runs, part.ts.append, part.us.append
        expect, n, size = part.expect, part.n, 0
        if n == 0:  # a transaction's first record always opens a run
            expect = group[0].offset()
            runs.append((expect, 0))
        last = len(group) - 1
        reports = len(group) if exact else 1 + (n == 0 and last > 0)
        for i, msg in enumerate(group):
            off = msg.offset()
            if off != expect:
                runs.append((off, n))
            expect = off + 1
            key, value = msg.key(), msg.value()
            ts = msg.timestamp()[1]
            ts_append(ts)
            cb: DeliveryReport | None
            if exact:
                us_append(off)
                cb = part.ack_each
            elif n == 0:
                cb = part.ack_both if i == last else part.ack_first
            else:
                cb = part.ack_last if i == last else None
            # positional: keyword arguments cost 0.9 us a record more
            # (docs/how-it-works.md#a-cheap-per-record-path)
            try:
                produce(rt, value, key, p, cb, None, ts if ts > 0 else 0, msg.headers())
            except BufferError:
                self._produce_when_room(part, msg, cb)
            except KafkaException as exc:
                self.fail_record(exc.args[0], part, off)
            n += 1
            size += (len(key) if key else 0) + (len(value) if value else 0)
        part.pending += reports
        self.producer.poll(0)  # serve delivery reports now: librdkafka frees acknowledged records
        part.expect, part.n = expect, n
        part.bytes += size
        part.consumed.append((consumed_ms, len(group)))
        self.txn_records += len(group)
        self.txn_bytes += size

    def _produce_when_room(self, part: PartState, msg: Record, cb: DeliveryReport | None) -> None:
        while True:
            self.producer.poll(0.05)
            try:
                ts = max(msg.timestamp()[1], 0)
                self.producer.produce(
                    part.remote, msg.value(), msg.key(), part.partition, cb, None, ts, msg.headers()
                )
                return
            except BufferError:
                continue
            except KafkaException as exc:
                self.fail_record(exc.args[0], part, msg.offset())

    def waiting(self) -> int:
        """Records read for this target that it has not acknowledged: held or in flight."""
        return self.strategy.held_records + len(self.producer)

    def move(self, tp: TP, end: int) -> None:
        """Everything before ``end`` was seen: the ledger may move past markers and aborts; a
        partition moved to its ``until`` end is done."""
        if self.strategy.holding:
            self.strategy.hold(functools.partial(self.move, tp, end), 0)
            return
        part = self.parts.get(tp)
        if part is not None and not part.done and end > part.expect:
            part.expect = end
            part.done = end >= part.until
            if not self.in_txn:
                self.begin()

    def finish(self, tp: TP, end: int) -> None:
        """The partition reached its ``until`` end (held like any move while a commit waits:
        an end of partition comes once, so a finish dropped then would leave it open)."""
        if self.strategy.holding:
            self.strategy.hold(functools.partial(self.finish, tp, end), 0)
            return
        self.move(tp, end)
        self.parts[tp].done = True

    # -- transactions ------------------------------------------------------------------------
    def begin(self) -> None:
        """Open a transaction (exactly once, on the producer; else only its bookkeeping)."""
        if self.eos:
            self.producer.begin_transaction()
        self.in_txn = True
        self.txn_start = time.monotonic()
        self.txn_records = self.txn_bytes = 0

    def commit_due(self, behind: bool) -> bool:
        """True when the open transaction should commit now, or a sealed one can move on."""
        self.behind = behind
        return self.strategy.sealed or self.due()

    def due(self) -> bool:
        """The open transaction's interval, records or bytes are up (``behind``: as the loop
        last said)."""
        if not self.in_txn:
            return False
        if self.strategy.holding:
            return True
        age = time.monotonic() - self.txn_start
        return self.timing.due(age, self.txn_records, self.txn_bytes, behind=self.behind)

    def commit(self, watermarks: Watermarks, *, wait: bool = True, roll: bool = False) -> bool:
        """Commit the open transaction (:meth:`CommitStrategy.commit`); False when it is not
        done yet. ``roll`` (the copy loop's commits): at least once, the loop never waits for
        the target; ``wait`` off (a fan-out group): a commit whose records are not yet
        acknowledged stays pending and what arrives meanwhile is held."""
        return self.strategy.commit(watermarks, wait=wait, roll=roll)

    def abort(self) -> None:
        """Abort the open transaction; every partition continues from its last commit."""
        if self.eos and self.in_txn:
            self.aborts_unreported += 1
            with contextlib.suppress(KafkaException):
                bounded(lambda: self.producer.abort_transaction(30), 30, "abort_transaction")
        self.forget_open()
        for part in self.parts.values():
            part.reset()
            part.expect = part.committed
            part.done = part.committed >= part.until

    def forget_open(self) -> None:
        """Drop the open (or sealed, or held) transaction's state: nothing of it counts."""
        self.in_txn = False
        self.strategy.forget()
        self.skips.abort()

    def fail_record(self, err: KafkaError, part: PartState, offset: int) -> None:
        if not passing_code(err.code()):  # the target answers: end the transaction now
            self.abort()
        where = f"{part.topic}[{part.partition}] offset {offset}"
        raise self.timed_out(err) or record_error(err, where, self.ctx.where("target"))

    def timed_out(self, err: KafkaError) -> BrokerError | None:
        """A fenced producer whose transaction outlived its ``transaction.timeout.ms``: the
        broker aborted it (see
        :func:`~mirror_lib.replication.copy.target_producer.timed_out_error`).
        """
        if not self.eos:
            return None
        ctx = self.ctx
        return timed_out_error(
            err, time.monotonic() - self.txn_start, self.txn_timeout_ms, ctx.where("target"),
            f"{ctx.target}.producer.transaction.timeout.ms",
        )  # fmt: skip

    def refresh_ledger(self) -> None:
        """At a slice's end: a slice that committed nothing writes its partitions' positions
        unchanged, in a transaction of their own, so an idle partition's entry never expires."""
        if not (self.ledger.fresh or self.in_txn or not self.parts):
            self._commit_alone()

    def tell_metrics(self) -> None:
        """Tell the metrics window once it is due (at once when the slice ends: its
        ``closing``), in a transaction of its own when none is open to carry it."""
        if self.in_txn or not self.metrics.due(time.monotonic()):
            return
        if not (self.strategy.holding or self.strategy.sealed):
            self._commit_alone()

    def _commit_alone(self) -> None:
        """Commit a transaction of its own, carrying no records: only what a commit always
        carries (the ledger, the metrics window)."""
        self.begin()
        self.commit(lambda _tp: (-1, -1))

    def settle_syncs(self) -> None:
        """At the slice's end: wait until the source acknowledged the offset syncs."""
        if self.source_syncs is not None:
            self.source_syncs.finish(FLUSH_S)

    # -- end of the slice --------------------------------------------------------------------
    def close(self) -> None:
        """Close the clients; the stale-data budget of committed positions carries over."""
        if self.source_syncs is not None:
            self.source_syncs.close(1.0)
        self.skips.keep({tp: part.committed for tp, part in self.parts.items()})
        self.ledger.close()
        with contextlib.suppress(Exception):
            self.producer.flush(0)

    def drop(self) -> None:
        """Leave the slice without waiting on the target: queued records are purged and an open
        transaction is left to the next slice's ``init_transactions``, which aborts it."""
        self.in_txn = False
        self.strategy.drop()
        with contextlib.suppress(Exception):
            self.producer.purge()
        self.ledger.close()
