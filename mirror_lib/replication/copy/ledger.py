"""The delivery ledger on the target (docs/design.md#d3-exactly-once): per remote partition, the
next upstream offset.

It is the committed offset of the slot's ledger group on ``(remote topic, partition)``, written
in the same transaction as the records, so after any crash it says exactly what was delivered.
Copy tasks read it (``read_committed``, so a pending transaction is waited for) to know where to
start; the planner and the runner read it without waiting (:class:`LedgerView`) to know where each
partition stands, and the planner writes start positions for partitions that have none yet.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.admin import admin_client, lookup_error
from mirror_lib.kafka.lookups import (
    list_topic_partitions,
    partition_bounds,
    partition_ends,
    wait_futures,
)
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.context import FlowContext, stable_slot
from mirror_lib.replication.copy.copy_state import NO_END, PartState

#: The group coordinator is elsewhere or not ready yet (a new cluster's first group, a leader that
#: moved), or the request met a broker that does not answer: the ledger read asks again.
_COORDINATOR_MOVING = frozenset({
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TIMED_OUT,
})  # fmt: skip
#: One attempt of a ledger read: a request sent to a broker cut off by the network waits its
#: socket timeout, and the next attempt may find another broker (three-broker fault matrix).
_ATTEMPT_S = 10.0


class Replicates(Protocol):
    """What :func:`flow_bounds` asks of a flow: a FlowContext, or a fan-out ReadGroup."""

    def should_replicate(self, topic: str) -> bool: ...


def flow_bounds(
    ctx: Replicates, admin: AdminClient, timeout_s: float = 30
) -> dict[TP, tuple[int, int]]:
    """(earliest, last stable offset) of every source partition the flow replicates, now: what the
    ledger is measured against (progress, lag). ``ctx``: a FlowContext, or a fan-out ReadGroup
    (the partitions any of its flows replicates, asked once)."""
    return partition_bounds(admin, _flow_partitions(ctx, admin, timeout_s), timeout_s)


def flow_ends(ctx: Replicates, admin: AdminClient, timeout_s: float = 30) -> dict[TP, int]:
    """The last stable offset of every source partition the flow replicates, now, in half the
    requests of :func:`flow_bounds`: what a lag needs."""
    return partition_ends(admin, _flow_partitions(ctx, admin, timeout_s), timeout_s)


def _flow_partitions(ctx: Replicates, admin: AdminClient, timeout_s: float) -> list[TP]:
    counts = list_topic_partitions(admin, timeout_s)
    return [(t, p) for t, n in counts.items() if ctx.should_replicate(t) for p in range(n)]


def ledger_consumer(
    ctx: FlowContext,
    slot: int,
    *,
    stable: bool = True,
    on_commit: Callable[[KafkaError | None, list[TopicPartition]], None] | None = None,
) -> Consumer:
    """A consumer of the slot's ledger group on the target that never joins the group.

    ``stable``: ``read_committed``, so reads of offsets of a pending transaction are refused
    until it ends (what a copy task needs); otherwise the last committed value is returned.
    ``on_commit``: told the outcome of each asynchronous commit (served by ``poll``).
    """
    conf: dict[str, Any] = {
        "group.id": ctx.ledger_group(slot),
        "enable.auto.commit": False,
        "isolation.level": "read_committed" if stable else "read_uncommitted",
    }
    if on_commit is not None:
        conf["on_commit"] = on_commit
    return Consumer(ctx.client("target", "consumer", **conf))


def read_ledger(
    consumer: Consumer,
    remote_partitions: Iterable[TP],
    timeout_s: float = 60,
    where: str = "",
    stamps: dict[TP, float] | None = None,
) -> dict[TP, int]:
    """Next upstream offset per remote partition that has a ledger entry; ``stamps`` gets the
    time (epoch ms) a copy task last wrote each entry (:func:`ledger_offsets`), where known.

    A partition answered with an error (e.g. UNSTABLE_OFFSET_COMMIT while a fenced transaction
    is still being aborted), or a coordinator that is not ready, is asked again; it is never
    taken as "nothing delivered", which would copy records twice. Still failing after
    ``timeout_s``: a transient BrokerError.
    """
    tps = [TopicPartition(t, p) for t, p in sorted(set(remote_partitions))]
    if not tps:
        return {}
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(deadline - time.monotonic(), 1.0)
        try:
            committed = consumer.committed(tps, timeout=min(left, _ATTEMPT_S))
        except KafkaException as exc:
            moving = exc.args and exc.args[0].code() in _COORDINATOR_MOVING
            if moving and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            where_ = f" on {where}" if where else ""
            raise lookup_error(f"reading the delivery ledger{where_} failed", exc) from exc
        failed = [tp for tp in committed if tp.error is not None]
        if not failed:
            found = [tp for tp in committed if tp.offset >= 0]
            if stamps is not None:
                for tp in found:
                    stamp = _stamp(tp.metadata)
                    if stamp is not None:
                        stamps[(tp.topic, tp.partition)] = stamp
            return {(tp.topic, tp.partition): tp.offset for tp in found}
        if time.monotonic() > deadline:
            raise BrokerError(
                f"the delivery ledger of {failed[0].topic}[{failed[0].partition}] did not "
                f"become readable in {timeout_s:.0f}s ({failed[0].error}); nothing was copied",
                transient=True,
            )
        time.sleep(0.2)


STAMP_PREFIX = "t="


def ledger_offsets(
    next_upstream: Mapping[TP, int], stamps: Mapping[TP, float] | None = None
) -> list[TopicPartition]:
    """TopicPartitions to commit for ``{(remote topic, partition): next upstream offset}``.

    ``stamps``: per remote partition, when its copy was last known complete (epoch ms): kept in
    the entry's metadata, so that the next copy task can tell how long records waited across a
    restart (:func:`read_ledger`)."""
    stamps = stamps or {}
    out: list[TopicPartition] = []
    for (t, p), off in sorted(next_upstream.items()):
        stamp = stamps.get((t, p))
        if stamp is None:
            out.append(TopicPartition(t, p, off))
        else:
            out.append(TopicPartition(t, p, off, f"{STAMP_PREFIX}{int(stamp)}"))
    return out


def _stamp(metadata: str | None) -> float | None:
    if not metadata or not metadata.startswith(STAMP_PREFIX):
        return None
    digits = metadata[len(STAMP_PREFIX) :]
    return float(digits) if digits.isdigit() else None


class LedgerView:
    """Driver-side reads and first writes of a flow's ledger, one consumer per slot group.

    Used between slices (planner) and while waiting for a catch-up (runner), never by copy
    tasks. A partition whose slot changed (``tasks.max`` changed) is found in the group of its
    former slot and carried over, so it does not start again.
    """

    def __init__(self, ctx: FlowContext) -> None:
        self.ctx = ctx
        self._consumers: dict[int, Consumer] = {}

    def _consumer(self, slot: int) -> Consumer:
        if slot not in self._consumers:
            self._consumers[slot] = ledger_consumer(self.ctx, slot, stable=False)
        return self._consumers[slot]

    def positions(
        self, partitions: Iterable[TP], timeout_s: float = 30, tasks: int | None = None
    ) -> dict[TP, int]:
        """Next upstream offset per upstream ``(topic, partition)`` that has a ledger entry, in
        the groups of the slots of ``tasks`` slots (default: ``tasks.max``)."""
        ctx = self.ctx
        tasks = tasks or ctx.settings.tasks
        by_slot: dict[int, list[TP]] = {}
        for topic, p in partitions:
            by_slot.setdefault(stable_slot(topic, p, tasks), []).append((topic, p))
        out: dict[TP, int] = {}
        for slot, tps in sorted(by_slot.items()):
            remote = {(ctx.remote_topic(t), p): (t, p) for t, p in tps}
            ledger = read_ledger(self._consumer(slot), remote, timeout_s, ctx.where("target"))
            for rtp, offset in ledger.items():
                out[remote[rtp]] = offset
        return out

    def carried_positions(
        self, partitions: list[TP], last_tasks: int | None
    ) -> tuple[dict[TP, int], dict[TP, int]]:
        """``(positions, carried)`` after ``tasks.max`` changed from ``last_tasks`` (the last
        slice's): a partition whose slot changed is read in its former slot's group, which the
        last slice wrote, never in its new slot's group, which may hold an entry from before an
        earlier change (4 -> 2 -> 4 slots). ``carried`` must be written into the new groups."""
        tasks = self.ctx.settings.tasks
        if not last_tasks or last_tasks == tasks:
            return self.positions(partitions), {}
        moved = {tp for tp in partitions if stable_slot(*tp, last_tasks) != stable_slot(*tp, tasks)}
        carried = self.positions(moved, tasks=last_tasks)
        stayed = self.positions([tp for tp in partitions if tp not in moved])
        return stayed | carried, carried

    def former_positions(self, partitions: Iterable[TP], timeout_s: float = 30) -> dict[TP, int]:
        """Entries of ``partitions`` in ledger groups of other slot counts (largest offset)."""

        ctx = self.ctx
        prefix = ctx.ledger_group(0)[:-1]
        admin = admin_client(ctx.client("target", "admin"))
        listed = wait_futures(
            {"groups": admin.list_consumer_groups(request_timeout=timeout_s)},
            f"listing consumer groups on {ctx.where('target')}",
            timeout_s + 5,
        )["groups"]
        slots = sorted(
            int(g.group_id[len(prefix) :])
            for g in listed.valid
            if g.group_id.startswith(prefix) and g.group_id[len(prefix) :].isdigit()
        )
        wanted = {(ctx.remote_topic(t), p): (t, p) for t, p in partitions}
        out: dict[TP, int] = {}
        for slot in slots:
            consumer = ledger_consumer(ctx, slot, stable=False)
            try:
                ledger = read_ledger(consumer, wanted, timeout_s, ctx.where("target"))
                for rtp, offset in ledger.items():
                    out[wanted[rtp]] = max(offset, out.get(wanted[rtp], -1))
            finally:
                consumer.close()
        return out

    def commit(self, starts: dict[TP, int]) -> None:
        """Write start positions of upstream partitions into their slots' ledger groups.

        Only for partitions no copy task is working on (the planner runs between slices).
        """
        ctx = self.ctx
        by_slot: dict[int, dict[TP, int]] = {}
        for (topic, p), offset in starts.items():
            slot = stable_slot(topic, p, ctx.settings.tasks)
            by_slot.setdefault(slot, {})[(ctx.remote_topic(topic), p)] = offset
        for slot, offsets in sorted(by_slot.items()):
            try:
                self._consumer(slot).commit(offsets=ledger_offsets(offsets), asynchronous=False)
            except KafkaException as exc:
                raise BrokerError(
                    f"writing start positions into the delivery ledger on {ctx.where('target')} "
                    "failed: "
                    f"{exc.args[0]}",
                    transient=True,
                ) from exc

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()


class TargetLedger:
    """A copy task's ledger on its target: where each partition continues when the slice
    starts, and the entries each commit of its writer
    (:class:`~mirror_lib.replication.copy.writer.TargetWriter`) writes.

    A task of slots that share it (docs/design.md#d2-slices) writes the group of each
    partition's own slot (``shared``: those other slots, of ``slots`` in the plan), so that the
    ledger reads the same whichever task copied a partition."""

    def __init__(
        self, ctx: FlowContext, slot: int, shared: Sequence[int] = (), slots: int = 0
    ) -> None:
        self.ctx, self.slot = ctx, slot
        self.shared, self.slots = tuple(shared), slots
        self.failed: list[KafkaError] = []  # asynchronous commits that failed
        self.consumers: dict[int, Consumer] = {}
        self._groups: dict[int, object] = {}  # their group metadata, asked once (0.5 ms a call)
        self._slot_of: dict[TP, int] = {}  # remote partition -> its slot (a shared task's)
        # the broker expires a ledger entry not written for offsets.retention.minutes (7 days by
        # default): each slice's first commit writes every partition's position, moved or not
        self.fresh = False
        # per remote partition, when its copy was last known complete (epoch ms; from the
        # ledger's entries, then the writer's commits): how long records waited (resumed)
        self.landed_ms: dict[TP, float] = {}
        # remote partitions whose last commit here, with the copy behind the source's head, left
        # records of theirs there: a backlog, whose records wait for the copy to come round to
        # them (no resumed event for that)
        self.left_behind: set[TP] = set()

    def _consumer(self, slot: int) -> Consumer:
        if slot not in self.consumers:
            self.consumers[slot] = ledger_consumer(self.ctx, slot, on_commit=self._committed)
        return self.consumers[slot]

    def slot_of(self, tp: TP) -> int:
        """The slot whose group holds upstream partition ``tp``'s entry."""
        return stable_slot(*tp, self.slots) if self.shared else self.slot

    def renew(self) -> list[Consumer]:
        """New consumers for the ledger groups (a new producer took over); the old ones are
        returned, for the caller to keep: their connections may be held."""
        old = list(self.consumers.values())
        self.consumers = {slot: ledger_consumer(self.ctx, slot, on_commit=self._committed)
                          for slot in self.consumers}  # fmt: skip
        self._groups = {}
        return old

    def close(self) -> None:
        for consumer in self.consumers.values():
            with contextlib.suppress(Exception):
                consumer.close()

    def positions(
        self, partitions: Iterable[TP], until: Mapping[TP, int], timeout_s: float
    ) -> dict[TP, PartState]:
        """Read the ledger: where each partition continues (the truth about what was
        delivered), as a partition state ending at its ``until`` end."""
        ctx = self.ctx
        remote = {(t, p): (ctx.remote_topic(t), p) for t, p in partitions}
        by_slot: dict[int, list[TP]] = {}
        for tp, rtp in remote.items():
            self._slot_of[rtp] = slot = self.slot_of(tp)
            by_slot.setdefault(slot, []).append(rtp)
        delivered: dict[TP, int] = {}
        for slot, rtps in sorted(by_slot.items()):
            delivered |= read_ledger(
                self._consumer(slot), rtps, timeout_s, ctx.where("target"), stamps=self.landed_ms
            )
        parts = {}
        for (t, p), (rt, _p) in remote.items():
            start = delivered.get((rt, p))
            if start is None:
                raise BrokerError(
                    f"no delivery ledger entry for {t}[{p}] in group "
                    f"{ctx.ledger_group(self._slot_of[(rt, p)])} on {ctx.where('target')}; "
                    "the planner writes one before a slice starts",
                    transient=True,
                )
            parts[(t, p)] = PartState(t, p, rt, start, until.get((t, p), NO_END))
        return parts

    def group(self, slot: int) -> object:
        """The metadata of ``slot``'s group, for ``send_offsets_to_transaction``."""
        if slot not in self._groups:  # assigned, never subscribed: it stays the same
            self._groups[slot] = self._consumer(slot).consumer_group_metadata()
        return self._groups[slot]

    def entries(
        self, moved: Mapping[TP, PartState], parts: Mapping[TP, PartState]
    ) -> dict[TP, int]:
        """The entries a transaction that moved ``moved`` writes: theirs, and once a slice every
        partition's of ``parts`` (so none expires)."""
        if self.fresh:
            return {(p.remote, p.partition): p.expect for p in moved.values()}
        ledger = {(p.remote, p.partition): p.committed for p in parts.values()}
        ledger.update({(p.remote, p.partition): p.expect for p in moved.values()})
        return ledger

    def stamps(self, ledger: Mapping[TP, int], moved: Mapping[TP, PartState]) -> dict[TP, float]:
        """Each entry's stamp (:func:`ledger_offsets`): now for the partitions this commit moves,
        the last one known for the others."""
        now = time.time() * 1000.0
        stamps = {rtp: self.landed_ms[rtp] for rtp in ledger if rtp in self.landed_ms}
        stamps.update({(part.remote, part.partition): now for part in moved.values()})
        return stamps

    def offsets(
        self, ledger: Mapping[TP, int], moved: Mapping[TP, PartState]
    ) -> dict[int, list[TopicPartition]]:
        """The stamped entries to commit (:func:`ledger_offsets`), per slot whose group holds
        them."""
        stamps = self.stamps(ledger, moved)
        by_slot: dict[int, dict[TP, int]] = {}
        for rtp, offset in ledger.items():
            by_slot.setdefault(self._slot_of.get(rtp, self.slot), {})[rtp] = offset
        return {slot: ledger_offsets(entries, stamps) for slot, entries in sorted(by_slot.items())}

    def commit(
        self,
        ledger: Mapping[TP, int],
        moved: Mapping[TP, PartState],
        *,
        asynchronous: bool = False,
    ) -> None:
        """Commit ``ledger``'s entries outside a transaction (at least once); a failure of an
        earlier asynchronous commit is raised first."""
        for consumer in self.consumers.values():
            consumer.poll(0)  # serves the outcomes of earlier asynchronous commits
        if self.failed:
            raise KafkaException(self.failed[0])
        for slot, offsets in self.offsets(ledger, moved).items():
            if asynchronous:
                self._consumer(slot).commit(offsets=offsets, asynchronous=True)
            else:
                self._consumer(slot).commit(offsets=offsets, asynchronous=False)

    def _committed(self, err: KafkaError | None, offsets: list[TopicPartition]) -> None:
        errors = [err] if err is not None else [tp.error for tp in offsets if tp.error]
        self.failed.extend(errors)
