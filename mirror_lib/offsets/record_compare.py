"""Record-by-record comparison of a source partition with its copy, through exact segments
(docs/design.md#d4-exact-offset-mapping).

Pure logic (no Kafka): :class:`OffsetMap` maps offsets both ways from a partition's segments;
:func:`compare_ranges` walks the source's and the target's records in lockstep and returns how
many matched, a sha256 chained over them, the first difference and the stray records (on the
target, not a copy). Used by ``mirror verify``.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mirror_lib.offsets.segments import Segment, SegmentIndex


class Rec(NamedTuple):
    """One record as a consumer sees it: what verification compares."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def _field(data: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if data is None else len(data).to_bytes(4, "big") + data


def encode_record(rec: Rec) -> bytes:
    """Unambiguous bytes of (key, value, headers, timestamp) for the checksum (offset excluded)."""
    parts = [rec.timestamp.to_bytes(8, "big", signed=True), _field(rec.key), _field(rec.value)]
    parts.append(len(rec.headers).to_bytes(4, "big"))
    for name, value in rec.headers:
        parts += [_field(name.encode()), _field(value)]
    return b"".join(parts)


class OffsetMap:
    """Exact offset mapping of one partition from its segments, both directions."""

    def __init__(self, segments: Iterable[Segment]) -> None:
        self.index = SegmentIndex(segments)
        self.segments = self.index.segments
        self._us = [s.upstream_start for s in self.segments]
        self._ds = [s.downstream_start for s in self.segments]

    def copied(self, upstream: int) -> bool:
        """True if the record at ``upstream`` was replicated (inside a segment)."""
        i = bisect_right(self._us, upstream) - 1
        return i >= 0 and upstream <= self.segments[i].upstream_end

    def downstream(self, upstream: int) -> int:
        """Downstream offset of the first replicated record at or after ``upstream``."""
        d = self.index.translate(upstream)
        return 0 if d is None else d

    def upstream_of(self, downstream: int) -> int | None:
        """Upstream offset of the record copied to ``downstream``; None: not a copy."""
        i = bisect_right(self._ds, downstream) - 1
        if i < 0 or downstream > self.segments[i].downstream_end:
            return None
        return downstream - self.segments[i].delta

    @property
    def upstream_end(self) -> int:
        """Next upstream offset after the last replicated record (0: nothing replicated)."""
        return self.segments[-1].upstream_end + 1 if self.segments else 0

    @property
    def downstream_end(self) -> int:
        return self.segments[-1].downstream_end + 1 if self.segments else 0


class SkippedRanges:
    """Source offset ranges ``(first, last)`` a flow skipped on purpose (its ``skip`` events)."""

    def __init__(self, ranges: Iterable[Sequence[int]] = ()) -> None:
        self.ranges = sorted((int(first), int(last)) for first, last in ranges)
        self._firsts = [first for first, _last in self.ranges]

    def __contains__(self, offset: int) -> bool:
        i = bisect_right(self._firsts, offset) - 1
        return i >= 0 and offset <= self.ranges[i][1]


_PAST_ANY_OFFSET = 1 << 63

#: How many ranges of stray offsets an outcome lists; the rest are only counted.
STRAY_RANGES_MAX = 20


@dataclass
class Strays:
    """Target records that no segment maps: how many, and the first ``STRAY_RANGES_MAX`` ranges
    ``(first, last)`` of offsets, where a range holds strays with no copy between them."""

    count: int = 0
    ranges: list[tuple[int, int]] = field(default_factory=list)
    listed: int = 0  # how many of them the ranges hold
    _joins: bool = field(default=False, repr=False, compare=False)  # extend the last range

    def add(self, offset: int) -> None:
        self.count += 1
        if self._joins:
            self.ranges[-1] = (self.ranges[-1][0], offset)
        elif len(self.ranges) < STRAY_RANGES_MAX:
            self.ranges.append((offset, offset))
            self._joins = True
        else:
            return
        self.listed += 1

    def copy_seen(self) -> None:
        """A copy lies between the last stray and the next one: they are separate ranges."""
        self._joins = False

    @property
    def first(self) -> int | None:
        return self.ranges[0][0] if self.ranges else None

    def offsets(self) -> str:
        """The ranges as text, ``7, 40-41``, with ``, ...`` when they do not hold every stray."""
        shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in self.ranges)
        return shown + (", ..." if self.count > self.listed else "")


@dataclass
class Outcome:
    """Result of walking one range: matched records, where it stopped, the first difference,
    and the stray records seen on the target up to there."""

    records: int
    checksum: str
    upstream_next: int
    downstream_next: int
    difference: tuple[int, int, str] | None = None
    skipped: int = 0  # source records not copied on purpose, inside a skip event's range
    strays: Strays = field(default_factory=Strays)


def _show(data: Any) -> str:
    text = repr(data)
    return text if len(text) <= 60 else text[:57] + "..."


def _mismatch(a: Rec, b: Rec) -> str:
    names = ("key", "value", "headers", "timestamp")
    diffs = [
        f"{n} {_show(getattr(a, n))} on source, {_show(getattr(b, n))} on target"
        for n in names
        if getattr(a, n) != getattr(b, n)
    ]
    return "; ".join(diffs)


def compare_ranges(
    offsets: OffsetMap,
    upstream: Iterable[Rec],
    downstream: Iterable[Rec],
    *,
    upstream_from: int,
    downstream_from: int,
    checksum_seed: str = "",
    skipped: SkippedRanges | None = None,
) -> Outcome:
    """Walk source and target records in order; stop at the first difference.

    ``upstream`` must be the source's records of ``[upstream_from, offsets.upstream_end)`` in
    offset order. ``downstream`` must be the target's records in offset order from
    ``downstream_from`` or earlier, to ``offsets.downstream_end`` or later. Every source record
    must be inside a segment and found, equal, at its mapped offset, or inside one of the
    ``skipped`` ranges (counted, not compared). A target record at an offset that no segment maps
    is stray: not a copy of a source record (someone else produced it). Strays are collected and
    the walk goes on; a copy before ``downstream_from`` (of a record verified before, or no longer
    on the source) is passed over.
    """
    digest = hashlib.sha256(checksum_seed.encode())
    skipped = skipped or SkippedRanges()
    strays = Strays()
    count, u_next, d_next, n_skipped = 0, upstream_from, downstream_from, 0
    down = iter(downstream)
    b = next(down, None)

    def stop(u: int, d: int, why: str) -> Outcome:
        return Outcome(count, digest.hexdigest(), u_next, d_next, (u, d, why), n_skipped, strays)

    def before(d: int) -> Outcome | None:
        """Pass over the target's records below ``d``: strays and earlier copies."""
        nonlocal b
        while b is not None and b.offset < d:
            u = offsets.upstream_of(b.offset)
            if u is None:
                strays.add(b.offset)
            elif b.offset < downstream_from:
                strays.copy_seen()
            else:
                return stop(u, b.offset, f"source no longer holds offset {u} (deleted, "
                                         f"compacted), its copy is at {b.offset}")  # fmt: skip
            b = next(down, None)
        return None

    for a in upstream:
        d = offsets.downstream(a.offset)
        if not offsets.copied(a.offset):
            if a.offset in skipped:
                n_skipped += 1
                continue
            return stop(a.offset, d, f"source record at {a.offset} was never copied")
        if (out := before(d)) is not None:
            return out
        if b is None or b.offset > d:
            return stop(a.offset, d, f"missing on the target (source offset {a.offset})")
        if a[1:] != b[1:]:
            return stop(a.offset, d, _mismatch(a, b))
        digest.update(encode_record(a))
        count, u_next, d_next = count + 1, a.offset + 1, d + 1
        strays.copy_seen()
        b = next(down, None)
    if (out := before(_PAST_ANY_OFFSET)) is not None:  # the rest: no segment maps past its end
        return out
    u_end, d_end = max(u_next, offsets.upstream_end), max(d_next, offsets.downstream_end)
    return Outcome(count, digest.hexdigest(), u_end, d_end, None, n_skipped, strays)
