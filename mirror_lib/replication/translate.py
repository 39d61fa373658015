"""Exact upstream -> downstream offset translation from the segments our sink commits (D4).

Each transaction chunk writes, atomically with the data, a ``segments`` record per partition to
the flow's metrics topic: every contiguous run ``[upstream_start..end] -> [downstream_start..end]``.
Translation of a committed upstream offset U is the downstream offset of the first replicated
record with upstream offset >= U: exact inside a segment, the next segment's start in a gap.
"""

from __future__ import annotations

import json
from typing import Any

from mirror_lib.kafka.reader import read_topic
from mirror_lib.offsets.segments import Segment, SegmentIndex
from mirror_lib.replication.context import FlowContext

TP = tuple[str, int]


def add_segments(
    indexes: dict[TP, SegmentIndex],
    value: bytes | None,
    skips: dict[TP, list[tuple[int, int]]] | None = None,
) -> bool:
    """Add a metrics record's segments to ``indexes``; False when it cannot be decoded.

    With ``skips``, a ``skip`` event's range ``(first_offset, last_offset)`` is added to it;
    records of other types are ignored (True).
    """
    try:
        event = json.loads(value or b"")
        kind = event.get("type")
        if kind == "skip" and skips is not None:
            tp = (event["topic"], int(event["partition"]))
            skips.setdefault(tp, []).append((int(event["first_offset"]), int(event["last_offset"])))
        if kind != "segments":
            return True
        index = indexes.setdefault((event["topic"], int(event["partition"])), SegmentIndex())
        for us, ue, ds, de in event["segments"]:
            index.add(Segment(us, ue, ds, de))
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    return True


def reader_conf(ctx: FlowContext) -> dict[str, Any]:
    """Consumer config for reading the flow's internal topics on the target."""
    return ctx.client("target", "consumer", **{"group.id": f"__mirror_reader.{ctx.flow.name}"})


def load_segments(
    ctx: FlowContext,
    timeout_s: float = 60,
    skips: dict[TP, list[tuple[int, int]]] | None = None,
) -> dict[TP, SegmentIndex]:
    """Read the flow's segments from the target's metrics topic (undecodable records skipped);
    with ``skips``, collect the ranges of its ``skip`` events there in the same read."""
    indexes: dict[TP, SegmentIndex] = {}
    for msg in read_topic(reader_conf(ctx), ctx.metrics_topic, timeout_s):
        add_segments(indexes, msg.value(), skips)
    return indexes


def translate(indexes: dict[TP, SegmentIndex], topic: str, partition: int, upstream: int) -> int:
    """Downstream offset for upstream offset ``upstream`` of ``topic[partition]``; -1: unknown."""
    index = indexes.get((topic, partition))
    if index is None:
        return -1
    result = index.translate(upstream)
    return -1 if result is None else result
