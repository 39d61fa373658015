"""Offset mapping between a source partition and its replica
(docs/design.md#d4-exact-offset-mapping, docs/mm2-reference.md#offset-translation).

* :class:`SegmentTracker`: contiguous runs of (upstream, downstream) offsets seen by the sink.
* :func:`segment_syncs`, :func:`mm2_compatible_points`: the OffsetSync points to write.
* :class:`SegmentIndex`, :func:`translate_exact`: exact translation from segments.

MM2's own emission rules and its conservative OffsetSyncStore, which the tests compare us with,
are reference models in :mod:`tests.helpers.mm2_models`.

Pure logic: no Kafka, no Spark. Offsets are Kafka offsets (>= 0).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from mirror_lib.errors import ConfigError


class SyncPoint(NamedTuple):
    """One OffsetSync: the same record's offset upstream and downstream."""

    upstream: int
    downstream: int


@dataclass(frozen=True, slots=True)
class Segment:
    """A maximal run of replicated records with consecutive offsets on both sides (inclusive)."""

    upstream_start: int
    upstream_end: int
    downstream_start: int
    downstream_end: int

    def __post_init__(self) -> None:
        n = self.upstream_end - self.upstream_start
        if self.upstream_start < 0 or self.downstream_start < 0 or n < 0:
            raise ConfigError("segment", self, "non-negative offsets with start <= end")
        if self.downstream_end - self.downstream_start != n:
            raise ConfigError("segment", self, "equally long upstream and downstream ranges")

    @property
    def delta(self) -> int:
        """downstream - upstream, the same for every record of the segment."""
        return self.downstream_start - self.upstream_start

    @property
    def count(self) -> int:
        """Number of records in the segment."""
        return self.upstream_end - self.upstream_start + 1


# --- Sink side: segments and the syncs to write ------------------------------------------------


class SegmentTracker:
    """Segments of one partition, fed in replication order; O(1) per record.

    A new segment starts whenever upstream or downstream does not advance by exactly 1
    (compaction or transaction markers upstream, markers downstream, a rewind, a re-created topic).
    """

    __slots__ = ("_closed", "_de", "_ds", "_ue", "_us")

    def __init__(self) -> None:
        self._closed: list[Segment] = []
        self._us = self._ds = -1  # start of the open run; -1: no open run
        self._ue = self._de = -2  # last record of the open run; -2 + 1 never matches an offset

    def add(self, upstream: int, downstream: int) -> None:
        """Record one replicated record."""
        if upstream == self._ue + 1 and downstream == self._de + 1:
            self._ue = upstream
            self._de = downstream
        else:
            self._open(upstream, downstream, 1)

    def add_run(self, upstream_start: int, downstream_start: int, count: int) -> None:
        """Record ``count`` records with consecutive offsets on both sides."""
        if count <= 0:
            if count == 0:
                return
            raise ConfigError("count", count, "a record count >= 0")
        if upstream_start == self._ue + 1 and downstream_start == self._de + 1:
            self._ue += count
            self._de += count
        else:
            self._open(upstream_start, downstream_start, count)

    def _open(self, upstream: int, downstream: int, count: int) -> None:
        if upstream < 0 or downstream < 0:
            raise ConfigError("offset", (upstream, downstream), "non-negative offsets")
        if self._us >= 0:
            self._closed.append(Segment(self._us, self._ue, self._ds, self._de))
        self._us, self._ds = upstream, downstream
        self._ue, self._de = upstream + count - 1, downstream + count - 1

    def segments(self) -> list[Segment]:
        """All segments so far, the open one last (a snapshot; tracking continues)."""
        if self._us < 0:
            return list(self._closed)
        return [*self._closed, Segment(self._us, self._ue, self._ds, self._de)]

    def close(self) -> list[Segment]:
        """Return all segments and reset; the next record starts a new segment."""
        out = self.segments()
        self._closed = []
        self._us = self._ds = -1
        self._ue = self._de = -2
        return out


def segment_syncs(segments: Iterable[Segment]) -> list[SyncPoint]:
    """The OffsetSync points: each segment's start and end (one point for a one-record segment), in
    order."""
    out: list[SyncPoint] = []
    for s in segments:
        out.append(SyncPoint(s.upstream_start, s.downstream_start))
        if s.upstream_end != s.upstream_start:
            out.append(SyncPoint(s.upstream_end, s.downstream_end))
    return out


def mm2_compatible_points(segment: Segment, offset_lag_max: int = 100) -> list[SyncPoint]:
    """Start, end, and the intermediate points MM2's own writer would emit for this run.

    A real MM2 checkpoint task translates conservatively (at most ``sync.downstream + 1``), so its
    precision depends on sync density, not on our segments. MM2 emits a sync when
    ``d - (last_sync_d + 1) >= offset_lag_max``, i.e. every ``offset_lag_max + 1`` records of a
    contiguous run; we emit at the same offsets, so a real-MM2 reader re-delivers fewer than
    ``offset_lag_max`` records, as with MM2 itself (``offset_lag_max=0``: every record).

    Trade-off: about ``count / (offset_lag_max + 1)`` extra OffsetSync records per segment (more
    bytes on the offset-syncs topic and more churn in readers' 64-slot stores), in exchange for
    MM2-grade precision for MM2 readers. Our own readers need only start and end
    (:func:`segment_syncs`) for exact translation. The end point is what MM2 sends on its periodic
    flush of the delayed sync.
    """
    if offset_lag_max < 0:
        raise ConfigError("offset.lag.max", offset_lag_max, "an integer >= 0")
    us, ds, n = segment.upstream_start, segment.downstream_start, segment.count
    out = [SyncPoint(us + k, ds + k) for k in range(0, n, offset_lag_max + 1)]
    if out[-1].upstream != segment.upstream_end:
        out.append(SyncPoint(segment.upstream_end, segment.downstream_end))
    return out


# --- Exact translation from segments -----------------------------------------------------------


class SegmentIndex:
    """Segments of one partition, kept as one strictly increasing mapping; O(log n) lookups.

    Segments are added in *write order* (the order the sink produced them or the order they are
    read back). Within one generation any order works: duplicates and overlapping pieces of the
    same mapping are merged. A segment that contradicts what is known (overlaps with another
    mapping, or inverts the order) is the latest write and wins: as a new write at downstream
    offset d means nothing at >= d existed in that log, every known record with downstream >=
    its start, or upstream >= its start, is forgotten. So after a re-created topic or a truncation
    only the latest generation counts, and after an upstream rewind the latest copy counts. An old
    generation's segment added *after* the new one, without contradicting it, cannot be detected.
    """

    __slots__ = ("_de", "_ds", "_segs", "_ue", "_us")

    def __init__(self, segments: Iterable[Segment] = ()) -> None:
        self._segs: list[Segment] = []
        self._us: list[int] = []
        self._ue: list[int] = []
        self._ds: list[int] = []
        self._de: list[int] = []
        for s in segments:
            self.add(s)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The retained segments, sorted (by upstream and by downstream alike)."""
        return tuple(self._segs)

    @property
    def last(self) -> Segment | None:
        """The segment with the highest offsets; None when empty."""
        return self._segs[-1] if self._segs else None

    def __len__(self) -> int:
        return len(self._segs)

    def add(self, seg: Segment, *, newest: bool = False) -> bool:
        """Add one segment; True when it contradicted what was known (see the class docstring),
        so that answers derived before may no longer hold.

        ``newest``: ``seg`` was written after every known segment (a reader of the metrics
        topic in its order). Then one that lies below a known segment without overlapping
        anything known is a new log, a truncation or a replay too, which only the dropped
        history (:meth:`drop_below`) would have shown: every known record at or above its
        start, on either side, is forgotten.
        """
        # Known segments strictly before seg on both sides form a prefix, strictly after a suffix.
        lo = min(
            bisect_left(self._ue, seg.upstream_start), bisect_left(self._de, seg.downstream_start)
        )
        hi = max(
            bisect_right(self._us, seg.upstream_end), bisect_right(self._ds, seg.downstream_end)
        )
        rewound = newest and lo == hi and lo < len(self._segs)
        if lo == hi and not rewound:  # no overlap with anything known
            self._splice(lo, lo, [seg])
            return False
        middle = self._segs[lo:hi]
        if not rewound and all(t.delta == seg.delta for t in middle):  # same mapping: merge
            us = min([seg.upstream_start, *(t.upstream_start for t in middle)])
            ue = max([seg.upstream_end, *(t.upstream_end for t in middle)])
            self._splice(lo, hi, [Segment(us, ue, us + seg.delta, ue + seg.delta)])
            return False
        # Conflict: keep only records with upstream < seg's start and downstream < seg's start.
        keep: list[Segment] = []
        if lo < len(self._segs):
            t = self._segs[lo]
            cut = min(seg.upstream_start, seg.downstream_start - t.delta) - 1
            if cut >= t.upstream_start:
                keep.append(Segment(t.upstream_start, cut, t.downstream_start, cut + t.delta))
        self._splice(lo, len(self._segs), [*keep, seg])
        return True

    def drop_below(self, upstream_offset: int) -> int:
        """Forget segments that end before ``upstream_offset``, except the last one; returns
        how many were dropped.

        :meth:`translate` answers as before for every offset >= ``upstream_offset``: its answer
        comes from the first segment ending at or after the offset, and those are all kept.
        Bounds the memory of a long-running reader (one segment per transaction per partition).
        """
        n = min(bisect_left(self._ue, upstream_offset), len(self._segs) - 1)
        if n > 0:
            self._splice(0, n, [])
        return max(n, 0)

    def _splice(self, lo: int, hi: int, new: list[Segment]) -> None:
        self._segs[lo:hi] = new
        self._us[lo:hi] = [s.upstream_start for s in new]
        self._ue[lo:hi] = [s.upstream_end for s in new]
        self._ds[lo:hi] = [s.downstream_start for s in new]
        self._de[lo:hi] = [s.downstream_end for s in new]

    def translate(self, upstream_offset: int) -> int | None:
        """Downstream offset of the first replicated record with upstream >= ``upstream_offset``.

        Inside a segment: exact. In a gap or before all segments: the next segment's start. Past
        the last segment: its end + 1 (where the next replicated record will land). No segments:
        None.
        """
        if not self._segs:
            return None
        i = bisect_left(self._ue, upstream_offset)
        if i == len(self._segs):
            return self._de[-1] + 1
        if upstream_offset <= self._us[i]:
            return self._ds[i]
        return self._ds[i] + (upstream_offset - self._us[i])


def translate_exact(segments: Sequence[Segment], upstream_offset: int) -> int | None:
    """One-shot :meth:`SegmentIndex.translate`; build a :class:`SegmentIndex` to query often."""
    return SegmentIndex(segments).translate(upstream_offset)


# --- MM2-conservative translation from point syncs (docs/mm2-reference.md#translating-an-offset)
