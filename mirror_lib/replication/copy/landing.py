"""How a writer's transaction lands on its target, whatever its commit strategy
(:mod:`mirror_lib.replication.copy.commit_strategies`).

Its records are acknowledged (a late acknowledgement is explained from the target's metadata, and
one stuck on a lost connection gets the producer renewed); what it carries besides the records
(:mod:`mirror_lib.replication.copy.txn_events`) is produced; the strategy commits it; then every
partition's committed position moves, and the offset syncs kept on the source go out.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from mirror_lib.errors import BrokerError, HungCallError
from mirror_lib.kafka.admin import min_insync
from mirror_lib.mm2.formats import TP, OffsetSync
from mirror_lib.replication import events
from mirror_lib.replication.context import PlainProducer
from mirror_lib.replication.copy import txn_timing
from mirror_lib.replication.copy.copy_state import PartState
from mirror_lib.replication.copy.metrics_window import PartMetrics, batch_events, merged
from mirror_lib.replication.copy.target_producer import (
    LOOKUP_S,
    Trouble,
    commit_error,
    target_trouble,
)
from mirror_lib.replication.copy.txn_events import (
    UsualWait,
    Watermarks,
    resumed_events,
    segments_events,
    skip_events,
    sync_records,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mirror_lib.replication.copy.writer import TargetWriter

log = logging.getLogger(__name__)

FLUSH_S = 30.0  # a target that acknowledges nothing this long fails (transient)
FANOUT_INIT_S = 15.0  # in a fan-out group a target's set-up may not hold the others longer
#: how late acknowledgements may be before the writer looks at the target for a cause; and,
#: once that shows nothing wrong, before they count as stuck (see :meth:`Lander.acknowledge`)
SLOW_ACK_S = 2.0
#: acknowledgements this late (and HANG_FACTOR times the slowest lately) while the target's
#: metadata shows every partition led and in sync: the requests are held on a connection to a
#: broker that went away (a partitioned network holds them until socket.timeout.ms, 30 s), and
#: the writer renews its producer instead of waiting for that
STUCK_ACK_S = 10.0
#: how often the writer looks at the target again while acknowledgements are late
RELOOK_S = 1.0
#: once the target's metadata shows a broker of the written partitions gone from the cluster
#: (fenced) and them led and in sync on the others, acknowledgements missing this much longer
#: are held on a connection to that broker: the writer renews its producer without waiting for
#: STUCK_ACK_S (what was merely waiting for the gone broker as a follower is acknowledged
#: as soon as the controllers take it out of the in-sync replicas)
MOVED_GRACE_S = 1.0
#: a call is hung only past this many times the slowest that returned lately (a machine too busy
#: to answer in time is not a hang)
HANG_FACTOR = 5.0


@dataclass
class CallTimes:
    """How long a call (or the wait for acknowledgements) took lately: the slowest, decaying
    with each one, so that a machine too busy to answer in time is not taken for a hang."""

    slowest_s: float = 0.0

    def took(self, seconds: float) -> None:
        self.slowest_s = max(seconds, self.slowest_s * 0.9)

    def hang_s(self, floor_s: float) -> float:
        """Past this it counts as hung: ``floor_s``, or HANG_FACTOR times the slowest."""
        return max(floor_s, HANG_FACTOR * self.slowest_s)


@dataclass
class Landing:
    """A transaction whose records were acknowledged, on its way to commit: what it moved and
    what it wrote besides the records."""

    moved: dict[TP, PartState]
    syncs: list[OffsetSync]
    twice: dict[TP, int]
    wrote: bool  # metrics records or offset syncs on the target
    failed: list[KafkaError] = field(default_factory=list)  # their deliveries that failed
    remaining: int = 0  # their delivery reports not yet served
    acked_ms: float = 0.0  # when the records were acknowledged (epoch ms)
    metrics: dict[TP, PartMetrics] = field(default_factory=dict)  # what its records add
    told: bool = False  # it carries the writer's metrics window (batch events)

    def delivered(self, err: KafkaError | None, _msg: Message) -> None:
        self.remaining -= 1
        if err is not None:
            self.failed.append(err)


class Lander:
    """What every commit strategy shares: waiting for the target's acknowledgements, producing
    what a transaction carries besides its records, and moving the positions once it committed.
    A strategy says how the transaction is committed (:meth:`transfer`)."""

    def __init__(self, writer: TargetWriter) -> None:
        self.w = writer
        self.acks = CallTimes()  # how long a commit's records took to be acknowledged lately
        self.waits = UsualWait()  # how long the slot's records usually wait to be copied
        self._min_isr: dict[str, int] | None = None  # of the remote topics, asked once a slice
        self._landing: Landing | None = None  # the one land() prepared, once it did
        #: when the last commit completed (epoch ms): from then on the task was free to read
        self.free_ms: float | None = None

    # -- what a strategy that holds or seals nothing says ----------------------------------------
    @property
    def holding(self) -> bool:
        """A commit waits for the target's acknowledgements and holds what arrives meanwhile."""
        return False

    @property
    def sealed(self) -> bool:
        """A sealed transaction is on its way: the next commit moves it on."""
        return False

    @property
    def held(self) -> bool:
        """Something arrived while a commit waited and is held."""
        return False

    @property
    def held_records(self) -> int:
        return 0

    def hold(self, replay: Callable[[], object], records: int) -> None:
        raise AssertionError("only a fan-out target holds records")  # holding is never true

    def forget(self) -> None:
        """The open transaction was aborted or abandoned: nothing of it counts."""

    def drop(self) -> None:
        """The writer leaves the slice without waiting on the target."""

    # -- a commit ------------------------------------------------------------------------------
    def land(self, watermarks: Watermarks, wait: bool) -> None:
        """Commit the open transaction (:meth:`transfer`) and move the positions it moved."""
        w = self.w
        moved = {tp: part for tp, part in w.parts.items() if part.expect != part.committed}
        ledger = w.ledger.entries(moved, w.parts)
        self._landing = None
        if txn_timing.enabled():
            w.commit_started_ms = txn_timing.now_ms()
        try:
            landing = self.transfer(moved, ledger, watermarks, wait)
        except KafkaException as exc:
            err, where = exc.args[0], w.ctx.where("target")
            error = w.timed_out(err) or commit_error(err, self._failed(), where)
            if err.code() == KafkaError._DESTROY_BROKER and not err.fatal():
                self.renew(error)  # a call was out to a broker that left: a coordinator moved
            raise error from exc
        except HungCallError as exc:
            self.renew(exc)
        w.in_txn = False
        self.complete(landing)

    def _failed(self) -> list[KafkaError]:
        """The failed deliveries of what the commit that failed produced besides its records."""
        return self._landing.failed if self._landing is not None else []

    def transfer(
        self, moved: dict[TP, PartState], ledger: dict[TP, int], watermarks: Watermarks, wait: bool
    ) -> Landing:
        """Commit the records of ``moved``, what goes with them (:meth:`prepare`, which it
        calls) and the ``ledger`` entries."""
        raise NotImplementedError

    def renew(self, cause: BrokerError) -> NoReturn:
        """A call hung, or failed as its broker left the target's cluster: without a producer
        to replace, ``cause`` ends the slice."""
        raise cause

    def prepare(self, moved: dict[TP, PartState], watermarks: Watermarks) -> Landing:
        """After ``moved``'s records were acknowledged: their segments, and what goes with them
        (metrics records, offset syncs on the target), produced."""
        w = self.w
        ctx = w.ctx
        acked_ms = time.time() * 1000.0
        for part in moved.values():
            if part.error is not None:
                err, _ = part.error
                first = part.runs[0][0] if part.runs else part.committed
                w.fail_record(err, part, first)
        segments = {tp: part.segments(w.exact) for tp, part in moved.items() if part.n}
        twice = {} if w.eos else {tp: n for tp, p in moved.items() if (n := p.unreported())}
        staged = {
            tp: PartMetrics.of(moved[tp], segs, acked_ms, _lag(moved[tp], watermarks))
            for tp, segs in segments.items()
        }
        told = w.metrics.tells(staged, time.monotonic()) and bool(staged or w.metrics.parts)
        evs = segments_events(w, moved, segments) + skip_events(w)
        if told:
            evs += batch_events(w, merged(w.metrics.parts, staged))
        evs += resumed_events(w, moved, acked_ms, self.waits, self.free_ms)
        out = [(ctx.metrics_topic, *events.encode(e)) for e in evs]
        syncs = sync_records(ctx.settings, segments)
        if ctx.offset_syncs_on_target:
            out += [(ctx.offset_syncs_topic, s.key(), s.value()) for s in syncs]
        if w.source_syncs is not None:
            w.source_syncs.check()  # the syncs of earlier commits went out: commit this one
        landing = Landing(
            moved, syncs, twice, bool(out), remaining=len(out), acked_ms=acked_ms,
            metrics=staged, told=told,
        )  # fmt: skip
        self._landing = landing
        for topic, k, v in out:
            w.producer.produce(topic, v, k, partition=0, on_delivery=landing.delivered)
        return landing

    def complete(self, landing: Landing) -> None:
        """The transaction of ``landing`` committed: move every partition's committed position."""
        w = self.w
        w.ledger.fresh = True
        self.settle(landing)
        w.fresh_start = False
        w.trouble = None
        for tp, part in landing.moved.items():
            remote = (part.remote, part.partition)
            w.ledger.landed_ms[remote] = landing.acked_ms
            told = landing.metrics.get(tp)
            if w.behind and told is not None and told.lag:  # behind: the loop took full batches
                w.ledger.left_behind.add(remote)
            else:
                w.ledger.left_behind.discard(remote)
            part.committed = part.expect
            part.committed_downstream()
            part.reset()
            live = w.parts.get(tp)
            if live is not None and live is not part:  # it rolled on: its successor's base
                live.committed, live.d_next = part.committed, part.d_next
        self.free_ms = time.time() * 1000.0
        w.skips.commit()

    def landed(self, landing: Landing) -> bool:
        """Whether the ledger, read again (:meth:`TargetWriter.start`), shows every partition of
        ``landing`` where its commit left it: a commit whose call hung did land."""
        parts = self.w.parts
        return bool(landing.moved) and all(
            tp in parts and parts[tp].committed == part.expect for tp, part in landing.moved.items()
        )

    def settle(self, landing: Landing) -> None:
        """What a committed ``landing`` counts for besides the positions: the metrics window,
        the offset syncs kept on the source, the slice's counts."""
        w = self.w
        ctx = w.ctx
        if landing.told:
            w.aborts_unreported = 0
        w.metrics.settle(landing.metrics, landing.told, time.monotonic())
        if landing.syncs and not ctx.offset_syncs_on_target:
            if w.source_syncs is None:
                w.source_syncs = PlainProducer(ctx, "source")
            w.source_syncs.write(
                ctx.offset_syncs_topic, [(x.key(), x.value()) for x in landing.syncs]
            )
        if landing.moved or landing.wrote:  # not a ledger refresh alone
            w.result.transactions += 1
        if landing.twice:
            self._tell_unreported(landing.twice)
        if landing.moved and txn_timing.enabled():
            txn_timing.write(
                w.slot, w.commit_started_ms, landing.acked_ms, list(landing.moved.values())
            )
        for part in landing.moved.values():
            w.result.records += part.n
            w.result.bytes += part.bytes

    def _tell_unreported(self, twice: dict[TP, int]) -> None:
        """Without transactions, records a retry wrote twice stay on the target: count them."""
        w = self.w
        w.result.unreported += sum(twice.values())
        where = ", ".join(f"{w.parts[tp].remote}[{tp[1]}]: {n}" for tp, n in twice.items())
        log.warning(
            "%s: %d record(s) on %s between the ones this commit copied were not acknowledged "
            "to it (%s): the first copy of a produce request retried after its acknowledgement "
            "was lost (without idempotence it is written twice), or another producer's records; "
            "offsets are mapped around them",
            w.ctx.label, sum(twice.values()), w.ctx.where("target"), where,
        )  # fmt: skip

    # -- acknowledgements ----------------------------------------------------------------------
    def acknowledge(self) -> None:
        """Wait until the target acknowledged the transaction's records; if that takes longer
        than SLOW_ACK_S, look at the target for why (:func:`target_trouble`), and again every
        RELOOK_S. While it shows nothing that refuses the writes, acknowledgements still missing
        once it has shown for MOVED_GRACE_S that a broker of the partitions left the cluster
        (:attr:`Trouble.moved`), or after STUCK_ACK_S in any case, are stuck on a lost
        connection: :class:`HungCallError` (the commit renews the producer)."""
        w = self.w
        started, limit = time.monotonic(), self.flush_limit()
        if self.flush(min(SLOW_ACK_S, limit)) == 0:
            self._acked(started)
            return
        stuck = self.acks.hang_s(STUCK_ACK_S)
        moved_since: float | None = None
        trouble = self._look(None)
        # a broker that does not answer while the rest show every partition led and in sync
        # (one broker of three cut off): its requests wait for socket.timeout.ms, a new producer
        # sends them to the partitions' new leaders once the controllers fenced it
        while w.eos and not (trouble is not None and trouble.refuses):
            now = time.monotonic()
            moved_since = (moved_since or now) if trouble is not None and trouble.moved else None
            within = stuck if stuck < limit else None
            where, waiting = w.ctx.where("target"), len(w.producer)
            hung = hung_error(where, waiting, trouble, started, within, moved_since)
            if hung is not None:
                raise hung
            if now >= started + limit:
                break
            ends = [started + min(stuck, limit), now + RELOOK_S]
            if moved_since is not None:
                ends.append(moved_since + MOVED_GRACE_S)
            if self.flush(max(min(ends) - now, 0.0)) == 0:
                self._acked(started, looked=True)
                return
            trouble = self._look(trouble)
        if self.flush(max(started + limit - time.monotonic(), 0.0)) > 0:
            # what the target shows now: fencing a lost broker shrinks the in-sync replicas only
            # once its session ends, seconds after the first look
            if self._look(trouble) is None:
                w.trouble = None
            raise self.unacknowledged("records")
        self._acked(started, looked=True)

    def _acked(self, started: float, looked: bool = False) -> None:
        """The records, waited for since ``started``, were acknowledged. When late enough to be
        ``looked`` for and no look showed a cause, look once more: a lost leader shows in the
        metadata only once its controllers fenced it, which is what let them be acknowledged."""
        self.acks.took(time.monotonic() - started)
        if looked and self.w.trouble is None:
            self._look(None)

    def _look(self, before: Trouble | None) -> Trouble | None:
        """What the target's metadata shows about the writes now (kept as the writer's trouble
        when it shows something); ``before``: the last look's."""
        w = self.w
        if self._min_isr is None:
            target = w.ctx.admin_ops("target", timeout_s=LOOKUP_S)
            self._min_isr = min_insync(target, sorted({t for t, _p in self._written()}))
        silent = before.silent if before is not None else ()
        trouble = target_trouble(w.ctx, w.producer, self._written(), self._min_isr, silent)
        w.trouble = str(trouble) if trouble is not None else w.trouble
        return trouble

    def _written(self) -> list[TP]:
        """The remote partitions this writer's transactions write: its own and those of the
        internal topics that go with them."""
        out = [(part.remote, part.partition) for part in self.w.parts.values()]
        return [*out, (self.w.ctx.metrics_topic, 0)]

    def acknowledged(self, done: Callable[[], bool], start: float, block: bool, what: str) -> bool:
        """Whether ``done`` says the target acknowledged ``what``: at once, or (``block``)
        after a flush. Nothing for ``FLUSH_S`` since ``start`` fails the slice (transient)."""
        if done():
            return True
        if block:
            self.flush(FLUSH_S)
        if done():
            return True
        if block or time.monotonic() - start > FLUSH_S:
            raise self.unacknowledged(what)
        return False

    def unacknowledged(self, what: str) -> BrokerError:
        cause = f": {self.w.trouble}" if self.w.trouble else ""
        return BrokerError(
            f"{self.w.ctx.where('target')} did not acknowledge {what} in {FLUSH_S:.0f}s{cause}",
            transient=True,
        )

    def flush(self, timeout_s: float) -> int:
        """``producer.flush``, which raises a fatal producer error (fenced) as it is."""
        w = self.w
        try:
            return w.producer.flush(timeout_s)
        except KafkaException as exc:
            err = exc.args[0]
            raise w.timed_out(err) or commit_error(err, [], w.ctx.where("target")) from exc

    def flush_limit(self) -> float:
        """How long a waiting commit may wait for acknowledgements (in a fan-out group, what is
        left of ``FLUSH_S`` since the transaction began)."""
        if not self.w.fanout:
            return FLUSH_S
        return max(FLUSH_S - (time.monotonic() - self.w.txn_start), 1.0)


def hung_error(
    where: str,
    waiting: int,
    trouble: Trouble | None,
    started: float,
    stuck: float | None,
    moved_since: float | None,
) -> HungCallError | None:
    """The ``waiting`` records still unacknowledged by the target ``where``, taken as held on
    a lost connection (:meth:`Lander.acknowledge`): MOVED_GRACE_S after the target showed a
    broker of the partitions gone (``moved_since``), or ``stuck`` seconds after ``started``;
    None until then."""
    now = time.monotonic()
    if moved_since is not None and now - moved_since >= MOVED_GRACE_S:
        return HungCallError(
            f"{where} acknowledged none of {waiting} records for {now - started:.0f}s; its "
            f"metadata shows {trouble}, and every partition led and in sync on the others: "
            "they are held on a connection to the broker that left",
            cause_named=True,
        )
    if stuck is not None and now >= started + stuck:
        silent = ""
        if trouble is not None and trouble.silent:
            silent = f" ({', '.join(trouble.silent)} did not answer)"
        return HungCallError(
            f"{where} acknowledged none of {waiting} records for {stuck:.0f}s although its "
            f"metadata shows every partition led and in sync{silent}: they are held on a "
            "connection to a broker that went away"
        )
    return None


def _lag(part: PartState, watermarks: Watermarks) -> int | None:
    """How far the source's high watermark is past the partition's next offset (None: unknown)."""
    _low, high = watermarks(TopicPartition(part.topic, part.partition))
    return max(high - part.expect, 0) if high >= 0 else None
