"""How many copy tasks a slice's slots run in (docs/design.md#d2-slices): slots that share a task.

``tasks.max`` slots own the partitions and the delivery ledger's groups, always. A slice runs
them in ``tasks.max`` copy tasks, one a slot, while the flow is busy, and in one task while it
copies fewer records a second than ``mirror.slots.shared.below.records.per.second`` with no
backlog: one Python worker, one transactional producer and one transaction a commit instead of
one each a slot, which at a low rate are most of the copy's CPU and of its tail. The shared
task writes the ledger group of each partition's own slot, so nothing that reads the ledger
knows or cares how a slice ran.

:func:`task_count` is the planner's choice between slices; :class:`SharedTaskGate` ends a
shared task's slice early once the flow got busy, so that the next slice runs a task a slot.
"""

from __future__ import annotations

from dataclasses import dataclass

#: A backlog at planning above this many seconds of the shared rate runs a task a slot.
BACKLOG_S = 5.0
#: A shared task looks at its rate over windows this long.
GATE_S = 10.0
#: A previous slice shorter than this share of ``mirror.batch.duration.seconds`` ended early.
EARLY = 0.9


def task_count(
    slots: int,
    below: int,
    *,
    backlog: int,
    rate: float | None,
    ended_early: bool,
    once: bool,
) -> int:
    """The copy tasks of the next slice: 1 (every slot shares one task) or ``slots``.

    ``below``: the shared rate (records a second; 0 never shares); ``backlog``: records the
    source holds past the positions now; ``rate``: what the last slice copied a second (None:
    no last slice); ``ended_early``: the last slice shared a task and ended before its time
    (its gate found the flow busy, or new partitions). A ``--once`` run copies a backlog."""
    if slots <= 1 or below <= 0 or once:
        return slots
    busy = backlog > below * BACKLOG_S or (rate is not None and rate > below) or ended_early
    return slots if busy else 1


def task_slots(slots: int, tasks: int) -> list[list[int]]:
    """The slots of each of ``tasks`` copy tasks (slot ``s`` in task ``s % tasks``); the first
    slot of each is the task's own (its ``transactional.id``)."""
    return [[s for s in range(slots) if s % tasks == t] for t in range(min(tasks, slots))]


@dataclass
class SharedTaskGate:
    """Tells a shared task when the flow got busy: over a window of :data:`GATE_S`, it copied
    more than ``below`` records a second, or the source was ahead (full batches) most of the
    time. The slice then ends, and the planner runs the next one in a task a slot."""

    below: int
    started: float
    records: int = 0
    loops: int = 0
    behind: int = 0

    def busy(self, now: float, records: int, behind: bool) -> bool:
        """Count one pass of the copy loop (``records`` copied, ``behind`` the source); True
        once a window says the flow is busy."""
        self.records += records
        self.loops += 1
        self.behind += behind
        took = now - self.started
        if took < GATE_S:
            return False
        busy = self.records > self.below * took or self.behind * 2 > self.loops
        self.started, self.records, self.loops, self.behind = now, 0, 0, 0
        return busy
