"""A long-running reader's view of a flow's segments: exact where asked, bounded in memory.

The metrics topic holds one ``segments`` event per partition per transaction, millions a day on
a busy flow. The checkpoint job needs only the translations of its consumer groups' committed
offsets, which are mostly recent. So the view reads the topic back from its end only as far as
those offsets need (:func:`~mirror_lib.replication.translate.scan_segments`), then only what is
new, and after each cycle forgets segments below the offsets still moving. An offset that stayed
where it was keeps its answer; one that moved below what is kept (a group rewound, a new group
at an old offset) is read back again once.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirror_lib.kafka.reader import read_topic
from mirror_lib.mm2.formats import TP
from mirror_lib.offsets.segments import Segment, SegmentIndex
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.translate import (
    SegmentScan,
    copied_by_mm2,
    older_than_kept,
    parse_segments,
    reader_conf,
    scan_segments,
)

log = logging.getLogger(__name__)
GroupTP = tuple[str, TP]
UNKNOWN = 1 << 62  # no offset of a partition is known to translate exactly


@dataclass
class SegmentView:
    """Segments of one flow as one reader needs them (see the module docstring).

    ``exact_from[tp]``: offsets at or above it translate as with the whole topic; a partition
    not in it: ``default_from``. ``answers``: translations of offsets below that, kept while a
    group stays there. ``position``: the metrics topic's offset read up to; None before the
    first read. ``mm2_below[tp]``: offsets below it were copied by MirrorMaker 2 before the
    flow took the partition over; they have no answer of ours (known, not unread).
    """

    indexes: dict[TP, SegmentIndex] = field(default_factory=dict)
    exact_from: dict[TP, int] = field(default_factory=dict)
    default_from: int = UNKNOWN
    answers: dict[tuple[TP, int], int | None] = field(default_factory=dict)
    position: int | None = None
    skipped: int = 0
    mm2_below: dict[TP, int] = field(default_factory=dict)
    _offsets: dict[GroupTP, int] = field(default_factory=dict)

    def update(self, ctx: FlowContext, offsets: Mapping[GroupTP, int]) -> None:
        """Read what ``offsets`` (each group's committed upstream offset per partition) need."""
        if self.position is None:
            lowest = _lowest(offsets)
            self.load(scan_segments(ctx, lowest), lowest)
        else:
            for msg in read_topic(reader_conf(ctx), ctx.metrics_topic, start=self.position):
                self.position = msg.offset() + 1
                self.add(msg.value())
        cold = self.missing(offsets)
        if cold:
            self.load(scan_segments(ctx, cold, end=self.position), cold)

    def load(self, scan: SegmentScan, needed: Mapping[TP, int]) -> None:
        """Take the partitions of ``needed`` from a scan that ends at :attr:`position`
        (all of them on the first scan)."""
        first = self.position is None
        if first:
            self.position = scan.end
            self.default_from = -1 if scan.complete else UNKNOWN
        self.skipped += scan.skipped
        for tp, floor in scan.mm2_below.items():
            self.mm2_below[tp] = max(floor, self.mm2_below.get(tp, floor))
        taken = scan.indexes.keys() | needed.keys() if first else needed.keys()
        for tp in taken:
            if tp in scan.indexes:
                self.indexes[tp] = scan.indexes[tp]
            else:
                self.indexes.pop(tp, None)
            self.exact_from[tp] = -1 if scan.complete else scan.floor.get(tp, UNKNOWN)
        self._forget_answers(taken)

    def add(self, value: bytes | None) -> None:
        """Add one new metrics record (segments of later transactions)."""
        parsed = parse_segments(value, mm2_below=self.mm2_below)
        if parsed is None:
            self.skipped += 1
            return
        if not parsed:
            return
        tp, segments = parsed
        index = self.indexes.setdefault(tp, SegmentIndex())
        if tp not in self.exact_from and self.default_from == UNKNOWN:
            self.exact_from[tp] = segments[0].upstream_start  # its history is unread
        for seg in segments:
            if index.add(seg, newest=True):
                # a new log, a truncation or a replay: every record at or after the segment's
                # start was forgotten, so offsets from there on are exact again; answers of
                # offsets below may have changed
                start = self.exact_from.get(tp, self.default_from)
                self.exact_from[tp] = min(start, seg.upstream_start)
                self._forget_answers({tp})

    def _forget_answers(self, tps: Collection[TP]) -> None:
        if self.answers:
            self.answers = {k: v for k, v in self.answers.items() if k[0] not in tps}

    def missing(self, offsets: Mapping[GroupTP, int]) -> dict[TP, int]:
        """Per partition, the lowest of ``offsets`` without an exact answer yet."""
        return _lowest({k: u for k, u in offsets.items() if not self.known(k[1], u)})

    def known(self, tp: TP, upstream: int) -> bool:
        """Whether ``upstream`` of ``tp`` has an exact answer (or none at all, below a takeover
        from MirrorMaker 2) without reading back."""
        if upstream < self.mm2_below.get(tp, -1):
            return True
        return (tp, upstream) in self.answers or upstream >= self.exact_from.get(
            tp, self.default_from
        )

    def translate(self, tp: TP, upstream: int) -> int | None:
        """Downstream offset of the first replicated record at or after ``upstream``; None:
        nothing of ``tp`` was replicated (or the offset was not asked for in :meth:`update`)."""
        if (tp, upstream) in self.answers:
            return self.answers[(tp, upstream)]
        if upstream < self.mm2_below.get(tp, -1) or not self.known(tp, upstream):
            return None
        index = self.indexes.get(tp)
        return None if index is None else index.translate(upstream)

    def why_unknown(self, tp: TP, upstream: int) -> str:
        """Why :meth:`translate` has no answer for ``upstream`` of ``tp``, for a report."""
        if upstream < self.mm2_below.get(tp, -1):
            return copied_by_mm2(self.mm2_below[tp])
        floor = self.exact_from.get(tp, self.default_from)
        if tp in self.indexes and -1 < floor < UNKNOWN and upstream < floor:
            return older_than_kept(floor)
        return "nothing of the partition replicated"

    def settle(self, offsets: Mapping[GroupTP, int]) -> None:
        """After a cycle: keep the answers of offsets that did not move, and only the segments
        offsets that moved (or are new) can still need."""
        last = {tp: index.last for tp, index in self.indexes.items() if index.last is not None}
        answers: dict[tuple[TP, int], int | None] = {}
        floors: dict[TP, int] = {}  # per partition, the lowest offset that still needs segments
        for (group, tp), u in offsets.items():
            # an offset past everything replicated translates to where the next record will
            # land, which moves: not an answer to keep
            if self._offsets.get((group, tp)) == u and tp in last and u <= last[tp].upstream_end:
                answers[(tp, u)] = self.translate(tp, u)
            else:
                floors[tp] = min(u, floors.get(tp, u))
        for tp, seg in last.items():
            floor = floors.get(tp, seg.upstream_start)
            if self.indexes[tp].drop_below(floor):
                self.exact_from[tp] = max(floor, self.exact_from.get(tp, self.default_from))
        self.answers = answers
        self._offsets = dict(offsets)

    def to_json(self) -> dict[str, Any]:
        """The view as JSON data, for a reader that runs again later (``--once`` rounds)."""
        tps = sorted(self.indexes.keys() | self.exact_from.keys() | self.mm2_below.keys())
        return {
            "position": self.position,
            "default_from": self.default_from,
            "partitions": [
                {
                    "topic": t,
                    "partition": p,
                    "exact_from": self.exact_from.get((t, p)),
                    "mm2_below": self.mm2_below.get((t, p)),
                    "segments": [
                        [g.upstream_start, g.upstream_end, g.downstream_start, g.downstream_end]
                        for g in self.indexes.get((t, p), SegmentIndex()).segments
                    ],
                }
                for t, p in tps
            ],
            "answers": [[t, p, u, d] for ((t, p), u), d in sorted(self.answers.items())],
            "offsets": [[g, t, p, u] for (g, (t, p)), u in sorted(self._offsets.items())],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SegmentView:
        """The view :meth:`to_json` saved."""
        view = cls(position=data["position"], default_from=data["default_from"])
        for part in data["partitions"]:
            tp = (part["topic"], part["partition"])
            if part["segments"]:
                view.indexes[tp] = SegmentIndex(Segment(*g) for g in part["segments"])
            if part["exact_from"] is not None:
                view.exact_from[tp] = part["exact_from"]
            if part.get("mm2_below") is not None:  # absent in views saved by older versions
                view.mm2_below[tp] = part["mm2_below"]
        view.answers = {((t, p), u): d for t, p, u, d in data["answers"]}
        view._offsets = {(g, (t, p)): u for g, t, p, u in data["offsets"]}
        return view


def load_view(path: Path, topic_id: str | None) -> SegmentView:
    """The view saved at ``path`` for the metrics topic ``topic_id``; a new one when there is
    none, it is unreadable, or the topic was re-created since (its id changed)."""
    try:
        data = json.loads(path.read_text())
        if data.get("version") == 1 and topic_id is not None and data["topic_id"] == topic_id:
            return SegmentView.from_json(data["view"])
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("segments of %s not read (%s); reading them from Kafka", path, exc)
    return SegmentView()


def save_view(path: Path, view: SegmentView, topic_id: str | None) -> None:
    """Save ``view`` for :func:`load_view` (replaced at once: a crash leaves the old one)."""
    if topic_id is None or view.position is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": 1, "topic_id": topic_id, "view": view.to_json()}))
    os.replace(tmp, path)


def _lowest(offsets: Mapping[GroupTP, int]) -> dict[TP, int]:
    out: dict[TP, int] = {}
    for (_group, tp), u in offsets.items():
        out[tp] = min(u, out.get(tp, u))
    return out
