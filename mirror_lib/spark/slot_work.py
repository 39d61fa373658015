"""The unit of work between the slice planner (:mod:`mirror_lib.spark.source`) and the copy tasks
(:mod:`mirror_lib.spark.sink`): one task slot's partitions in one slice, as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

TP = tuple[str, int]


@dataclass
class SlotWork(InputPartition):
    """What one task slot copies in one slice: its partitions and, with --once, where to stop.

    ``counts`` are the source's partition counts at planning; a task that sees more (or a new
    matching topic) ends its slice early so that the planner sets them up. ``targets`` (fan-out
    groups only): flow -> the partitions that flow's target is written in this slice.
    """

    slot: int
    partitions: list[TP]
    until: list[tuple[str, int, int]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    slice: int = 0
    ids: dict[str, str] = field(default_factory=dict)
    targets: dict[str, list[TP]] = field(default_factory=dict)

    def until_offsets(self) -> dict[TP, int]:
        return {(t, p): end for t, p, end in self.until}

    def to_json(self) -> str:
        return json.dumps(
            {
                "p": self.partitions,
                "u": self.until,
                "c": self.counts,
                "s": self.slice,
                "i": self.ids,
                "t": self.targets,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, slot: int, text: str) -> SlotWork:
        data = json.loads(text)
        return cls(
            slot,
            [(t, int(p)) for t, p in data["p"]],
            [(t, int(p), int(end)) for t, p, end in data["u"]],
            {t: int(n) for t, n in data["c"].items()},
            int(data["s"]),
            dict(data.get("i", {})),
            {f: [(t, int(p)) for t, p in tps] for f, tps in data.get("t", {}).items()},
        )
