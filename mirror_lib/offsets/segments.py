"""Offset mapping between a source partition and its replica (DESIGN D4, mm2.md §4).

* :class:`SegmentTracker`: contiguous runs of (upstream, downstream) offsets seen by the sink.
* :func:`segment_syncs`, :func:`mm2_compatible_points`: the OffsetSync points to write.
* :class:`Mm2SyncRules`: MM2's own emission rules (OffsetSyncWriter, §4.1).
* :class:`SegmentIndex`, :func:`translate_exact`: exact translation from segments (D4).
* :class:`OffsetSyncStore`: MM2's conservative translation from point syncs (§4.2, §4.3).

Pure logic: no Kafka, no Spark. Offsets are Kafka offsets (>= 0).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from mirror_lib.errors import ConfigError

SYNCS_PER_PARTITION = 64
"""Syncs kept per upstream partition by :class:`OffsetSyncStore` (one per bit of a long)."""


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
    """D4 points: each segment's start and end (one point for a one-record segment), in order."""
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


class Mm2SyncRules:
    """MM2's per-partition OffsetSyncWriter decisions (§4.1, Kafka 3.7+).

    :meth:`on_record` returns the sync that is due immediately (MM2 puts it in the *pending* map
    and sends it at once; we assume send capacity, so pending never holds more than it), and drops
    any delayed sync. Otherwise the record becomes the *delayed* sync (latest wins), which
    :meth:`flush` (MM2's task ``commit()``) promotes and returns. Promotion does not count as a
    sync for the staleness rule, exactly as in MM2.
    """

    __slots__ = ("_delayed", "_last_sync_d", "_prev_d", "_prev_u", "offset_lag_max")

    def __init__(self, offset_lag_max: int = 100) -> None:
        if offset_lag_max < 0:
            raise ConfigError("offset.lag.max", offset_lag_max, "an integer >= 0")
        self.offset_lag_max = offset_lag_max
        self._prev_u = self._prev_d = self._last_sync_d = -1
        self._delayed: SyncPoint | None = None

    @property
    def delayed(self) -> SyncPoint | None:
        """The sync waiting for the next :meth:`flush`, if any."""
        return self._delayed

    def on_record(self, upstream: int, downstream: int) -> SyncPoint | None:
        """Apply rules 1-4 to an acknowledged record; return the sync if it is due now."""
        due = (
            self._last_sync_d == -1  # 1. no sync yet in this lifetime
            or downstream - (self._last_sync_d + 1) >= self.offset_lag_max  # 2. too stale
            or upstream - self._prev_u != 1  # 3. upstream gap
            or downstream < self._prev_d  # 4. downstream truncated or re-created
        )
        self._prev_u, self._prev_d = upstream, downstream
        point = SyncPoint(upstream, downstream)
        if due:
            self._last_sync_d = downstream
            self._delayed = None
            return point
        self._delayed = point
        return None

    def flush(self) -> list[SyncPoint]:
        """Promote and return the delayed sync (none or one)."""
        point, self._delayed = self._delayed, None
        return [] if point is None else [point]


# --- Exact translation from segments (D4) ------------------------------------------------------


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

    def add(self, seg: Segment) -> None:
        """Add one segment (see the class docstring for conflicts)."""
        # Known segments strictly before seg on both sides form a prefix, strictly after a suffix.
        lo = min(
            bisect_left(self._ue, seg.upstream_start), bisect_left(self._de, seg.downstream_start)
        )
        hi = max(
            bisect_right(self._us, seg.upstream_end), bisect_right(self._ds, seg.downstream_end)
        )
        if lo == hi:  # no overlap with anything known
            self._splice(lo, lo, [seg])
            return
        middle = self._segs[lo:hi]
        if all(t.delta == seg.delta for t in middle):  # same mapping (they overlap seg): merge
            us = min([seg.upstream_start, *(t.upstream_start for t in middle)])
            ue = max([seg.upstream_end, *(t.upstream_end for t in middle)])
            self._splice(lo, hi, [Segment(us, ue, us + seg.delta, ue + seg.delta)])
            return
        # Conflict: keep only records with upstream < seg's start and downstream < seg's start.
        keep: list[Segment] = []
        if lo < len(self._segs):
            t = self._segs[lo]
            cut = min(seg.upstream_start, seg.downstream_start - t.delta) - 1
            if cut >= t.upstream_start:
                keep.append(Segment(t.upstream_start, cut, t.downstream_start, cut + t.delta))
        self._splice(lo, len(self._segs), [*keep, seg])

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


# --- MM2-conservative translation from point syncs (§4.2, §4.3) --------------------------------


def _long(x: int) -> int:
    """Wrap to a Java long, as MM2's bound arithmetic does."""
    return ((x + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def _inv_b(i_sync: SyncPoint, j_sync: SyncPoint, i: int, j: int) -> bool:
    """Invariant B: slot j is not too old relative to slot i."""
    bound = _long(j_sync.upstream + _long(1 << j) - (1 << i))
    return i_sync is j_sync or bound < 0 or i_sync.upstream <= bound


def _inv_c(i_sync: SyncPoint, j_sync: SyncPoint, i: int) -> bool:
    """Invariant C: distinct slots are spaced roughly exponentially."""
    bound = _long(j_sync.upstream + (1 << max(i - 2, 0)))
    return i_sync is j_sync or (bound >= 0 and i_sync.upstream >= bound)


class OffsetSyncStore:
    """MM2's OffsetSyncStore: 64 syncs per upstream partition, translated conservatively.

    Invariants per partition (slots compared by identity, like MM2's ``==``): A: slot 0 is the
    newest sync; B and C (see :func:`_inv_b`, :func:`_inv_c`) for distinct slots i < j; D: slot 63
    is the earliest sync usable for translation. Feed syncs in offset-syncs topic order with
    :meth:`handle_sync`, call :meth:`start` once the initial read reached the end.

    ``initialization_must_read_to_end`` (MM2: ``!checkpointsLoadedOk``): when true, only the last
    sync per partition seen before :meth:`start` is kept. Default true, the conservative choice.
    """

    def __init__(self, *, initialization_must_read_to_end: bool = True) -> None:
        self.initialization_must_read_to_end = initialization_must_read_to_end
        self._started = False
        self._syncs: dict[Hashable, list[SyncPoint]] = {}

    @property
    def started(self) -> bool:
        """True once :meth:`start` was called (initial read finished)."""
        return self._started

    def start(self) -> None:
        """Mark the initial read-to-end as finished; translation becomes available."""
        self._started = True

    def syncs(self, partition_key: Hashable) -> tuple[SyncPoint, ...]:
        """The 64 slots for a partition (slot 0 newest), empty if no sync was seen."""
        return tuple(self._syncs.get(partition_key, ()))

    def handle_sync(self, partition_key: Hashable, upstream: int, downstream: int) -> None:
        """Apply one OffsetSync record (§4.2 update)."""
        sync = SyncPoint(upstream, downstream)  # a new object: slots compare by identity
        original = self._syncs.get(partition_key)
        if original is None:
            self._syncs[partition_key] = [sync] * SYNCS_PER_PARTITION
            return
        clear = not self._started and self.initialization_must_read_to_end
        if clear or upstream < original[0].upstream:  # startup, or upstream rewound: fill all
            self._syncs[partition_key] = [sync] * SYNCS_PER_PARTITION
            return
        syncs = list(original)
        _update_slots(syncs, original, sync)
        self._syncs[partition_key] = syncs

    def translate_downstream(self, partition_key: Hashable, upstream_offset: int) -> int | None:
        """§4.3: None before start or without syncs, -1 if too old, else at most sync + 1."""
        if not self._started:
            return None
        syncs = self._syncs.get(partition_key)
        if syncs is None:
            return None
        sync = next((s for s in syncs if s.upstream <= upstream_offset), syncs[-1])
        if sync.upstream > upstream_offset:
            return -1
        return sync.downstream + (0 if upstream_offset == sync.upstream else 1)


def _update_slots(syncs: list[SyncPoint], original: Sequence[SyncPoint], sync: SyncPoint) -> None:
    """Set slot 0, then repair invariant B slot by slot, reusing older syncs where they fit."""
    n = SYNCS_PER_PARTITION
    replacement = sync
    r = 0  # index into ``original`` of the next candidate to reuse
    syncs[0] = sync
    for current in range(1, n):
        previous = current - 1
        while True:
            old = original[r]
            is_recent = _inv_b(syncs[previous], old, previous, current)
            separated_prev = _inv_c(syncs[previous], old, previous)
            separated_next = current + 1 >= n or _inv_c(old, syncs[current + 1], current)
            duplicate = r + 1 < n and old is original[r + 1]
            promote = is_recent and separated_prev and separated_next
            if promote:
                replacement = old
            skip = duplicate or not separated_prev
            if promote or skip:
                r += 1
            if not (skip and r < current):
                break
        if _inv_b(syncs[previous], syncs[current], previous, current):
            break  # B holds here, hence for every later slot
        syncs[current] = replacement
