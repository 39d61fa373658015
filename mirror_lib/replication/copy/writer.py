"""One target of a copy task: its transactional producer, its ledger and its open transaction.

A copy task (:mod:`mirror_lib.replication.copy.copier`) reads its partitions once and hands every
consumed batch to one :class:`TargetWriter` per target: one for a flow ``A->B``, several for a
fan-out group ``A->B,C``. A writer copies what its target has not yet received (records before
its ledger position are dropped, so targets at different positions can share a read) and keeps
its own exactly-once guarantee through its transactions
(:mod:`mirror_lib.replication.copy.target_txn`: when they commit, and what each one holds).

Downstream offsets come from two delivery reports per partition and consume batch (the first
record of a transaction and the last of each batch): records of one transaction to one partition
are contiguous downstream, which :mod:`mirror_lib.replication.copy.copy_state` checks. Should
another producer write into a remote partition, :class:`Interleaved` is raised at commit; the copier
aborts, and the writer reports every record from then on (``exact``).

In a fan-out group a writer never blocks the others: it commits only once its target
acknowledged everything (``wait=False``), holding what arrives meanwhile; the copier compares
what each target has waiting (:meth:`TargetWriter.behind_error`) and drops a target that falls more
than ``mirror.fanout.max.lag.records`` behind the others, or that acknowledges nothing for
``target_txn.FLUSH_S``, from the shared read for the rest of the slice.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, Producer

from mirror_lib.config import stale
from mirror_lib.config.stale import PartitionSkips, SkipPolicy, split_stale
from mirror_lib.errors import BrokerError
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.context import FlowContext, PlainProducer
from mirror_lib.replication.copy.copy_state import PartState
from mirror_lib.replication.copy.ledger import ledger_consumer, read_ledger
from mirror_lib.replication.copy.target_producer import make_producer
from mirror_lib.replication.copy.target_txn import TargetTransactions

log = logging.getLogger(__name__)

NO_END = 2**63 - 1
FANOUT_INIT_S = 15.0  # in a fan-out group a target's set-up may not hold the others longer


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


class TargetWriter(TargetTransactions):
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
        self.ledger = ledger_consumer(ctx, slot)
        # offset syncs on the source go out after each commit, from one producer per slice
        self.source_syncs: PlainProducer | None = None
        self.commit_pending = False  # fan-out: a commit waits for the target's acknowledgements
        self.backlog: list[tuple] = []  # what arrived while a commit was pending
        self.backlog_records = 0

    @property
    def name(self) -> str:
        return self.ctx.flow.name

    # -- positions ---------------------------------------------------------------------------
    def start(self) -> None:
        """Read the ledger: where each partition continues (the truth about what was delivered)."""
        ctx = self.ctx
        remote = {(t, p): (ctx.remote_topic(t), p) for t, p in self.partitions}
        timeout = FANOUT_INIT_S if self.fanout else 60.0
        delivered = read_ledger(self.ledger, remote.values(), timeout, ctx.where("target"))
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
            try:  # positional: keyword arguments cost 0.9 us a record more (bench/README.md)
                produce(rt, value, key, p, cb, None, ts if ts > 0 else 0, msg.headers())
            except BufferError:
                self._produce_when_room(part, msg, cb)
            except KafkaException as exc:
                self._fail_record(exc.args[0], part, off)
            n += 1
            size += (len(key) if key else 0) + (len(value) if value else 0)
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
        with contextlib.suppress(Exception):
            self.producer.purge()
        with contextlib.suppress(Exception):
            self.ledger.close()
