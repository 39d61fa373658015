"""Notice a ``--once`` run whose slices keep ending where they started.

Every slice of ``--once`` copies its partitions towards the end offsets of the run, so the
delivery ledger moves with each one. When slice after slice ends with a partition where it
started, something keeps the copy tasks from delivering without failing them (their warnings
say what): a target that does not keep its transactions' ledger entries, a topic id that never
matches, a fan-out target left out of every slice. Without this check such a run plans slices
forever and says nothing; with it, the run fails after ``mirror.outage.max.seconds`` and names
the partitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mirror_lib.mm2.formats import TP

MIN_SLICES = 3  # a long slice that ended early once or twice is not a stall


@dataclass
class Stall:
    """A partition that stayed at ``position`` (of ``end``) for ``slices`` slices and
    ``seconds``."""

    tp: TP
    position: int
    end: int
    slices: int
    seconds: float

    def __str__(self) -> str:
        topic, p = self.tp
        return f"{topic}-{p} at {self.position} of {self.end}"


@dataclass
class StallWatch:
    """Per partition: where the last plans put it, since when and for how many slices.

    ``limit_s`` None never reports (a run without an outage limit).
    """

    limit_s: float | None
    min_slices: int = MIN_SLICES
    _seen: dict[TP, tuple[int, float, int]] = field(default_factory=dict)

    def observe(self, positions: dict[TP, int], ends: dict[TP, int], now: float) -> list[Stall]:
        """Record the next slice's start ``positions`` (partitions with work left only); return
        the partitions that have not moved for ``min_slices`` slices and ``limit_s`` seconds."""
        seen: dict[TP, tuple[int, float, int]] = {}
        for tp, pos in positions.items():
            old = self._seen.get(tp)
            seen[tp] = (pos, old[1], old[2] + 1) if old and old[0] == pos else (pos, now, 0)
        self._seen = seen
        if self.limit_s is None:
            return []
        return [
            Stall(tp, pos, ends.get(tp, pos), slices, now - since)
            for tp, (pos, since, slices) in sorted(seen.items())
            if slices >= self.min_slices and now - since >= self.limit_s
        ]


def stall_text(label: str, where_target: str, stalls: list[Stall]) -> str:
    """The error of a stalled ``--once`` run: what did not move, how long, and where to look."""
    longest = max(stalls, key=lambda s: s.seconds)
    shown = ", ".join(str(s) for s in stalls[:5]) + (" ..." if len(stalls) > 5 else "")
    return (
        f"{label}: --once made no progress for {longest.seconds:.0f}s over {longest.slices} "
        f"slices: {shown}; the delivery ledger on {where_target} did not move, so the copy "
        "tasks delivered nothing that counts (their warnings above say why); the wait is "
        "bounded by mirror.outage.max.seconds"
    )


def idle_slice_text(slot: int, positions: dict[TP, int], until: dict[TP, int]) -> str:
    """A copy task's warning for a ``--once`` slice that copied nothing although it was planned
    with work: where its partitions stand by the ledger it read, against their ends."""
    where = ", ".join(
        f"{t}-{p} at {pos} of {until.get((t, p))}" for (t, p), pos in sorted(positions.items())
    )
    return f"slot {slot}: this --once slice copied nothing; by the ledger read in the task: {where}"
