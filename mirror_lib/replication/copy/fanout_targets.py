"""Which targets of a fan-out group copy in a slice: the :class:`Targets` a
:class:`~mirror_lib.replication.copy.copier.SliceCopy` has.

One target never stops the others: a target that fails, falls more than
``mirror.fanout.max.lag.records`` behind or stops acknowledging leaves the slice (its open
transaction is aborted by the next slice's ``init_transactions``); a target that starts a slice
that far behind the others gets its own consumer and catches up on its own, and rejoins the
shared read in a later slice. A target that fails for good (a record too large for it, refused
credentials) leaves the slice too, as MM2 fails only that flow's task; it is tried again at each
slice, and a ``--once`` slot raises its error once the other targets are done in every slot.
Only when every target failed does the slice fail.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import KafkaException

from mirror_lib.errors import BrokerError, RecordTooLargeError
from mirror_lib.mm2.formats import TP
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.source_reader import Reader
from mirror_lib.replication.copy.writer import CopyResult, TargetWriter

log = logging.getLogger(__name__)

#: What a target's writer raises for its own target: in a fan-out group it leaves only that target
#: out (a fenced producer, a fatal KafkaException, still stops the slot).
TARGET_ERRORS = (BrokerError, KafkaException, RecordTooLargeError)


def behind_error(w: TargetWriter, lead: int) -> BrokerError | None:
    """Why target ``w`` must leave the shared read: more than its ``max_lag`` records waiting
    beyond ``lead``, what the target furthest ahead has waiting (None: it may stay)."""
    behind = w.waiting() - lead
    if behind <= w.max_lag:
        return None
    return BrokerError(
        f"{w.ctx.where('target')} is {behind} records behind the other targets of the read "
        f"(held or unacknowledged), more than {w.name}.mirror.fanout.max.lag.records = "
        f"{w.max_lag}: it leaves the shared read for this slice and catches up on its own",
        transient=True,
    )


class Targets:
    """The targets a slot's slice copies to (their writers) and the readers that feed them.

    ``result`` is the slice's: it tells which targets left the shared read (``detached``);
    ``busy`` (``--once``): the flows with work left in any slot at planning.
    """

    def __init__(
        self,
        contexts: Sequence[FlowContext],
        until: dict[TP, int],
        result: CopyResult,
        busy: set[str] | None = None,
    ) -> None:
        self.contexts = list(contexts)
        self.fanout = len(self.contexts) > 1
        self.until = until
        self.result = result
        self.busy = busy
        self.writers: list[TargetWriter] = []
        self.readers: list[Reader] = []
        self.failed: dict[str, BaseException] = {}  # targets that failed terminally in this slice

    @property
    def ctx(self) -> FlowContext:
        """The leading flow: the source side and names."""
        return self.contexts[0]

    def group_readers(self) -> None:
        """One shared reader; a writer that starts further behind the leading writer than its
        ``mirror.fanout.max.lag.records`` gets a reader of its own for this slice."""
        lead: dict[TP, int] = {}
        for w in self.writers:
            for tp, pos in w.open_positions().items():
                lead[tp] = max(pos, lead.get(tp, pos))
        shared: list[TargetWriter] = []
        alone: list[TargetWriter] = []
        for w in self.writers:
            behind = sum(lead[tp] - pos for tp, pos in w.open_positions().items())
            (alone if self.fanout and behind > w.max_lag else shared).append(w)
        self.readers = [
            Reader(self.ctx, ws) for ws in ([shared] if shared else []) + [[w] for w in alone]
        ]
        for w in alone:
            log.warning("%s starts far behind the other targets: it reads on its own", w.name)
        for reader in self.readers:
            reader.assign()

    def detach_or_raise(self, flow: str, exc: BaseException) -> None:
        """In a fan-out group a target that fails leaves the slice and the others go on; else,
        or for a fenced producer, re-raise."""
        terminal = not (isinstance(exc, BrokerError) and exc.transient)
        if isinstance(exc, KafkaException):  # e.g. init_transactions timed out, or fenced
            if exc.args[0].fatal():
                raise exc
            terminal = False
        if not self.fanout:
            raise exc
        writer = next((w for w in self.writers if w.name == flow), None)
        if terminal:
            log.error("target of %s leaves this slice, the others go on: %s", flow, exc)
            self.failed.setdefault(flow, exc)
            events.left_out(next(c for c in self.contexts if c.flow.name == flow), exc)
        else:
            log.warning("target of %s leaves the shared read for this slice: %s", flow, exc)
        self.result.detached[flow] = str(exc)
        if writer is not None:
            writer.drop()
            self.writers.remove(writer)
            for reader in self.readers:
                if writer in reader.writers:
                    reader.writers.remove(writer)
            for reader in [r for r in self.readers if not r.writers]:
                reader.close()
                self.readers.remove(reader)
        if not self.writers:
            every = {c.flow.name for c in self.contexts}
            if len(self.failed) == len(self.result.detached) and set(self.failed) != every:
                return  # only targets that failed for good had work here: the slot just ends
            reasons = "; ".join(f"{flow}: {why}" for flow, why in self.result.detached.items())
            raise BrokerError(
                f"every target of {self.ctx.source}->{','.join(c.target for c in self.contexts)} "
                f"failed in this slice ({reasons})",
                transient=len(self.failed) < len(self.result.detached),
            ) from exc

    def raise_if_only_failed_left(self) -> None:
        """``--once``: raise a target's terminal failure when the targets that failed in this slot
        are the only ones the planner found work for, in any slot; it would fail again at every
        slice. While another target still had work somewhere, the slot just ends, so that it
        does not cut short that target's slice in another slot; the next slice raises.
        A slice planned without ``busy`` never raises here: the run's stall watch ends it."""
        if self.until and self.failed and self.busy is not None and self.busy <= set(self.failed):
            raise next(iter(self.failed.values()))

    def drop_laggards(self, reader: Reader) -> None:
        """The bounded buffer: a target with more than its ``mirror.fanout.max.lag.records``
        waiting beyond the target furthest ahead leaves the shared read (never the last one).

        Only targets still reading count: one that reached its end (``--once``) waits for
        nothing, and against it every batch another target has in flight would be lag."""
        if len(reader.writers) < 2:  # a single target: no list of its parts on every consume
            return
        reading = [w for w in reader.writers if not w.done()]
        if len(reading) < 2:
            return
        lead = min(w.waiting() for w in reading)
        for w in reading:
            error = behind_error(w, lead)
            if error is not None and len(reader.writers) > 1:
                self.detach_or_raise(w.name, error)
