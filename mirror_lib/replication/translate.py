"""Exact upstream -> downstream offset translation from the segments our sink commits
(docs/design.md#d4-exact-offset-mapping).

Each transaction chunk writes, atomically with the data, a ``segments`` record per partition to
the flow's metrics topic: every contiguous run ``[upstream_start..end] -> [downstream_start..end]``.
Translation of a committed upstream offset U is the downstream offset of the first replicated
record with upstream offset >= U: exact inside a segment, the next segment's start in a gap.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mirror_lib.kafka.reader import read_back, read_topic
from mirror_lib.mm2.formats import TP
from mirror_lib.offsets.segments import Segment, SegmentIndex
from mirror_lib.replication.context import FlowContext

_OTHER_EVENT = b'{"type":"'  # our events start with their type (events.encode)
SEGMENTS_EVENT = b'{"type":"segments"'  # how a segments event's record value starts
TAKEOVER_EVENT = b'{"type":"takeover"'
_WANTED_EVENTS = (SEGMENTS_EVENT, b'{"type":"skip"', TAKEOVER_EVENT)


def add_segments(
    indexes: dict[TP, SegmentIndex],
    value: bytes | None,
    skips: dict[TP, list[tuple[int, int]]] | None = None,
    mm2_below: dict[TP, int] | None = None,
) -> bool:
    """Add a metrics record's segments to ``indexes``; False when it cannot be decoded.

    With ``skips``, a ``skip`` event's range ``(first_offset, last_offset)`` is added to it;
    with ``mm2_below``, a ``takeover`` event's floor (see :func:`parse_segments`); records of
    other types are ignored (True).
    """
    parsed = parse_segments(value, skips, mm2_below)
    if parsed is None:
        return False
    if parsed:
        tp, segments = parsed
        index = indexes.setdefault(tp, SegmentIndex())
        for seg in segments:
            index.add(seg)
    return True


def parse_segments(
    value: bytes | None,
    skips: dict[TP, list[tuple[int, int]]] | None = None,
    mm2_below: dict[TP, int] | None = None,
) -> tuple[TP, list[Segment]] | tuple[()] | None:
    """A metrics record's ``(partition, segments)``; ``()`` for another event; None when it
    cannot be decoded. With ``skips``, a ``skip`` event's range is added to it.

    A ``takeover`` event (the flow took the partition over from MirrorMaker 2) gives the one
    record it matched at the boundary as a segment, and with ``mm2_below`` sets the partition's
    floor: offsets below it were copied by MM2, so our segments cannot translate them.
    """
    if value and value.startswith(_OTHER_EVENT) and not value.startswith(_WANTED_EVENTS):
        return ()  # most records are ``batch`` events: not worth decoding here
    try:
        event = json.loads(value or b"")
        kind = event.get("type")
        if kind == "skip" and skips is not None:
            tp = (event["topic"], int(event["partition"]))
            skips.setdefault(tp, []).append((int(event["first_offset"]), int(event["last_offset"])))
        if kind == "takeover":
            return _takeover(event, mm2_below)
        if kind != "segments":
            return ()
        tp = (event["topic"], int(event["partition"]))
        return tp, [Segment(us, ue, ds, de) for us, ue, ds, de in event["segments"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _takeover(
    event: dict[str, Any], mm2_below: dict[TP, int] | None
) -> tuple[TP, list[Segment]] | tuple[()]:
    tp = (event["topic"], int(event["partition"]))
    matched, last = event.get("mm2_last_upstream"), event.get("mm2_last_downstream")
    floor = int(event["upstream"]) if matched is None else int(matched)
    if mm2_below is not None:
        mm2_below[tp] = max(floor, mm2_below.get(tp, floor))
    if matched is None or last is None:
        return ()
    return tp, [Segment(int(matched), int(matched), int(last), int(last))]


def reader_conf(ctx: FlowContext) -> dict[str, Any]:
    """Consumer config for reading the flow's internal topics on the target."""
    return ctx.client("target", "consumer", **{"group.id": ctx.reader_group})


def load_segments(
    ctx: FlowContext,
    timeout_s: float = 60,
    skips: dict[TP, list[tuple[int, int]]] | None = None,
    until: int = 0,
    mm2_below: dict[TP, int] | None = None,
) -> dict[TP, SegmentIndex]:
    """Read the flow's segments from the target's metrics topic (undecodable records skipped);
    with ``skips``, collect the ranges of its ``skip`` events there in the same read, and with
    ``mm2_below`` the partitions taken over from MirrorMaker 2.

    ``until``: read at least the decided records below this offset (the topic's high watermark
    seen earlier), so every transaction committed by then is in the answer.
    """
    indexes: dict[TP, SegmentIndex] = {}
    for msg in read_topic(reader_conf(ctx), ctx.metrics_topic, timeout_s, until={0: until}):
        add_segments(indexes, msg.value(), skips, mm2_below)
    return indexes


@dataclass
class SegmentScan:
    """Segments read from the newest end of the metrics topic back to where they were enough.

    ``end``: the metrics topic's offset after the last record read (a reader goes on from there).
    ``complete``: the scan read the whole topic, and it never lost a record. Otherwise ``floor``
    holds, per partition, the lowest upstream offset of the segments read: a translation at or
    above it is what the whole topic gives; below it, nothing is known. ``mm2_below``: per
    partition taken over from MirrorMaker 2, the offset below which MM2 copied the records
    (no translation of ours there).
    """

    indexes: dict[TP, SegmentIndex]
    end: int
    complete: bool
    floor: dict[TP, int] = field(default_factory=dict)
    skipped: int = 0
    mm2_below: dict[TP, int] = field(default_factory=dict)

    def exact(self, tp: TP, upstream: int) -> bool:
        """Whether ``upstream`` of ``tp`` translates as with the whole topic."""
        if upstream < self.mm2_below.get(tp, -1):
            return False
        return self.complete or self.floor.get(tp, upstream + 1) <= upstream


def scan_segments(
    ctx: FlowContext,
    needed: Mapping[TP, int],
    end: int | None = None,
    timeout_s: float = 60,
    first: int = 20_000,
) -> SegmentScan:
    """Segments enough to translate each ``needed`` upstream offset exactly, newest first.

    The metrics topic keeps one ``segments`` event per partition per transaction, so a long
    running flow has millions; consumers' committed offsets are mostly recent, so this reads
    back from ``end`` (default: the topic's end) only until every needed partition has a segment
    starting at or below its offset (or the topic's start). Segments are then added in the
    order they were written, as :func:`load_segments` does. ``first``: how many offsets the
    first read back takes (each next one twice as many).
    """
    chunks: list[dict[TP, list[Segment]]] = []  # per partition in write order (no tuples)
    floor: dict[TP, int] = {}
    # where a reader goes on from: after the last record read, never the broker's end offset,
    # which can be past a transaction still open (its records would never be read)
    top, skipped, complete = end or 0, 0, True  # a missing or empty topic: nothing replicated
    mm2_below: dict[TP, int] = {}
    for part in read_back(reader_conf(ctx), ctx.metrics_topic, end, timeout_s, first):
        chunk: dict[TP, list[Segment]] = {}
        for msg in part.records:
            top = max(top, msg.offset() + 1)
            parsed = parse_segments(msg.value(), mm2_below=mm2_below)
            if parsed is None:
                skipped += 1
            elif parsed:
                tp, segments = parsed
                chunk.setdefault(tp, []).extend(segments)
                floor[tp] = min(floor.get(tp, segments[0].upstream_start),
                                *(g.upstream_start for g in segments))  # fmt: skip
        chunks.append(chunk)
        # only a topic that never lost a record (retention, DeleteRecords) holds each
        # partition's first segment: below the lowest one kept, an offset has no answer (as in
        # MM2, whose store answers -1 below its oldest sync), not that segment's start
        complete = part.at_start and part.start == 0
        if complete or all(floor.get(tp, u + 1) <= u for tp, u in needed.items()):
            break
    indexes: dict[TP, SegmentIndex] = {}
    while chunks:  # oldest first; each chunk is let go once it is in the indexes
        for tp, segments in chunks.pop().items():
            index = indexes.setdefault(tp, SegmentIndex())
            for seg in segments:
                index.add(seg)
    return SegmentScan(indexes, top, complete, {} if complete else floor, skipped, mm2_below)


def older_than_kept(floor: int) -> str:
    """Why an offset below ``floor``, the oldest segment start the metrics topic still keeps,
    has no exact answer."""
    return (
        f"older than the segments the metrics topic still keeps (from upstream offset {floor}; "
        "retention removed the older ones)"
    )


def copied_by_mm2(floor: int) -> str:
    """Why an offset below ``floor``, where the flow took its partition over from MirrorMaker 2,
    has no answer of ours."""
    return (
        f"copied by MirrorMaker 2 before this flow took the partition over at upstream offset "
        f"{floor}: MM2's own checkpoints stand for it"
    )


def translate(indexes: dict[TP, SegmentIndex], topic: str, partition: int, upstream: int) -> int:
    """Downstream offset for upstream offset ``upstream`` of ``topic[partition]``; -1: unknown."""
    index = indexes.get((topic, partition))
    if index is None:
        return -1
    result = index.translate(upstream)
    return -1 if result is None else result
