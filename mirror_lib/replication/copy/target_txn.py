"""A target's transactions, a part of :class:`~mirror_lib.replication.copy.writer.TargetWriter`.

Each transaction holds the records, their offset syncs (when that topic is on the target), the
``batch``, ``segments`` and ``skip`` events and the ledger offsets
(:mod:`mirror_lib.replication.copy.ledger`), so a crash leaves all of a transaction or none. It
commits every ``mirror.commit.interval.ms`` while at the source's head (or after
``mirror.commit.max.records`` / ``.bytes``; behind the head, it grows up to ``BEHIND_FACTOR``
intervals). In a fan-out group a commit waits for nothing (``wait=False``): it is done once the
target acknowledged every record, and a target that acknowledges nothing for ``FLUSH_S`` fails.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, Producer

from mirror_lib.config.stale import PartitionSkips
from mirror_lib.errors import BrokerError
from mirror_lib.kafka.bounded import bounded
from mirror_lib.mm2.formats import TP
from mirror_lib.replication import events, testhooks
from mirror_lib.replication.context import FlowContext, PlainProducer
from mirror_lib.replication.copy.copy_state import PartState
from mirror_lib.replication.copy.ledger import ledger_offsets
from mirror_lib.replication.copy.target_producer import (
    commit_error,
    passing_code,
    record_error,
    timed_out_error,
)
from mirror_lib.replication.copy.txn_events import batch_events, skip_events, sync_records

if TYPE_CHECKING:
    from mirror_lib.replication.copy.writer import CopyResult

log = logging.getLogger(__name__)

BEHIND_FACTOR = 10  # behind the head, a transaction may last this many commit intervals
FLUSH_S = 30.0  # a target that acknowledges nothing this long fails (transient)


class TargetTransactions:
    """Begin, commit and abort one target's transaction (state kept by the writer)."""

    ctx: FlowContext
    eos: bool
    fanout: bool
    exact: bool
    interval: float
    max_records: int
    max_bytes: int
    producer: Producer
    txn_timeout_ms: int  # the producer's transaction.timeout.ms
    ledger: Any  # the ledger group's consumer: its group metadata goes into each transaction
    parts: dict[TP, PartState]
    skips: dict[TP, PartitionSkips]
    result: CopyResult
    in_txn: bool
    txn_start: float
    txn_records: int
    txn_bytes: int
    aborts_unreported: int
    ledger_fresh: bool
    source_syncs: PlainProducer | None
    commit_pending: bool
    backlog: list[tuple]
    backlog_records: int
    _replay: Callable[[], None]

    def _begin(self) -> None:
        if self.eos:
            self.producer.begin_transaction()
        self.in_txn = True
        self.txn_start = time.monotonic()
        self.txn_records = self.txn_bytes = 0

    def commit_due(self, behind: bool) -> bool:
        """True when the open transaction should commit now."""
        if not self.in_txn:
            return False
        if self.commit_pending:
            return True
        age = time.monotonic() - self.txn_start
        return (
            self.txn_records >= self.max_records
            or self.txn_bytes >= self.max_bytes
            or age >= self.interval * (BEHIND_FACTOR if behind else 1)
        )

    def abort(self) -> None:
        """Abort the open transaction; every partition continues from its last commit."""
        if self.eos and self.in_txn:
            self.aborts_unreported += 1
            with contextlib.suppress(KafkaException):
                bounded(lambda: self.producer.abort_transaction(30), 30, "abort_transaction")
        self.in_txn = self.commit_pending = False
        self.backlog, self.backlog_records = [], 0
        for part in self.parts.values():
            part.reset()
            part.expect = part.committed
            part.done = part.committed >= part.until
        for skips in self.skips.values():
            skips.abort()

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

    def commit(self, watermarks: Callable[[Any], tuple[int, int]], *, wait: bool = True) -> bool:
        """Commit the open transaction; False when ``wait`` is off and acknowledgements are
        still outstanding (the transaction stays open and is committed on a later call)."""
        if not self.in_txn:
            return True
        ctx = self.ctx
        if not wait:
            if self._flush(0) > 0:
                self.commit_pending = True
                if time.monotonic() - self.txn_start > FLUSH_S:
                    raise BrokerError(
                        f"{ctx.where('target')} did not acknowledge records in {FLUSH_S:.0f}s",
                        transient=True,
                    )
                return False
        elif self._flush(self._flush_limit()) > 0:
            raise BrokerError(
                f"{ctx.where('target')} did not acknowledge records in {FLUSH_S:.0f}s",
                transient=True,
            )
        self.commit_pending = False
        acked_ms = time.time() * 1000.0
        moved = {tp: part for tp, part in self.parts.items() if part.expect != part.committed}
        for part in moved.values():
            if part.error is not None:
                err, _ = part.error
                first = part.runs[0][0] if part.runs else part.committed
                self._fail_record(err, part, first)
        segments = {tp: part.segments(self.exact) for tp, part in moved.items() if part.n}
        twice = {} if self.eos else {tp: n for tp, p in moved.items() if (n := p.unreported())}
        evs = batch_events(self, segments, acked_ms, watermarks) + skip_events(self)
        out = [(ctx.metrics_topic, *events.encode(e)) for e in evs]
        syncs = sync_records(ctx.settings, segments)
        if ctx.offset_syncs_on_target:
            out += [(ctx.offset_syncs_topic, s.key(), s.value()) for s in syncs]
        if self.source_syncs is not None:
            self.source_syncs.check()  # the syncs of earlier commits went out: commit this one
        failed: list[KafkaError] = []  # deliveries of these records that failed in the commit

        def delivered(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                failed.append(err)

        for topic, k, v in out:
            self.producer.produce(topic, v, k, partition=0, on_delivery=delivered)
        written = moved.values() if self.ledger_fresh else self.parts.values()
        ledger = {(part.remote, part.partition): part.expect for part in written}
        try:
            if self.eos:
                group = self.ledger.consumer_group_metadata()
                bounded(
                    lambda: self.producer.send_offsets_to_transaction(
                        ledger_offsets(ledger), group, 60
                    ),
                    60,
                    f"the ledger's send_offsets_to_transaction on {ctx.where('target')}",
                )
                testhooks.hold_before_commit()
                bounded(
                    lambda: self.producer.commit_transaction(60),
                    60,
                    f"commit_transaction on {ctx.where('target')}",
                )
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
            raise self._timed_out(err) or commit_error(err, failed, ctx.where("target")) from exc
        self.in_txn = False
        self.ledger_fresh = True
        if out:
            self.aborts_unreported = 0
        if syncs and not ctx.offset_syncs_on_target:
            if self.source_syncs is None:
                self.source_syncs = PlainProducer(ctx, "source")
            self.source_syncs.write(ctx.offset_syncs_topic, [(x.key(), x.value()) for x in syncs])
        if moved or out:  # not a ledger refresh alone
            self.result.transactions += 1
        if twice:
            self._tell_unreported(twice)
        for part in moved.values():
            part.committed = part.expect
            part.committed_downstream()
            self.result.records += part.n
            self.result.bytes += part.bytes
            part.reset()
        for skips in self.skips.values():
            skips.commit()
        if self.backlog:
            self._replay()
            if wait and self.in_txn:
                return self.commit(watermarks, wait=True)
        return True

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
