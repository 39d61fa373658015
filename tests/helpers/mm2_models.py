"""MM2's reference models, for tests only: what MM2 itself would do, to compare our offsets with.

* :class:`Mm2SyncRules`: MM2's own OffsetSync emission rules (OffsetSyncWriter,
  docs/mm2-reference.md#when-mm2-writes-an-offset-sync).
* :class:`OffsetSyncStore`: MM2's conservative translation from point syncs
  (docs/mm2-reference.md#translating-an-offset).

Pure logic: no Kafka, no Spark. Offsets are Kafka offsets (>= 0).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from mirror_lib.errors import ConfigError
from mirror_lib.offsets.segments import SyncPoint

SYNCS_PER_PARTITION = 64
"""Syncs kept per upstream partition by :class:`OffsetSyncStore` (one per bit of a long)."""


class Mm2SyncRules:
    """MM2's per-partition OffsetSyncWriter decisions (Kafka 3.7+).

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
        """Apply one OffsetSync record (the store's update)."""
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
        """translateDownstream: None before start or without syncs, -1 if too old, else at most sync
        + 1."""
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
