"""How a target's transactions commit: one strategy per writer, chosen when it is made.

- :class:`ExactlyOnce` (``mirror.delivery = exactly_once``): the records, what goes with them and
  the ledger's entries commit in one Kafka transaction (docs/design.md#d3-exactly-once). A call
  that hangs, or that fails because its broker left the target's cluster, gets a new producer,
  which fences the old one (:meth:`ExactlyOnce.renew`).
- :class:`RollingAtLeastOnce`: once the target acknowledged a transaction's records, what goes
  with them is produced, then the ledger moves. In the copy loop the writer does not wait for
  that: the transaction is sealed and the next one copied while it lands
  (docs/how-it-works.md#at-least-once).
- :class:`HeldForFanout` (a fan-out group, either guarantee): a target never blocks the others. It
  commits only once its target acknowledged everything, holding what arrives meanwhile; the
  copier compares what each target has waiting and drops one that falls more than
  ``mirror.fanout.max.lag.records`` behind the others, or that acknowledges nothing for
  ``FLUSH_S``, from the shared read for the rest of the slice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn, Protocol

from confluent_kafka import Consumer, KafkaException, Producer

from mirror_lib.errors import BrokerError, HungCallError
from mirror_lib.kafka.admin import left_cluster
from mirror_lib.kafka.bounded import HangCause, bounded
from mirror_lib.mm2.formats import TP
from mirror_lib.replication import testhooks
from mirror_lib.replication.copy import txn_timing
from mirror_lib.replication.copy.copy_state import PartState, Rewound
from mirror_lib.replication.copy.landing import (
    FANOUT_INIT_S,
    FLUSH_S,
    CallTimes,
    Lander,
    Landing,
)
from mirror_lib.replication.copy.target_producer import (
    TROUBLE_LOOKUP_S,
    commit_error,
    make_producer,
)
from mirror_lib.replication.copy.txn_events import Watermarks

if TYPE_CHECKING:
    from mirror_lib.replication.copy.writer import TargetWriter

__all__ = [
    "FANOUT_INIT_S",
    "FLUSH_S",
    "CommitStrategy",
    "ExactlyOnce",
    "HeldForFanout",
    "RollingAtLeastOnce",
    "commit_strategy",
]

log = logging.getLogger(__name__)

#: send_offsets_to_transaction and commit_transaction take milliseconds (send_offsets p99 15 ms
#: at 5,000 records/s); one that has not returned after this long, and HANG_FACTOR times the
#: slowest such call lately (a machine too busy to answer in time is not a hang), is taken as
#: hung: the writer goes on with a new producer (renew). While a broker of the target has left
#: its cluster, this long is enough: librdkafka may be waiting for it as a coordinator
CALL_HANG_S = 3.0
#: producers a writer may replace in a slice (a rolling restart of three brokers moved the ledger
#: group's coordinator three times in one slice); past that the slice ends
MAX_RENEWALS = 8
#: A renewal's init_transactions waits at most what records wait for their acknowledgement: a
#: target whose coordinators cannot write (too few in-sync replicas) answers it
#: COORDINATOR_NOT_AVAILABLE until a replica returns, and the outage shows only once it fails
#: (with two brokers of three cut off, 70-91 s after the cut while it waited a slot's 60 s)
RENEW_INIT_S = FLUSH_S
_abandoned: list[Producer | Consumer] = []  # hung clients: never freed under the thread in them


class CommitStrategy(Protocol):
    """How a :class:`~mirror_lib.replication.copy.writer.TargetWriter` commits."""

    @property
    def holding(self) -> bool:
        """A commit waits for the target's acknowledgements and holds what arrives meanwhile."""
        ...

    @property
    def sealed(self) -> bool:
        """A sealed transaction is on its way: the next commit moves it on."""
        ...

    @property
    def held(self) -> bool:
        """Something arrived while a commit waited and is held."""
        ...

    @property
    def held_records(self) -> int:
        """Records held while a commit waits."""
        ...

    def hold(self, replay: Callable[[], object], records: int) -> None:
        """Keep ``replay`` (an accept or move of ``records``) until the waiting commit is done."""

    def commit(self, watermarks: Watermarks, *, wait: bool, roll: bool) -> bool:
        """Commit the open transaction; False when it is not done yet: ``wait`` is off and
        acknowledgements are still outstanding (the transaction stays open and is committed on
        a later call), or ``roll`` sealed it (it lands on a later call)."""
        ...

    def forget(self) -> None:
        """The open transaction was aborted or abandoned: nothing of it counts."""

    def drop(self) -> None:
        """The writer leaves the slice without waiting on the target."""


def commit_strategy(writer: TargetWriter) -> CommitStrategy:
    """The strategy for ``writer``'s delivery guarantee and group (see the module's text)."""
    alone: ExactlyOnce | RollingAtLeastOnce
    if writer.eos:
        alone = ExactlyOnce(writer)
    else:
        alone = RollingAtLeastOnce(writer, rolls=not writer.fanout)
    return HeldForFanout(writer, alone) if writer.fanout else alone


class ExactlyOnce(Lander):
    """Records, what goes with them and the ledger's entries in one transaction."""

    def __init__(self, writer: TargetWriter) -> None:
        super().__init__(writer)
        self.send_offsets = CallTimes()
        self.commits = CallTimes()
        self.renewals = 0  # producers replaced in this slice (renew)

    def commit(self, watermarks: Watermarks, *, wait: bool = True, roll: bool = False) -> bool:
        if self.w.in_txn:
            self.land(watermarks, wait)
        return True

    def transfer(
        self, moved: dict[TP, PartState], ledger: dict[TP, int], watermarks: Watermarks, wait: bool
    ) -> Landing:
        # the ledger's entries need no acknowledgement: they are sent while the records are
        # (flush), and the transaction still commits both or neither
        w = self.w
        where = w.ctx.where("target")
        topics = {part.remote for part in moved.values()}
        producer = w.producer
        batches = w.ledger.offsets(ledger, moved)  # one per ledger group (a shared task's)

        def send_offsets() -> None:
            testhooks.hang_send_offsets(topics)
            for slot, offsets in batches.items():
                producer.send_offsets_to_transaction(offsets, w.ledger.group(slot), 60)

        self._timed(
            send_offsets,
            self.send_offsets,
            f"the ledger's send_offsets_to_transaction on {where}",
            meanwhile=self.acknowledge if wait else None,
        )
        landing = self.prepare(moved, watermarks)
        testhooks.hold_before_commit(topics)
        self._timed(
            lambda: producer.commit_transaction(60), self.commits, f"commit_transaction on {where}"
        )
        return landing

    def _timed(
        self,
        call: Callable[[], None],
        times: CallTimes,
        what: str,
        meanwhile: Callable[[], object] | None = None,
    ) -> None:
        """``call`` under :func:`bounded`, hung past ``times.hang_s``, or past CALL_HANG_S
        while a broker of the target has left its cluster (:func:`left_cluster`); its time
        joins ``times``."""

        def run() -> None:
            started = time.monotonic()
            call()
            times.took(time.monotonic() - started)

        producer = self.w.producer
        bounded(
            run, 60, what, meanwhile=meanwhile, hang_s=times.hang_s(CALL_HANG_S),
            cause=HangCause(CALL_HANG_S, lambda: left_cluster(producer, TROUBLE_LOOKUP_S)),
        )  # fmt: skip

    def renew(self, cause: BrokerError) -> NoReturn:
        """Go on with a new producer after a call hung in the old one, or failed because the
        broker it was out to left the target's cluster (``cause``).

        The new producer's ``init_transactions`` on the same ``transactional.id`` fences the old
        one, and its coordinator aborts what the old one left open, or completes a commit it
        had already written; the ledger, read again (it waits for that), says where each
        partition continues, and so whether a commit whose call hung landed (then it counts as
        committed). The copier then reads those partitions again from there
        (:class:`Rewound`). Past :data:`MAX_RENEWALS` in a slice, ``cause`` ends the slice.
        """
        w = self.w
        if self.renewals >= MAX_RENEWALS:
            raise cause
        self.renewals += 1
        _abandoned.extend((w.producer, *w.ledger.renew()))  # its connections may be held too
        doubt = self._landing  # prepared: commit_transaction hung, it may have landed
        opened = w.in_txn or w.strategy.holding or w.strategy.sealed
        w.forget_open()
        started = time.monotonic()
        w.producer, w.txn_timeout_ms = make_producer(
            w.ctx, w.slot, remote_topics={part.remote for part in w.parts.values()},
            init_timeout_s=min(w.init_s, RENEW_INIT_S),
        )  # fmt: skip
        inited = time.monotonic()
        w.ledger.fresh = False
        w.start()
        if doubt is not None and self.landed(doubt):
            self.settle(doubt)
        elif opened:
            w.aborts_unreported += 1
        init_s, took = inited - started, time.monotonic() - started
        how = f"{took:.1f}s (init_transactions {init_s:.1f}s, the ledger {took - init_s:.1f}s)"
        # a broker killed leaves the metadata only once its controllers fenced it, which is
        # what the new producer waited for: the hang's cause, asked sooner, could not name it
        named = isinstance(cause, HungCallError) and cause.cause_named
        left = None if named else left_cluster(w.producer, TROUBLE_LOOKUP_S)
        told = f"{cause};" if left is None else f"{cause}; {left}, and"
        w.trouble = f"{told} a new producer took over in {how}"
        log.warning("%s: slot %d: %s and continues from the ledger", w.ctx.label, w.slot, w.trouble)
        raise Rewound(f"{w.name}: slot {w.slot} continues from its ledger")


@dataclass
class Rolled:
    """At least once, a sealed transaction the copy loop no longer waits for: its partitions'
    states (``sealed``), when it began, and the ledger entries it writes once it lands."""

    sealed: dict[TP, PartState]
    start: float
    ledger: dict[TP, int]
    landing: Landing | None = None


class RollingAtLeastOnce(Lander):
    """At least once: the records acknowledged, then what goes with them, then the ledger.

    ``rolls``: the copy loop's commits do not wait; a transaction's records are sealed and the
    next ones copied while they are acknowledged (:meth:`_roll`). Never in a fan-out group
    (which holds records while a target acknowledges), in exact mode (every report counts) or
    with a stale-data policy (its skips belong to one transaction).
    """

    def __init__(self, writer: TargetWriter, *, rolls: bool) -> None:
        super().__init__(writer)
        self.may_roll = rolls
        self.rolled: Rolled | None = None  # the sealed transaction (see _roll)

    @property
    def rolls(self) -> bool:
        """Whether the copy loop's commits roll now (exact mode can begin mid-slice)."""
        return self.may_roll and not (self.w.exact or self.w.skips.policy.enabled)

    @property
    def sealed(self) -> bool:
        return self.rolled is not None

    def forget(self) -> None:
        self.rolled = None

    def drop(self) -> None:
        self.rolled = None

    def commit(self, watermarks: Watermarks, *, wait: bool = True, roll: bool = False) -> bool:
        w = self.w
        if self.rolled is not None:
            if not self._roll(watermarks, block=not roll):
                return False
            if roll and self.rolls and not w.due():
                return True  # the open transaction is sealed when it is due, not at once
        if not w.in_txn:
            return True
        if roll and self.rolls:
            self._seal()
            return self._roll(watermarks, block=False)
        self.land(watermarks, wait)
        return True

    def transfer(
        self, moved: dict[TP, PartState], ledger: dict[TP, int], watermarks: Watermarks, wait: bool
    ) -> Landing:
        w = self.w
        if wait:
            self.acknowledge()
        landing = self.prepare(moved, watermarks)
        if w.producer.flush(60) > 0:
            raise BrokerError(
                f"metrics/offset syncs not acknowledged by {w.ctx.where('target')}",
                transient=True,
            )
        if landing.failed:  # the ledger never moves past syncs that were not written
            raise commit_error(landing.failed[0], landing.failed, w.ctx.where("target"))
        w.ledger.commit(ledger, moved)
        return landing

    def _seal(self) -> None:
        """Hand the open transaction to :meth:`_roll`: its partitions' states stay with it, and
        the records that arrive from now on go to their successors."""
        w = self.w
        sealed = {}
        for tp, part in w.parts.items():
            if part.expect != part.committed:
                sealed[tp] = part
                w.parts[tp] = part.successor()
        self.rolled = Rolled(sealed, w.txn_start, w.ledger.entries(sealed, w.parts))
        w.in_txn = False
        if txn_timing.enabled():
            w.commit_started_ms = txn_timing.now_ms()

    def _roll(self, watermarks: Watermarks, *, block: bool) -> bool:
        """Move a sealed transaction on without waiting (``block`` off): once its records are
        acknowledged, its metrics records and offset syncs go out; once those are, the ledger
        moves. True when it has landed."""
        w = self.w
        rolled = self.rolled
        assert rolled is not None
        w.producer.poll(0)
        if rolled.landing is None:
            if not self.acknowledged(
                lambda: all(p.pending <= 0 for p in rolled.sealed.values()),
                rolled.start,
                block,
                "records",
            ):
                return False
            rolled.landing = self.prepare(rolled.sealed, watermarks)
            w.producer.poll(0)
        landing = rolled.landing
        if not self.acknowledged(
            lambda: landing.remaining <= 0, rolled.start, block, "metrics records/offset syncs"
        ):
            return False
        if landing.failed:
            raise commit_error(landing.failed[0], landing.failed, w.ctx.where("target"))
        try:
            # in the loop the ledger is committed without waiting; the slice's last commit
            # waits, and a failure is raised at the next commit after it is known
            w.ledger.commit(rolled.ledger, rolled.sealed, asynchronous=not block)
        except KafkaException as exc:
            raise commit_error(exc.args[0], [], w.ctx.where("target")) from exc
        self.rolled = None
        self.complete(landing)
        return True


class HeldForFanout:
    """A fan-out target: its commits wait for nothing while the copy loop runs (``wait`` off).

    A commit whose records the target has not yet acknowledged stays pending, and what arrives
    for the target meanwhile is held (the bounded buffer); once they are, the transaction
    commits as ``alone`` commits it and what was held is copied, in order.
    """

    def __init__(self, writer: TargetWriter, alone: ExactlyOnce | RollingAtLeastOnce) -> None:
        self.w = writer
        self.alone = alone
        self.pending = False  # a commit waits for the target's acknowledgements
        self.backlog: list[Callable[[], object]] = []  # what arrived while a commit was pending
        self.backlog_records = 0

    @property
    def holding(self) -> bool:
        return self.pending

    @property
    def sealed(self) -> bool:
        return False

    @property
    def held(self) -> bool:
        return bool(self.backlog)

    @property
    def held_records(self) -> int:
        return self.backlog_records

    def hold(self, replay: Callable[[], object], records: int) -> None:
        """Keep ``replay`` until the pending commit is done (the copier bounds what is held)."""
        self.backlog.append(replay)
        self.backlog_records += records

    def forget(self) -> None:
        self.pending = False
        self.backlog, self.backlog_records = [], 0
        self.alone.forget()

    def drop(self) -> None:
        self.pending = False
        self.alone.drop()

    def commit(self, watermarks: Watermarks, *, wait: bool = True, roll: bool = False) -> bool:
        w = self.w
        if not w.in_txn:
            return True
        if not wait and self.alone.flush(0) > 0:
            self.pending = True
            if time.monotonic() - w.txn_start > FLUSH_S:
                raise self.alone.unacknowledged("records")
            return False
        self.pending = False
        self.alone.land(watermarks, wait)
        if self.backlog:
            self._replay()
            if wait and w.in_txn:
                return self.commit(watermarks, wait=True)
        return True

    def _replay(self) -> None:
        """After a pending commit: what arrived meanwhile, in order."""
        backlog, self.backlog, self.backlog_records = self.backlog, [], 0
        for replay in backlog:
            replay()
