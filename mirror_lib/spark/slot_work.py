"""The unit of work between the slice planner (:mod:`mirror_lib.spark.source`) and the copy tasks
(:mod:`mirror_lib.spark.copy_task`): one task slot's partitions in one slice (pickled to the task).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

from mirror_lib.mm2.formats import TP


@dataclass
class SlotWork(InputPartition):
    """What one task slot copies in one slice: its partitions and, with --once, where to stop.

    ``counts`` are the source's partition counts at planning; a task that sees more (or a new
    matching topic) ends its slice early so that the planner sets them up. ``targets`` (fan-out
    groups only): flow -> the partitions that flow's target is written in this slice. ``busy``
    (fan-out groups with --once): the flows that had work left in any slot when the slice was
    planned, None for a slice planned without it. ``shared``: the other slots whose partitions
    this task copies in this slice (slots that share a task, of ``slots`` in the plan).
    """

    slot: int
    partitions: list[TP]
    until: list[tuple[str, int, int]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    slice: int = 0
    ids: dict[str, str] = field(default_factory=dict)
    targets: dict[str, list[TP]] = field(default_factory=dict)
    busy: list[str] | None = None
    shared: list[int] = field(default_factory=list)
    slots: int = 0

    def until_offsets(self) -> dict[TP, int]:
        return {(t, p): end for t, p, end in self.until}
