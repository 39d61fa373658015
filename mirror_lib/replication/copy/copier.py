"""Copy a task slot's partitions for one time slice (docs/design.md#d2-slices): read once, write to
each target.

A slice task keeps ``read_committed`` source consumers and, per target, a
:class:`~mirror_lib.replication.copy.writer.TargetWriter` (one transactional producer and one
``init_transactions`` per slot per slice, which fences zombies) and copies records as they
arrive. A flow ``A->B`` has one writer; a fan-out group ``A->B,C`` has one per target, fed from
one consumer (:mod:`~mirror_lib.replication.copy.source_reader`): each consumed batch goes to every
writer, which keeps what its target still needs. Each writer's ledger says where its target
continues, so targets at different positions share a read safely.

In a fan-out group one target never stops the others
(:mod:`~mirror_lib.replication.copy.fanout_targets`).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, ParamSpec, TypeVar

from confluent_kafka import KafkaError

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.admin import AUTH_ERRORS, TOPIC_GONE_CODES
from mirror_lib.mm2.formats import TP
from mirror_lib.replication import testhooks
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.client_threads import ClientThreads
from mirror_lib.replication.copy.copy_state import Interleaved, Rewound
from mirror_lib.replication.copy.fanout_targets import TARGET_ERRORS, Targets
from mirror_lib.replication.copy.source_reader import CONSUME_BATCH, Reader, Record
from mirror_lib.replication.copy.source_watch import SourceWatch
from mirror_lib.replication.copy.writer import CopyResult, TargetWriter
from mirror_lib.replication.events import QueryRestart
from mirror_lib.replication.planning.plan_changes import PlanChanges
from mirror_lib.replication.planning.slot_tasks import SharedTaskGate
from mirror_lib.replication.planning.stall import idle_slice_text

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["CopyResult", "SliceCopy", "copy_slice"]

#: How long the loop waits for a first record when nothing else is due. The first record ends
#: the wait, so this sets only how often a quiet task looks around (twice a second). A second
#: reader (a fan-out target at another position) is looked at after the first without waiting,
#: so with two its records would wait the first one's whole wait: they wait FANOUT_POLL_S.
IDLE_POLL_S = 0.5
FANOUT_POLL_S = 0.1
PENDING_POLL_S = 0.01  # a commit waits for acknowledgements: look again soon
DISCOVERY_SECONDS = 60.0  # inside a slice, new topics/partitions are looked for at least this often


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while the copy loop runs.

    Every ``consume()`` allocates up to 10,000 message objects, and allocations trigger the
    collector, which then traversed them again and again: 0.49 of 5.35 CPU-s for a million
    records, measured with ``gc.callbacks`` (docs/how-it-works.md#a-cheap-per-record-path). The
    loop makes no reference cycles (reference counting frees each message), so nothing waits for
    the collector; whatever cycle appears meanwhile is collected once it runs again after the
    loop.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class SliceCopy:
    """One task's slice: create, then :meth:`run`."""

    def __init__(
        self,
        contexts: FlowContext | Sequence[FlowContext],
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
        targets: dict[str, list[TP]] | None = None,
        busy: Collection[str] | None = None,
        shared: Sequence[int] = (),
        slots: int = 0,
        query_restart: QueryRestart | None = None,
    ) -> None:
        self.contexts = [contexts] if isinstance(contexts, FlowContext) else list(contexts)
        self.ctx = ctx = self.contexts[0]
        self.slot, self.batch_id, self.query_id = slot, batch_id, query_id
        self.options_key, self.partitions = options_key, list(partitions)
        self.until, self.counts = until or {}, counts
        self.changes = PlanChanges(self.contexts, ids or {}, counts)
        self.duration_s = ctx.settings.batch_duration if duration_s is None else duration_s
        self.fanout = len(self.contexts) > 1
        self.assigned = targets  # fan-out: flow -> the partitions its target is written
        self.result = CopyResult(slot)
        self.targets = Targets(
            self.contexts, self.until, self.result, None if busy is None else set(busy)
        )
        self.end_early = False
        self.client_threads = ClientThreads(ctx.settings.client_threads_nice)
        self.shared, self.slots = list(shared), slots  # the slots that share this task
        self.query_restart = query_restart  # the outage the query was started again through
        # a shared task ends its slice once the flow got busy: the next runs a task a slot
        self.gate = (
            SharedTaskGate(ctx.settings.slots_shared_below, time.monotonic())
            if self.shared and not self.until
            else None
        )

    @property
    def writers(self) -> list[TargetWriter]:
        return self.targets.writers

    @property
    def readers(self) -> list[Reader]:
        return self.targets.readers

    # -- set-up ------------------------------------------------------------------------------
    def _writer_partitions(self, ctx: FlowContext) -> list[TP]:
        if self.assigned is not None:
            return list(self.assigned.get(ctx.flow.name, []))  # SlotWork made them tuples
        return [tp for tp in self.partitions if ctx.should_replicate(tp[0])]

    def _start(self) -> None:
        if testhooks.end_slice_early():
            self.end_early = True
            return
        if self.changes.ended_by_replaced():
            self.end_early = True
            return
        for ctx in self.contexts:
            parts = self._writer_partitions(ctx)
            if not parts:
                continue
            try:
                writer = TargetWriter(
                    ctx,
                    self.slot,
                    parts,
                    until=self.until,
                    options_key=self.options_key,
                    batch_id=self.batch_id,
                    query_id=self.query_id,
                    fanout=self.fanout,
                    topic_ids=self.changes.ids,
                    shared=self.shared,
                    slots=self.slots,
                    query_restart=self.query_restart,
                )
                self.writers.append(writer)
                writer.start()
            except TARGET_ERRORS as exc:
                self.targets.detach_or_raise(ctx.flow.name, exc)
        self.targets.group_readers()

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> CopyResult:
        try:
            self._start()
            with cyclic_gc_paused():
                self._loop(time.monotonic() + self.duration_s)
        except BaseException:
            # no abort_transaction here: it would wait on a target that may be down; the next
            # slice's init_transactions fences the producers and aborts what they left open
            for w in self.writers:
                w.in_txn = False
            raise
        finally:
            for w in self.writers:
                if w.in_txn:
                    w.abort()
            self._close()
        self.targets.raise_if_only_failed_left()
        for w in self.writers:
            self.result.add(w.result)
        if self.until and not self.result.records and self.writers and not self.end_early:
            positions = {tp: part.expect for w in self.writers for tp, part in w.parts.items()}
            log.warning("%s", idle_slice_text(self.slot, positions, self.until))
        return self.result

    def _close(self) -> None:
        for w in self.writers:
            w.close()
        for reader in self.readers:
            reader.close()

    def _guard(
        self, writer: TargetWriter, call: Callable[P, R], *args: P.args, **kwargs: P.kwargs
    ) -> R | None:
        """Run a writer's call; another producer in a remote partition switches the writer to
        exact reports (its transaction is aborted and its partitions read again), and a writer
        that replaced its producer is read for again from its ledger positions."""
        try:
            return call(*args, **kwargs)
        except Interleaved as exc:
            log.warning("another producer writes into %s: exact delivery reports now", exc)
            writer.abort()
            writer.exact = True
            self._reassign(writer)
        except Rewound:
            self._reassign(writer)
        except TARGET_ERRORS as exc:
            self.targets.detach_or_raise(writer.name, exc)
        return None

    def _reassign(self, writer: TargetWriter) -> None:
        """Read ``writer``'s partitions again from its positions (its reader's lowest)."""
        for reader in self.readers:
            if writer in reader.writers:
                reader.assign()

    def _loop(self, deadline: float) -> None:
        refresh = min(self.ctx.settings.refresh_topics_interval, DISCOVERY_SECONDS)
        next_refresh = time.monotonic() + refresh
        watch = SourceWatch(self.ctx, self.until)
        behind = False
        while self.readers and not self._all_done():
            now = time.monotonic()
            if now >= deadline:
                break
            timeout = 0.0 if behind else self._poll_timeout(now)
            behind = False
            heard: list[Record] = []
            taken = 0
            for i, reader in enumerate(list(self.readers)):
                if reader not in self.readers:  # its last writer left the slice
                    continue
                if all(w.strategy.holding for w in reader.writers):
                    # nobody could take more records now: wait for acknowledgements instead
                    reader.writers[0].producer.poll(PENDING_POLL_S)
                    continue
                wait = min(timeout if i == 0 else 0.0, deadline - now)
                msgs = reader.take(max(wait, 0.0))
                if msgs:
                    watch.moved()
                    taken += len(msgs)
                    self._copy(reader, msgs)
                    heard += msgs[:1] + msgs[-1:]
                    behind = behind or len(msgs) >= CONSUME_BATCH
                    self.targets.drop_laggards(reader)
            watch.check_source(self.readers, heard)
            for w in list(self.writers):
                if w.commit_due(behind):
                    self._guard(w, self._commit, w, wait=not self.fanout, roll=True)
                elif not w.in_txn:
                    self._guard(w, w.tell_metrics)
            for reader in self.readers:
                reader.repace(time.monotonic())
            self.client_threads.lower(now)
            watch.check_stalled(self.readers)
            if self.end_early:
                break
            if self._shared_and_busy(taken, behind):
                break
            if self.counts is not None and time.monotonic() >= next_refresh:
                next_refresh = time.monotonic() + refresh
                changes = self.changes
                if changes.new_partitions(self.readers[0].consumer) or changes.ended_by_replaced(
                    wait=False
                ):
                    break  # end the slice early: the planner sets them up
        testhooks.delay_closing()
        for w in list(self.writers):
            w.metrics.closing = True
            self._guard(w, self._commit, w, wait=True)
            if w in self.writers:  # not if its target left the slice at that commit
                self._guard(w, w.tell_metrics)
        for w in list(self.writers):
            self._guard(w, w.refresh_ledger)
        for w in list(self.writers):
            self._guard(w, w.settle_syncs)

    def _shared_and_busy(self, taken: int, behind: bool) -> bool:
        """A task of shared slots whose flow got busy ends its slice: the next runs a task a
        slot (:class:`SharedTaskGate`)."""
        if self.gate is None or not self.gate.busy(time.monotonic(), taken, behind):
            return False
        log.info(
            "%s: slots %s share a task and the flow got busy: ending the slice, the next runs a "
            "task a slot", self.ctx.label, [self.slot, *self.shared],
        )  # fmt: skip
        return True

    def _poll_timeout(self, now: float) -> float:
        waits = [IDLE_POLL_S if len(self.readers) == 1 else FANOUT_POLL_S]
        for w in self.writers:
            if w.strategy.holding or w.strategy.sealed:
                waits.append(PENDING_POLL_S)
            elif w.in_txn:
                waits.append(max(w.txn_start + w.timing.interval - now, 0.0))
        return min(waits)

    def _commit(self, writer: TargetWriter, *, wait: bool, roll: bool = False) -> None:
        reader = next((r for r in self.readers if writer in r.writers), self.readers[0])
        writer.commit(
            lambda tp: reader.consumer.get_watermark_offsets(tp, cached=True), wait=wait, roll=roll
        )

    def _all_done(self) -> bool:
        return bool(self.until) and all(w.done() for w in self.writers)

    def _copy(self, reader: Reader, msgs: list[Record]) -> None:
        groups: dict[TP, list[Record]] = {}
        notices = []
        for msg in msgs:
            if msg.error() is not None:
                notices.append(msg)
            else:
                groups.setdefault((msg.topic(), msg.partition()), []).append(msg)
        consumed_ms = time.time() * 1000.0
        for tp, group in groups.items():
            finished = False
            for w in list(reader.writers):
                finished = bool(self._guard(w, w.accept, tp, group, consumed_ms)) or finished
            if finished:
                reader.maybe_pause(tp)
        for msg in notices:  # after the records: an end-of-partition follows its records
            self._event(reader, msg)

    def _event(self, reader: Reader, msg: Record) -> None:
        err = msg.error()
        assert err is not None  # _copy hands only the consumer's events here
        code = err.code()
        tp = (msg.topic(), msg.partition())
        if code == KafkaError._PARTITION_EOF:
            for w in reader.writers:
                part = w.parts.get(tp)
                if part is not None and not part.done:
                    w.move(tp, min(msg.offset(), part.until))
                    if part.expect >= part.until:
                        w.finish(tp, part.until)
            reader.maybe_pause(tp)
            return
        # an error of the consumer itself (its group, its login) names no partition
        where = f"{msg.topic()}[{msg.partition()}]" if msg.topic() else "records"
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            # deleted (retention, DeleteRecords) or truncated: the planner records the gap
            # event and applies mirror.on.gap between slices, as for a gap found at planning
            positions = [w.parts[tp].expect for w in reader.writers if tp in w.parts]
            log.warning(
                "%s: the records from offset %s are no longer on %s (%s): ending the slice",
                where, min(positions) if positions else "?", self.ctx.where("source"), err.str(),
            )  # fmt: skip
            self.end_early = True
            return
        if err.name() in AUTH_ERRORS:  # as MM2's task: credentials or ACLs, not an outage
            raise BrokerError(
                f"consuming {where} from {self.ctx.where('source')} with consumer group "
                f"{self.ctx.reader_group} failed: {err.str()}",
                transient=False,
            )
        if code in TOPIC_GONE_CODES:  # deleted (maybe re-created): the planner decides
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


def copy_slice(
    contexts: FlowContext | Sequence[FlowContext],
    options_key: str,
    slot: int,
    partitions: Sequence[TP],
    **kwargs: Any,
) -> CopyResult:
    """Copy ``partitions`` for ``slot`` for one slice to the target of each flow of
    ``contexts`` (see :class:`SliceCopy` for ``kwargs``)."""
    return SliceCopy(contexts, options_key, slot, partitions, **kwargs).run()
