"""One target of a copy task: its transactional producer, its ledger and its open transaction.

A copy task (:mod:`mirror_lib.replication.copy.copier`) reads its partitions once and hands every
consumed batch to one :class:`TargetWriter` per target: one for a flow ``A->B``, several for a
fan-out group ``A->B,C``. A writer copies what its target has not yet received (records before
its ledger position are dropped, so targets at different positions can share a read) and keeps
its own exactly-once guarantee through its transactions.

Each transaction holds the records, their offset syncs (when that topic is on the target), the
``batch``, ``segments`` and ``skip`` events (:mod:`mirror_lib.replication.copy.txn_events`) and
the ledger offsets (:mod:`mirror_lib.replication.copy.ledger`), so a crash leaves all of a
transaction or none. It commits every ``mirror.commit.interval.ms`` while at the source's head
(or after ``mirror.commit.max.records`` / ``.bytes``; behind the head, it grows up to
``BEHIND_FACTOR`` intervals, at least ``BEHIND_MIN_S``).

Downstream offsets come from two delivery reports per partition and consume batch (the first
record of a transaction and the last of each batch): records of one transaction to one partition
are contiguous downstream, which :mod:`mirror_lib.replication.copy.copy_state` checks. Should
another producer write into a remote partition,
:class:`~mirror_lib.replication.copy.copy_state.Interleaved` is raised at commit; the copier
aborts, and the writer reports every record from then on (``exact``).

In a fan-out group a writer never blocks the others: it commits only once its target
acknowledged everything (``wait=False``), holding what arrives meanwhile; the copier compares
what each target has waiting (:meth:`TargetWriter.behind_error`) and drops a target that falls more
than ``mirror.fanout.max.lag.records`` behind the others, or that acknowledges nothing for
``FLUSH_S``, from the shared read for the rest of the slice.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from mirror_lib.config import stale
from mirror_lib.config.stale import PartitionSkips, SkipPolicy, split_stale
from mirror_lib.errors import BrokerError, HungCallError
from mirror_lib.kafka.bounded import bounded
from mirror_lib.mm2.formats import TP
from mirror_lib.replication import events, testhooks
from mirror_lib.replication.context import FlowContext, PlainProducer
from mirror_lib.replication.copy import txn_timing
from mirror_lib.replication.copy.copy_state import PartState, Rewound
from mirror_lib.replication.copy.ledger import ledger_consumer, ledger_offsets, read_ledger
from mirror_lib.replication.copy.target_producer import (
    commit_error,
    make_producer,
    min_insync,
    passing_code,
    record_error,
    target_trouble,
    timed_out_error,
)
from mirror_lib.replication.copy.txn_events import (
    batch_events,
    resumed_events,
    skip_events,
    sync_records,
)

log = logging.getLogger(__name__)

NO_END = 2**63 - 1
BEHIND_FACTOR = 10  # behind the head, a transaction may last this many commit intervals
BEHIND_MIN_S = 1.0  # ... and at least this long: a backlog is not copied in small commits
FLUSH_S = 30.0  # a target that acknowledges nothing this long fails (transient)
FANOUT_INIT_S = 15.0  # in a fan-out group a target's set-up may not hold the others longer
#: send_offsets_to_transaction takes milliseconds (p99 15 ms at 5,000 records/s); one that has not
#: returned after this long, and HANG_FACTOR times the slowest that did lately (a machine too
#: busy to answer in time is not a hang), is taken as hung: the writer goes on with a new
#: producer (renew)
SEND_OFFSETS_HANG_S = 3.0
HANG_FACTOR = 5.0
#: producers a writer may replace in a slice (a rolling restart of three brokers moved the ledger
#: group's coordinator three times in one slice); past that the slice ends
MAX_RENEWALS = 8
SLOW_ACK_S = 2.0  # acknowledgements this late: the writer looks at the target for a cause
#: acknowledgements this late (and HANG_FACTOR times the slowest lately) while the target's
#: metadata shows every partition led and in sync: the requests are held on a connection to a
#: broker that went away (a partitioned network holds them until socket.timeout.ms, 30 s), and
#: the writer renews its producer instead of waiting for that
STUCK_ACK_S = 10.0
_abandoned: list[Any] = []  # hung clients: never freed under the thread blocked in them


@dataclass
class Landing:
    """A transaction whose records were acknowledged, on its way to commit: what it moved and
    what it wrote besides the records."""

    moved: dict[TP, PartState]
    syncs: list[Any]
    twice: dict[TP, int]
    wrote: bool  # metrics records or offset syncs on the target
    failed: list[KafkaError] = field(default_factory=list)  # their deliveries that failed
    remaining: int = 0  # their delivery reports not yet served
    acked_ms: float = 0.0  # when the records were acknowledged (epoch ms)

    def delivered(self, err: KafkaError | None, _msg: Any) -> None:
        self.remaining -= 1
        if err is not None:
            self.failed.append(err)


@dataclass
class Rolled:
    """At least once, a sealed transaction the copy loop no longer waits for: its partitions'
    states (``sealed``), when it began, and the ledger entries it writes once it lands."""

    sealed: dict[TP, PartState]
    start: float
    ledger: dict[TP, int]
    landing: Landing | None = None


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
    ) -> None:
        self.ctx, self.slot, self.batch_id, self.query_id = ctx, slot, batch_id, query_id
        self.topic_ids = topic_ids or {}  # source topic -> id as planned, in segments events
        s = ctx.settings
        self.partitions = list(partitions)
        self.until = until
        self.fanout = fanout
        self.skip_key = f"{options_key}|{ctx.flow.name}"
        self.eos = s.exactly_once
        self.interval = s.commit_interval_ms / 1000.0
        self.behind_interval = max(self.interval * BEHIND_FACTOR, BEHIND_MIN_S)
        self.behind = False  # the copy loop says at each commit_due whether it is behind
        self.max_records, self.max_bytes = s.commit_max_records, s.commit_max_bytes
        self.max_lag = s.fanout_max_lag_records
        # without idempotence a retry may write a batch twice: every record's offset is
        # reported, so that offsets are mapped around the copy nobody acknowledged
        self.exact = not ctx.idempotent("target")
        self.result = CopyResult(slot)
        self.skip_policy = SkipPolicy.from_settings(s)
        self.skips: dict[TP, PartitionSkips] = {}  # partitions the stale-data policy covers
        self.parts: dict[TP, PartState] = {}
        self.in_txn = False
        self.txn_start = 0.0
        self.txn_records = self.txn_bytes = 0
        self.aborts_unreported = 0  # aborted transactions, told in the next batch events
        # the broker expires a ledger entry not written for offsets.retention.minutes (7 days by
        # default): each slice's first commit writes every partition's position, moved or not
        self.ledger_fresh = False
        # Clients live for one slice (minutes): a client that outlived a topic's re-creation
        # can crash librdkafka 2.16 in its metadata cache (upstream #4964).
        init_s = FANOUT_INIT_S if fanout else 60.0
        self.producer: Producer
        self.producer, self.txn_timeout_ms = make_producer(
            ctx, slot, remote_topics={ctx.remote_topic(t) for t, _ in partitions},
            init_timeout_s=init_s,
        )  # fmt: skip
        self.ledger_failed: list[KafkaError] = []  # asynchronous ledger commits that failed
        self.ledger = ledger_consumer(ctx, slot, on_commit=self._ledger_committed)
        self.ledger_group: Any = None  # its group metadata, asked for once (0.5 ms a call)
        self.rolled: Rolled | None = None  # at least once: the sealed transaction (see _roll)
        # offset syncs on the source go out after each commit, from one producer per slice
        self.source_syncs: PlainProducer | None = None
        self.commit_pending = False  # fan-out: a commit waits for the target's acknowledgements
        self.backlog: list[tuple] = []  # what arrived while a commit was pending
        self.backlog_records = 0
        self.renewals = 0  # producers replaced in this slice (renew)
        self.slow_offsets_s = 0.0  # the slowest send_offsets_to_transaction lately (decays)
        self.slow_ack_s = 0.0  # the slowest acknowledgement of a commit's records lately (decays)
        self._min_isr: dict[str, int] | None = None  # of the remote topics, asked once a slice
        # per remote partition, when its copy was last known complete (epoch ms; from the
        # ledger's entries, then this writer's commits): how long records waited (resumed)
        self.landed_ms: dict[TP, float] = {}
        self.trouble: str | None = None  # what held the copy up, told with the next resumed event
        self.restarted = True  # no commit since the ledger was read: a (re)started copy
        self.commit_started_ms = 0.0  # the timing log's (txn_timing): when the commit started

    @property
    def name(self) -> str:
        return self.ctx.flow.name

    # -- positions ---------------------------------------------------------------------------
    def start(self) -> None:
        """Read the ledger: where each partition continues (the truth about what was delivered)."""
        ctx = self.ctx
        remote = {(t, p): (ctx.remote_topic(t), p) for t, p in self.partitions}
        timeout = FANOUT_INIT_S if self.fanout else 60.0
        delivered = read_ledger(
            self.ledger, remote.values(), timeout, ctx.where("target"), stamps=self.landed_ms
        )
        self.restarted = True
        self.parts = {}
        for (t, p), (rt, _p) in remote.items():
            start = delivered.get((rt, p))
            if start is None:
                raise BrokerError(
                    f"no delivery ledger entry for {t}[{p}] in group {ctx.ledger_group(self.slot)} "
                    f"on {ctx.where('target')}; the planner writes one before a slice starts",
                    transient=True,
                )
            self.parts[(t, p)] = PartState(t, p, rt, start, self.until.get((t, p), NO_END))

    def open_positions(self) -> dict[TP, int]:
        """Where each partition not yet done continues."""
        return {tp: part.expect for tp, part in self.parts.items() if not part.done}

    def done(self) -> bool:
        return all(part.done for part in self.parts.values())

    # -- records -----------------------------------------------------------------------------
    def accept(self, tp: TP, group: list[Any], consumed_ms: float) -> bool:
        """Copy the records of ``group`` (one partition, in order) this target still needs.

        Returns True when the partition reached its ``until`` end.
        """
        part = self.parts.get(tp)
        if part is None or part.done:
            return False
        if self.commit_pending:  # the bounded buffer: copied once the transaction committed
            self._hold(("accept", tp, group, consumed_ms), len(group))
            return False
        if group[0].offset() < part.expect:  # another target of the read is behind this one
            group = [m for m in group if m.offset() >= part.expect]
            if not group:
                return False
        finished = group[-1].offset() >= part.until
        if finished:
            group = [m for m in group if m.offset() < part.until]
        skipped_end = None
        if group and self.skip_policy.applies_to(tp[0]):
            if tp not in self.skips:  # the budget an earlier slice of this process left
                self.skips[tp] = stale.resume(self.skip_key, *tp, part.committed, self.skip_policy)
            group, skipped_end = split_stale(self.skips[tp], group, consumed_ms)
        if group:
            if not self.in_txn:
                self._begin()
            self._produce(part, group, consumed_ms)
        if skipped_end is not None:
            self.move(tp, skipped_end)  # the ledger moves past the skipped records
        if finished:
            self.finish(tp, part.until)
        return finished

    def _produce(self, part: PartState, group: list[Any], consumed_ms: float) -> None:
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
                self._fail_record(exc.args[0], part, off)
            n += 1
            size += (len(key) if key else 0) + (len(value) if value else 0)
        part.pending += reports
        self.producer.poll(0)  # serve delivery reports now: librdkafka frees acknowledged records
        part.expect, part.n = expect, n
        part.bytes += size
        part.consumed.append((consumed_ms, len(group)))
        self.txn_records += len(group)
        self.txn_bytes += size

    def _produce_when_room(self, part: PartState, msg: Any, cb: Any) -> None:
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
                self._fail_record(exc.args[0], part, msg.offset())

    def _hold(self, item: tuple, records: int) -> None:
        """Keep ``item`` until the pending commit is done (the copier bounds what is held)."""
        self.backlog.append(item)
        self.backlog_records += records

    def waiting(self) -> int:
        """Records read for this target that it has not acknowledged: held or in flight."""
        return self.backlog_records + len(self.producer)

    def behind_error(self, lead: int) -> BrokerError | None:
        """Why this target must leave the shared read: more than ``max_lag`` records waiting
        beyond ``lead``, what the target furthest ahead has waiting (None: it may stay)."""
        behind = self.waiting() - lead
        if behind <= self.max_lag:
            return None
        return BrokerError(
            f"{self.ctx.where('target')} is {behind} records behind the other targets of the "
            f"read (held or unacknowledged), more than {self.name}.mirror.fanout.max.lag.records "
            f"= {self.max_lag}: it leaves the shared read for this slice and catches up on its own",
            transient=True,
        )

    def _replay(self) -> None:
        """After a pending commit: what arrived meanwhile, in order."""
        backlog, self.backlog, self.backlog_records = self.backlog, [], 0
        for kind, tp, *args in backlog:
            if kind == "accept":
                self.accept(tp, *args)
            else:
                self.move(tp, *args)

    def move(self, tp: TP, end: int) -> None:
        """Everything before ``end`` was seen: the ledger may move past markers and aborts; a
        partition moved to its ``until`` end is done."""
        if self.commit_pending:
            self._hold(("move", tp, end), 0)
            return
        part = self.parts.get(tp)
        if part is not None and not part.done and end > part.expect:
            part.expect = end
            part.done = end >= part.until
            if not self.in_txn:
                self._begin()

    def finish(self, tp: TP, end: int) -> None:
        """The partition reached its ``until`` end (held like any move while a commit waits)."""
        self.move(tp, end)
        if not self.commit_pending:
            self.parts[tp].done = True

    # -- transactions ------------------------------------------------------------------------
    def _begin(self) -> None:
        if self.eos:
            self.producer.begin_transaction()
        self.in_txn = True
        self.txn_start = time.monotonic()
        self.txn_records = self.txn_bytes = 0

    def commit_due(self, behind: bool) -> bool:
        """True when the open transaction should commit now, or a sealed one can move on."""
        self.behind = behind
        return self.rolled is not None or self._due()

    def _due(self) -> bool:
        """The open transaction's interval, records or bytes are up (``behind``: as the loop
        last said)."""
        if not self.in_txn:
            return False
        if self.commit_pending:
            return True
        age = time.monotonic() - self.txn_start
        return (
            self.txn_records >= self.max_records
            or self.txn_bytes >= self.max_bytes
            or age >= (self.behind_interval if self.behind else self.interval)
        )

    def abort(self) -> None:
        """Abort the open transaction; every partition continues from its last commit."""
        if self.eos and self.in_txn:
            self.aborts_unreported += 1
            with contextlib.suppress(KafkaException):
                bounded(lambda: self.producer.abort_transaction(30), 30, "abort_transaction")
        self._forget_open()
        for part in self.parts.values():
            part.reset()
            part.expect = part.committed
            part.done = part.committed >= part.until

    def _forget_open(self) -> None:
        """Drop the open (or sealed, or held) transaction's state: nothing of it counts."""
        self.in_txn = self.commit_pending = False
        self.rolled = None
        self.backlog, self.backlog_records = [], 0
        for skips in self.skips.values():
            skips.abort()

    def renew(self, cause: HungCallError) -> None:
        """Go on with a new producer after a call hung in the old one (``cause``).

        The new producer's ``init_transactions`` on the same ``transactional.id`` fences the old
        one, and its coordinator aborts what the old one left open; the ledger, read again (it
        waits for that abort), says where each partition continues. The copier then reads those
        partitions again from there (:class:`Rewound`). Past :data:`MAX_RENEWALS` in a slice,
        ``cause`` ends the slice.
        """
        if not self.eos or self.renewals >= MAX_RENEWALS:
            raise cause
        self.renewals += 1
        _abandoned.extend((self.producer, self.ledger))  # its connections may be held too
        self.ledger = ledger_consumer(self.ctx, self.slot, on_commit=self._ledger_committed)
        self.ledger_group = None
        if self.in_txn or self.commit_pending or self.rolled is not None:
            self.aborts_unreported += 1
        self._forget_open()
        started = time.monotonic()
        self.producer, self.txn_timeout_ms = make_producer(
            self.ctx, self.slot, remote_topics={part.remote for part in self.parts.values()},
            init_timeout_s=FANOUT_INIT_S if self.fanout else 60.0,
        )  # fmt: skip
        self.ledger_fresh = False
        self.start()
        took = time.monotonic() - started
        self.trouble = f"{cause}; a new producer took over in {took:.1f}s"
        log.warning(
            "%s: slot %d: %s; a new producer took over in %.1fs and continues from the ledger",
            self.ctx.label, self.slot, cause, took,
        )  # fmt: skip
        raise Rewound(f"{self.name}: slot {self.slot} continues from its ledger")

    def _fail_record(self, err: KafkaError, part: PartState, offset: int) -> None:
        if not passing_code(err.code()):  # the target answers: end the transaction now
            self.abort()
        where = f"{part.topic}[{part.partition}] offset {offset}"
        raise self._timed_out(err) or record_error(err, where, self.ctx.where("target"))

    def _timed_out(self, err: KafkaError) -> BrokerError | None:
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

    def _flush(self, timeout_s: float) -> int:
        """``producer.flush``, which raises a fatal producer error (fenced) as it is."""
        try:
            return self.producer.flush(timeout_s)
        except KafkaException as exc:
            err = exc.args[0]
            raise self._timed_out(err) or commit_error(err, [], self.ctx.where("target")) from exc

    def commit(
        self,
        watermarks: Callable[[Any], tuple[int, int]],
        *,
        wait: bool = True,
        roll: bool = False,
    ) -> bool:
        """Commit the open transaction; False when it is not done yet: ``wait`` is off and
        acknowledgements are still outstanding (the transaction stays open and is committed on
        a later call), or ``roll`` handed it to :meth:`_roll`.

        ``roll`` (the copy loop's commits): at least once, the loop never waits for the target.
        """
        if self.rolled is not None:
            if not self._roll(watermarks, block=not roll):
                return False
            if roll and self.rolling and not self._due():
                return True  # the open transaction is sealed when it is due, not at once
        if not self.in_txn:
            return True
        if roll and self.rolling:
            self._seal()
            return self._roll(watermarks, block=False)
        ctx = self.ctx
        if not wait and self._flush(0) > 0:
            self.commit_pending = True
            if time.monotonic() - self.txn_start > FLUSH_S:
                raise self._unacknowledged("records")
            return False
        self.commit_pending = False
        moved = {tp: part for tp, part in self.parts.items() if part.expect != part.committed}
        ledger = self._ledger_entries(moved, self.parts)
        landing: Landing | None = None
        if txn_timing.enabled():
            self.commit_started_ms = txn_timing.now_ms()
        try:
            if self.eos:
                # the ledger's entries need no acknowledgement: they are sent while the records
                # are (flush), and the transaction still commits both or neither
                topics = {part.remote for part in moved.values()}
                producer = self.producer

                offsets = ledger_offsets(ledger, self._stamps(ledger, moved))

                def send_offsets() -> None:
                    started = time.monotonic()
                    testhooks.hang_send_offsets(topics)
                    producer.send_offsets_to_transaction(offsets, self._ledger_group(), 60)
                    took = time.monotonic() - started
                    self.slow_offsets_s = max(took, self.slow_offsets_s * 0.9)

                bounded(
                    send_offsets,
                    60,
                    f"the ledger's send_offsets_to_transaction on {ctx.where('target')}",
                    meanwhile=self._acknowledge if wait else None,
                    hang_s=max(SEND_OFFSETS_HANG_S, HANG_FACTOR * self.slow_offsets_s),
                )
                landing = self._prepare(moved, watermarks)
                testhooks.hold_before_commit(topics)
                bounded(
                    lambda: self.producer.commit_transaction(60),
                    60,
                    f"commit_transaction on {ctx.where('target')}",
                )
            else:
                if wait:
                    self._acknowledge()
                landing = self._prepare(moved, watermarks)
                if self.producer.flush(60) > 0:
                    raise BrokerError(
                        f"metrics/offset syncs not acknowledged by {ctx.where('target')}",
                        transient=True,
                    )
                if landing.failed:  # the ledger never moves past syncs that were not written
                    raise commit_error(landing.failed[0], landing.failed, ctx.where("target"))
                self._commit_ledger(ledger, self._stamps(ledger, moved))
        except KafkaException as exc:
            err = exc.args[0]
            failed = landing.failed if landing is not None else []
            raise self._timed_out(err) or commit_error(err, failed, ctx.where("target")) from exc
        except HungCallError as exc:
            self.renew(exc)
        assert landing is not None  # each branch prepared it or raised
        self.in_txn = False
        self._complete(landing)
        if self.backlog:
            self._replay()
            if wait and self.in_txn:
                return self.commit(watermarks, wait=True)
        return True

    def _acknowledge(self) -> None:
        """Wait until the target acknowledged the transaction's records; if that takes longer
        than SLOW_ACK_S, look at the target for why (:func:`target_trouble`). If it shows
        nothing wrong and STUCK_ACK_S pass without acknowledgements, the requests are stuck on a
        lost connection: :class:`HungCallError` (the commit renews the producer)."""
        started, limit = time.monotonic(), self._flush_limit()
        if self._flush(min(SLOW_ACK_S, limit)) == 0:
            self.slow_ack_s = max(time.monotonic() - started, self.slow_ack_s * 0.9)
            return
        if self._min_isr is None:
            self._min_isr = min_insync(self.ctx, sorted({t for t, _p in self._written()}))
        where = self.ctx.where("target")
        trouble = target_trouble(self.ctx, self.producer, self._written(), self._min_isr)
        self.trouble = trouble or self.trouble
        stuck = max(STUCK_ACK_S, HANG_FACTOR * self.slow_ack_s)
        if trouble is None and self.eos and stuck < limit:
            if self._flush(max(started + stuck - time.monotonic(), 0.0)) == 0:
                self.slow_ack_s = max(time.monotonic() - started, self.slow_ack_s * 0.9)
                return
            raise HungCallError(
                f"{where} acknowledged none of {len(self.producer)} records for {stuck:.0f}s "
                "although its metadata shows every partition led and in sync: they are held on "
                "a connection to a broker that went away"
            )
        if self._flush(max(started + limit - time.monotonic(), 0.0)) > 0:
            # what the target shows now: fencing a lost broker shrinks the in-sync replicas only
            # once its session ends, seconds after the first look
            self.trouble = target_trouble(self.ctx, self.producer, self._written(), self._min_isr)
            raise self._unacknowledged("records")
        self.slow_ack_s = max(time.monotonic() - started, self.slow_ack_s * 0.9)

    def _written(self) -> list[TP]:
        """The remote partitions this writer's transactions write: its own and those of the
        internal topics that go with them."""
        out = [(part.remote, part.partition) for part in self.parts.values()]
        return [*out, (self.ctx.metrics_topic, 0)]

    @property
    def rolling(self) -> bool:
        """At least once, the copy loop's commits do not wait: a transaction's records are
        sealed and the next ones copied while they are acknowledged (:meth:`_roll`). Not in
        a fan-out group (which holds records while a target acknowledges), in exact mode (every
        report counts) or with a stale-data policy (its skips belong to one transaction)."""
        return not (self.eos or self.fanout or self.exact or self.skip_policy.enabled)

    def _seal(self) -> None:
        """Hand the open transaction to :meth:`_roll`: its partitions' states stay with it, and
        the records that arrive from now on go to their successors."""
        sealed = {}
        for tp, part in self.parts.items():
            if part.expect != part.committed:
                sealed[tp] = part
                self.parts[tp] = part.successor()
        self.rolled = Rolled(sealed, self.txn_start, self._ledger_entries(sealed, self.parts))
        self.in_txn = False
        if txn_timing.enabled():
            self.commit_started_ms = txn_timing.now_ms()

    def _roll(self, watermarks: Callable[[Any], tuple[int, int]], *, block: bool) -> bool:
        """Move a sealed transaction on without waiting (``block`` off): once its records are
        acknowledged, its metrics records and offset syncs go out; once those are, the ledger
        moves. True when it has landed."""
        rolled = self.rolled
        assert rolled is not None
        self.producer.poll(0)
        if rolled.landing is None:
            if not self._acknowledged(
                lambda: all(p.pending <= 0 for p in rolled.sealed.values()),
                rolled.start,
                block,
                "records",
            ):
                return False
            rolled.landing = self._prepare(rolled.sealed, watermarks)
            self.producer.poll(0)
        landing = rolled.landing
        if not self._acknowledged(
            lambda: landing.remaining <= 0, rolled.start, block, "metrics records/offset syncs"
        ):
            return False
        if landing.failed:
            raise commit_error(landing.failed[0], landing.failed, self.ctx.where("target"))
        try:
            # in the loop the ledger is committed without waiting; the slice's last commit
            # waits, and a failure is raised at the next commit after it is known
            stamps = self._stamps(rolled.ledger, rolled.sealed)
            self._commit_ledger(rolled.ledger, stamps, asynchronous=not block)
        except KafkaException as exc:
            raise commit_error(exc.args[0], [], self.ctx.where("target")) from exc
        self.rolled = None
        self._complete(landing)
        return True

    def _acknowledged(self, done: Callable[[], bool], start: float, block: bool, what: str) -> bool:
        """Whether ``done`` says the target acknowledged ``what``: at once, or (``block``)
        after a flush. Nothing for ``FLUSH_S`` since ``start`` fails the slice (transient)."""
        if done():
            return True
        if block:
            self._flush(FLUSH_S)
        if done():
            return True
        if block or time.monotonic() - start > FLUSH_S:
            raise self._unacknowledged(what)
        return False

    def _unacknowledged(self, what: str) -> BrokerError:
        cause = f": {self.trouble}" if self.trouble else ""
        return BrokerError(
            f"{self.ctx.where('target')} did not acknowledge {what} in {FLUSH_S:.0f}s{cause}",
            transient=True,
        )

    def _ledger_group(self) -> Any:
        if self.ledger_group is None:  # assigned, never subscribed: it stays the same
            self.ledger_group = self.ledger.consumer_group_metadata()
        return self.ledger_group

    def _commit_ledger(
        self,
        ledger: dict[TP, int],
        stamps: dict[TP, float] | None = None,
        *,
        asynchronous: bool = False,
    ) -> None:
        self.ledger.poll(0)  # serves the outcomes of earlier asynchronous commits
        if self.ledger_failed:
            raise KafkaException(self.ledger_failed[0])
        offsets = ledger_offsets(ledger, stamps)
        if ledger and asynchronous:
            self.ledger.commit(offsets=offsets, asynchronous=True)
        elif ledger:
            self.ledger.commit(offsets=offsets, asynchronous=False)

    def _stamps(self, ledger: dict[TP, int], moved: dict[TP, PartState]) -> dict[TP, float]:
        """Each ledger entry's stamp (:func:`ledger_offsets`): now for the partitions this
        commit moves, the last one known for the others."""
        now = time.time() * 1000.0
        stamps = {rtp: self.landed_ms[rtp] for rtp in ledger if rtp in self.landed_ms}
        stamps.update({(part.remote, part.partition): now for part in moved.values()})
        return stamps

    def _ledger_committed(self, err: KafkaError | None, offsets: list[Any]) -> None:
        errors = [err] if err is not None else [tp.error for tp in offsets if tp.error]
        self.ledger_failed.extend(errors)

    def _ledger_entries(
        self, moved: dict[TP, PartState], parts: dict[TP, PartState]
    ) -> dict[TP, int]:
        """The ledger entries a transaction that moved ``moved`` writes: theirs, and once a
        slice every partition's of ``parts`` (so none expires)."""
        if self.ledger_fresh:
            return {(p.remote, p.partition): p.expect for p in moved.values()}
        ledger = {(p.remote, p.partition): p.committed for p in parts.values()}
        ledger.update({(p.remote, p.partition): p.expect for p in moved.values()})
        return ledger

    def _prepare(
        self, moved: dict[TP, PartState], watermarks: Callable[[Any], tuple[int, int]]
    ) -> Landing:
        """After ``moved``'s records were acknowledged: their segments, and what goes with them
        (metrics records, offset syncs on the target), produced."""
        ctx = self.ctx
        acked_ms = time.time() * 1000.0
        for part in moved.values():
            if part.error is not None:
                err, _ = part.error
                first = part.runs[0][0] if part.runs else part.committed
                self._fail_record(err, part, first)
        segments = {tp: part.segments(self.exact) for tp, part in moved.items() if part.n}
        twice = {} if self.eos else {tp: n for tp, p in moved.items() if (n := p.unreported())}
        evs = batch_events(self, moved, segments, acked_ms, watermarks) + skip_events(self)
        evs += resumed_events(self, moved, acked_ms)
        out = [(ctx.metrics_topic, *events.encode(e)) for e in evs]
        syncs = sync_records(ctx.settings, segments)
        if ctx.offset_syncs_on_target:
            out += [(ctx.offset_syncs_topic, s.key(), s.value()) for s in syncs]
        if self.source_syncs is not None:
            self.source_syncs.check()  # the syncs of earlier commits went out: commit this one
        landing = Landing(moved, syncs, twice, bool(out), remaining=len(out), acked_ms=acked_ms)
        for topic, k, v in out:
            self.producer.produce(topic, v, k, partition=0, on_delivery=landing.delivered)
        return landing

    def _complete(self, landing: Landing) -> None:
        """The transaction of ``landing`` committed: move every partition's committed position."""
        ctx = self.ctx
        self.ledger_fresh = True
        if landing.wrote:
            self.aborts_unreported = 0
        if landing.syncs and not ctx.offset_syncs_on_target:
            if self.source_syncs is None:
                self.source_syncs = PlainProducer(ctx, "source")
            self.source_syncs.write(
                ctx.offset_syncs_topic, [(x.key(), x.value()) for x in landing.syncs]
            )
        if landing.moved or landing.wrote:  # not a ledger refresh alone
            self.result.transactions += 1
        if landing.twice:
            self._tell_unreported(landing.twice)
        if landing.moved and txn_timing.enabled():
            txn_timing.write(
                self.slot, self.commit_started_ms, landing.acked_ms, list(landing.moved.values())
            )
        self.restarted = False
        self.trouble = None
        for tp, part in landing.moved.items():
            self.landed_ms[(part.remote, part.partition)] = landing.acked_ms
            part.committed = part.expect
            part.committed_downstream()
            self.result.records += part.n
            self.result.bytes += part.bytes
            part.reset()
            live = self.parts.get(tp)
            if live is not None and live is not part:  # it rolled on: its successor's base
                live.committed, live.d_next = part.committed, part.d_next
        for skips in self.skips.values():
            skips.commit()

    def _tell_unreported(self, twice: dict[TP, int]) -> None:
        """Without transactions, records a retry wrote twice stay on the target: count them."""
        self.result.unreported += sum(twice.values())
        where = ", ".join(f"{self.parts[tp].remote}[{tp[1]}]: {n}" for tp, n in twice.items())
        log.warning(
            "%s: %d record(s) on %s between the ones this commit copied were not acknowledged "
            "to it (%s): the first copy of a produce request retried after its acknowledgement "
            "was lost (without idempotence it is written twice), or another producer's records; "
            "offsets are mapped around them",
            self.ctx.label, sum(twice.values()), self.ctx.where("target"), where,
        )  # fmt: skip

    def refresh_ledger(self) -> None:
        """At a slice's end: a slice that committed nothing writes its partitions' positions
        unchanged, in a transaction of their own, so an idle partition's entry never expires."""
        if self.ledger_fresh or self.in_txn or not self.parts:
            return
        self._begin()
        self.commit(lambda _tp: (-1, -1))

    def _flush_limit(self) -> float:
        """How long a waiting commit may wait for acknowledgements (in a fan-out group, what is
        left of ``FLUSH_S`` since the transaction began)."""
        if not self.fanout:
            return FLUSH_S
        return max(FLUSH_S - (time.monotonic() - self.txn_start), 1.0)

    def settle_syncs(self) -> None:
        """At the slice's end: wait until the source acknowledged the offset syncs."""
        if self.source_syncs is not None:
            self.source_syncs.finish(FLUSH_S)

    # -- end of the slice --------------------------------------------------------------------
    def close(self) -> None:
        """Close the clients; the stale-data budget of committed positions carries over."""
        if self.source_syncs is not None:
            self.source_syncs.close(1.0)
        for tp, skips in self.skips.items():
            if tp in self.parts:
                stale.keep(self.skip_key, *tp, self.parts[tp].committed, skips)
        with contextlib.suppress(Exception):
            self.ledger.close()
        with contextlib.suppress(Exception):
            self.producer.flush(0)

    def drop(self) -> None:
        """Leave the slice without waiting on the target: queued records are purged and an open
        transaction is left to the next slice's ``init_transactions``, which aborts it."""
        self.in_txn = self.commit_pending = False
        self.rolled = None
        with contextlib.suppress(Exception):
            self.producer.purge()
        with contextlib.suppress(Exception):
            self.ledger.close()
