"""Tests of mirror_lib.offsets.segments: segments (docs/design.md#d4-exact-offset-mapping),
MM2 emission rules (docs/mm2-reference.md#when-mm2-writes-an-offset-sync) and MM2's
OffsetSyncStore translation (docs/mm2-reference.md#translating-an-offset, and MM2's
OffsetSyncStoreTest)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror_lib.errors import ConfigError
from mirror_lib.offsets.segments import (
    Segment,
    SegmentIndex,
    SegmentTracker,
    SyncPoint,
    mm2_compatible_points,
    segment_syncs,
    translate_exact,
)
from tests.helpers.mm2_models import SYNCS_PER_PARTITION, Mm2SyncRules, OffsetSyncStore

TP = ("topic1", 2)

# --- Record sequences with random gaps on either side -----------------------------------------

STEP = st.one_of(st.just(1), st.just(1), st.integers(min_value=2, max_value=6))
RECORDS = st.builds(
    lambda u0, d0, steps: _records(u0, d0, steps),
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=0, max_value=40),
    st.lists(st.tuples(STEP, STEP), max_size=150),
)


def _records(u0: int, d0: int, steps: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = [(u0, d0)]
    for du, dd in steps:
        out.append((out[-1][0] + du, out[-1][1] + dd))
    return out


def _tracked(records: list[tuple[int, int]]) -> list[Segment]:
    tracker = SegmentTracker()
    for u, d in records:
        tracker.add(u, d)
    return tracker.close()


def _expected(records: list[tuple[int, int]], upstream: int) -> int:
    """Brute force: downstream offset of the first record with upstream >= U, else last + 1."""
    return next((d for u, d in records if u >= upstream), records[-1][1] + 1)


# --- Segment and SegmentTracker -----------------------------------------------------------------


def test_segment_validation() -> None:
    assert Segment(5, 9, 10, 14).count == 5
    assert Segment(5, 9, 10, 14).delta == 5
    for bad in [(5, 4, 10, 9), (5, 9, 10, 13), (-1, 0, 0, 1), (0, 1, -2, -1)]:
        with pytest.raises(ConfigError):
            Segment(*bad)


def test_tracker_gaps_on_either_side() -> None:
    tracker = SegmentTracker()
    for u, d in [(10, 0), (11, 1), (12, 2), (14, 3), (15, 4), (16, 6), (17, 7), (18, 2), (19, 3)]:
        tracker.add(u, d)
    # upstream gap (12->14), downstream gap (4->6, a marker), downstream decreasing (7->2)
    assert tracker.segments() == [
        Segment(10, 12, 0, 2),
        Segment(14, 15, 3, 4),
        Segment(16, 17, 6, 7),
        Segment(18, 19, 2, 3),
    ]
    tracker.add(15, 4)  # upstream rewind
    assert tracker.segments()[-1] == Segment(15, 15, 4, 4)
    assert len(tracker.close()) == 5
    assert tracker.segments() == []
    tracker.add(20, 5)  # after close a new segment starts even if contiguous
    assert tracker.close() == [Segment(20, 20, 5, 5)]


def test_tracker_add_run_and_errors() -> None:
    tracker = SegmentTracker()
    tracker.add_run(0, 100, 100_000)
    tracker.add_run(100_000, 100_000 + 100, 5)
    tracker.add_run(7, 7, 0)
    tracker.add(100_005, 100_106)
    assert tracker.segments() == [
        Segment(0, 100_004, 100, 100_104),
        Segment(100_005, 100_005, 100_106, 100_106),  # downstream gap (a marker at 100_105)
    ]
    with pytest.raises(ConfigError):
        tracker.add_run(0, 0, -1)
    with pytest.raises(ConfigError):
        SegmentTracker().add(-1, 0)


@given(RECORDS, st.data())
def test_tracker_add_run_matches_add(records: list[tuple[int, int]], data: st.DataObject) -> None:
    tracker = SegmentTracker()
    i = 0
    while i < len(records):  # feed maximal-or-shorter consecutive runs through add_run
        n = 1
        while (
            i + n < len(records)
            and records[i + n] == (records[i][0] + n, records[i][1] + n)
            and data.draw(st.booleans())
        ):
            n += 1
        tracker.add_run(records[i][0], records[i][1], n)
        i += n
    segments = _tracked(records)
    assert tracker.close() == segments
    assert sum(s.count for s in segments) == len(records)
    for a, b in pairwise(segments):  # maximal: a gap between neighbours
        assert (b.upstream_start, b.downstream_start) != (a.upstream_end + 1, a.downstream_end + 1)


# --- Sync points -------------------------------------------------------------------------------


def test_segment_syncs() -> None:
    segments = [Segment(0, 9, 0, 9), Segment(12, 12, 10, 10), Segment(13, 20, 12, 19)]
    assert segment_syncs(segments) == [(0, 0), (9, 9), (12, 10), (13, 12), (20, 19)]
    assert segment_syncs([]) == []


def test_mm2_compatible_points() -> None:
    seg = Segment(1000, 1249, 0, 249)
    assert mm2_compatible_points(seg, 100) == [(1000, 0), (1101, 101), (1202, 202), (1249, 249)]
    assert mm2_compatible_points(Segment(5, 5, 7, 7), 100) == [SyncPoint(5, 7)]
    assert mm2_compatible_points(Segment(0, 3, 0, 3), 0) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert mm2_compatible_points(Segment(0, 202, 0, 202), 100) == [(0, 0), (101, 101), (202, 202)]
    with pytest.raises(ConfigError):
        mm2_compatible_points(seg, -1)


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(1, 600), st.integers(0, 150))
def test_mm2_compatible_points_match_mm2_writer(u0: int, d0: int, n: int, lag: int) -> None:
    """Same points as MM2's writer for the same run: its immediate syncs plus the flushed one."""
    rules = Mm2SyncRules(lag)
    due = [p for k in range(n) if (p := rules.on_record(u0 + k, d0 + k)) is not None]
    flushed = rules.flush()
    points = mm2_compatible_points(Segment(u0, u0 + n - 1, d0, d0 + n - 1), lag)
    assert points == due + flushed
    # A real MM2 reader that has seen the points up to a group's position c re-delivers fewer
    # than offset.lag.max records (none when it is 0), as with MM2's own writer.
    store = OffsetSyncStore()
    store.start()
    fed = 0
    for k in range(n + 1):
        while fed < len(points) and points[fed].upstream <= u0 + k:
            store.handle_sync(TP, *points[fed])
            fed += 1
        translated = store.translate_downstream(TP, u0 + k)
        assert translated is not None
        assert d0 + k - max(lag - 1, 0) <= translated <= d0 + k
    # With every point seen, older positions translate coarser but never skip a record.
    for k in range(n + 1):
        translated = store.translate_downstream(TP, u0 + k)
        assert translated is not None
        assert translated <= d0 + k


# --- MM2's emission rules ----------------------------------------------------------------------


def test_mm2_rule_1_first_record_of_lifetime() -> None:
    rules = Mm2SyncRules()
    assert rules.on_record(500, 7) == (500, 7)
    assert rules.on_record(501, 8) is None
    assert rules.delayed == (501, 8)


def test_mm2_rule_2_staleness_with_plus_one() -> None:
    rules = Mm2SyncRules(offset_lag_max=10)
    assert rules.on_record(0, 0) == (0, 0)
    for k in range(1, 11):  # d - (0 + 1) < 10
        assert rules.on_record(k, k) is None
    assert rules.on_record(11, 11) == (11, 11)  # 11 - 1 >= 10
    assert rules.delayed is None  # a due sync drops the delayed one
    zero = Mm2SyncRules(offset_lag_max=0)
    assert [zero.on_record(k, k) for k in range(3)] == [(0, 0), (1, 1), (2, 2)]


def test_mm2_rule_2_counts_downstream_distance() -> None:
    rules = Mm2SyncRules(offset_lag_max=10)
    rules.on_record(0, 0)
    assert rules.on_record(1, 5) is None  # downstream markers alone do not force a sync ...
    assert rules.on_record(2, 11) == (2, 11)  # ... until the downstream distance is too stale


def test_mm2_rule_3_upstream_gap() -> None:
    rules = Mm2SyncRules()
    rules.on_record(0, 0)
    assert rules.on_record(1, 1) is None
    assert rules.on_record(5, 2) == (5, 2)  # compaction / markers upstream
    assert rules.on_record(6, 3) is None
    assert rules.on_record(6, 4) == (6, 4)  # upstream did not advance (a restart, a seek)
    assert rules.on_record(3, 5) == (3, 5)  # upstream rewound


def test_mm2_rule_4_downstream_truncated() -> None:
    rules = Mm2SyncRules()
    rules.on_record(0, 50)
    assert rules.on_record(1, 51) is None
    assert rules.on_record(2, 0) == (2, 0)


def test_mm2_flush_promotes_latest_delayed_only() -> None:
    rules = Mm2SyncRules()
    assert rules.flush() == []
    rules.on_record(0, 0)
    assert rules.flush() == []  # the due sync was sent, nothing delayed
    rules.on_record(1, 1)
    rules.on_record(2, 2)
    assert rules.flush() == [(2, 2)]  # latest wins
    assert rules.flush() == []
    # promotion does not reset the staleness rule
    for k in range(3, 101):
        assert rules.on_record(k, k) is None
    assert rules.on_record(101, 101) == (101, 101)
    with pytest.raises(ConfigError):
        Mm2SyncRules(-1)


# --- Exact translation from segments -----------------------------------------------------------


@given(RECORDS)
def test_translate_exact_every_offset(records: list[tuple[int, int]]) -> None:
    segments = _tracked(records)
    index = SegmentIndex(segments)
    for u, d in records:  # every replicated record translates to itself
        assert index.translate(u) == d
    for upstream in range(0, records[-1][0] + 3):  # gaps, before all, past the end
        assert index.translate(upstream) == _expected(records, upstream)
    assert translate_exact(segments, records[-1][0] + 1) == records[-1][1] + 1
    assert translate_exact(segments, 10**12) == records[-1][1] + 1


@given(RECORDS, st.data())
def test_translate_exact_unsorted_duplicated_overlapping(
    records: list[tuple[int, int]], data: st.DataObject
) -> None:
    """A replay reports the same data again, possibly cut differently and in another order."""
    pieces: list[Segment] = []
    for s in _tracked(records):
        pieces.append(s)
        if s.count > 1 and data.draw(st.booleans()):  # two overlapping or adjacent pieces
            m1 = data.draw(st.integers(s.upstream_start + 1, s.upstream_end))
            m2 = data.draw(st.integers(m1 - 1, s.upstream_end))
            pieces.append(Segment(s.upstream_start, m2, s.downstream_start, m2 + s.delta))
            pieces.append(Segment(m1, s.upstream_end, m1 + s.delta, s.downstream_end))
    pieces += data.draw(st.lists(st.sampled_from(pieces), max_size=5))
    shuffled = data.draw(st.permutations(pieces))
    index = SegmentIndex(shuffled)
    assert sum(s.count for s in index.segments) == len(records)  # deduplicated
    for upstream in range(0, records[-1][0] + 3):
        assert index.translate(upstream) == _expected(records, upstream)


def test_translate_exact_basic_cases() -> None:
    segments = [Segment(20, 29, 100, 109), Segment(0, 9, 50, 59), Segment(10, 14, 70, 74)]
    assert translate_exact([], 5) is None
    assert translate_exact(segments, 0) == 50
    assert translate_exact(segments, 12) == 72
    assert translate_exact(segments, 17) == 100  # gap upstream: next segment's start
    assert translate_exact(segments, 29) == 109
    assert translate_exact(segments, 30) == 110  # past the end: last + 1
    assert translate_exact([Segment(100, 199, 0, 99)], 3) == 0  # before all segments


def test_translate_exact_recreated_topic_only_latest_generation() -> None:
    old = [Segment(0, 99, 0, 99), Segment(102, 999, 100, 997)]
    # The target topic was re-created; replication resumed at upstream 500 into the new log.
    new = [Segment(500, 599, 0, 99), Segment(601, 700, 100, 199)]
    index = SegmentIndex([*old, *new])
    assert index.segments == tuple(new)
    assert index.translate(50) == 0  # older records are not in the new log: its first record
    assert index.translate(550) == 50
    assert index.translate(600) == 100
    assert index.translate(800) == 200  # never the old generation's 798
    # Also when the new generation re-replicates from upstream 0 with the same first offsets:
    # the identical prefix merges, the first contradiction drops the rest of the old generation.
    index = SegmentIndex([*old, Segment(0, 49, 0, 49), Segment(52, 60, 50, 58)])
    assert index.segments == (Segment(0, 49, 0, 49), Segment(52, 60, 50, 58))
    assert index.translate(500) == 59


def test_translate_exact_truncation_keeps_older_records() -> None:
    # Downstream truncated back to 150 (unclean leader election), replication resumed at 150.
    index = SegmentIndex(
        [Segment(0, 99, 0, 99), Segment(100, 199, 100, 199), Segment(180, 220, 150, 190)]
    )
    assert index.segments == (
        Segment(0, 99, 0, 99),
        Segment(100, 149, 100, 149),
        Segment(180, 220, 150, 190),
    )
    assert index.translate(120) == 120
    assert index.translate(160) == 150  # records 150..179 were lost downstream: next one
    assert index.translate(221) == 191


def test_translate_exact_replay_latest_copy_wins() -> None:
    # A micro-batch replay wrote upstream 50..149 again at downstream 150..249.
    index = SegmentIndex(
        [Segment(0, 99, 0, 99), Segment(100, 149, 100, 149), Segment(50, 149, 150, 249)]
    )
    assert index.segments == (Segment(0, 49, 0, 49), Segment(50, 149, 150, 249))
    assert index.translate(40) == 40
    assert index.translate(60) == 160  # the latest copy: no duplicate, no skipped record
    assert index.translate(150) == 250


# --- OffsetSyncStore ---------------------------------------------------------------------------


def _started_store() -> OffsetSyncStore:
    store = OffsetSyncStore()
    store.start()
    return store


def _wrap(x: int) -> int:
    return ((x + 2**63) % 2**64) - 2**63


def _assert_invariants(store: OffsetSyncStore) -> None:
    """Invariants B and C for every pair of distinct slots (Java long arithmetic)."""
    syncs = store.syncs(TP)
    assert len(syncs) == SYNCS_PER_PARTITION
    for j in range(SYNCS_PER_PARTITION):
        for i in range(j):
            ju, iu = syncs[j].upstream, syncs[i].upstream
            if ju == iu:
                continue
            lower = _wrap(ju + (1 << max(i - 2, 0)))
            if lower >= 0:
                assert iu >= lower, f"invariant C({i},{j}) {[s.upstream for s in syncs]}"
            upper = _wrap(ju + _wrap(1 << j) - (1 << i))
            if upper >= 0:
                assert iu <= upper, f"invariant B({i},{j}) {[s.upstream for s in syncs]}"


def _distinct(store: OffsetSyncStore) -> int:
    syncs = store.syncs(TP)
    return 1 + sum(syncs[i] is not syncs[i - 1] for i in range(1, len(syncs)))


def test_offset_translation_examples() -> None:
    store = _started_store()
    store.handle_sync(TP, 100, 200)
    assert store.translate_downstream(TP, 150) == 201
    assert store.translate_downstream(TP, 100) == 200
    assert store.translate_downstream(TP, 5) == -1  # too old
    store.handle_sync(TP, 150, 251)
    assert store.translate_downstream(TP, 150) == 251
    assert store.translate_downstream(TP, 5) == -1
    store.handle_sync(TP, 200, 10)  # downstream reset
    assert store.translate_downstream(TP, 200) == 10
    store.handle_sync(TP, 20, 20)  # upstream rewind clears everything
    assert store.translate_downstream(TP, 20) == 20
    assert set(store.syncs(TP)) == {(20, 20)}
    assert store.translate_downstream(("other", 0), 20) is None  # no syncs for the partition


def test_no_translation_before_start() -> None:
    store = OffsetSyncStore()
    assert not store.started
    assert [store.translate_downstream(TP, c) for c in (0, 100, 200)] == [None, None, None]
    store.handle_sync(TP, 100, 200)
    assert [store.translate_downstream(TP, c) for c in (0, 100, 200)] == [None, None, None]
    store.start()
    assert [store.translate_downstream(TP, c) for c in (0, 100, 200)] == [-1, 200, 201]
    assert _started_store().translate_downstream(TP, 0) is None


def _assert_sparse(store: OffsetSyncStore, sync: int, previous: int) -> None:
    assert store.translate_downstream(TP, sync - 1) == (-1 if previous == -1 else previous + 1)
    assert store.translate_downstream(TP, sync) == sync
    assert store.translate_downstream(TP, sync + 1) == sync + 1
    assert store.translate_downstream(TP, sync + 2) == sync + 1


def test_past_offset_translation_sparse_history() -> None:
    store = OffsetSyncStore(initialization_must_read_to_end=True)
    for offset in range(0, 1001, 10):  # initial read: only the last sync is kept
        store.handle_sync(TP, offset, offset)
        _assert_invariants(store)
    store.start()
    _assert_sparse(store, 1000, -1)
    for offset in range(1010, 10001, 10):
        store.handle_sync(TP, offset, offset)
        _assert_invariants(store)
    retained = [1000, 4840, 6760, 8680, 9160, 9640, 9880, 9940, 9970, 9990, 10000]
    assert sorted({s.upstream for s in store.syncs(TP)}) == retained
    _assert_sparse(store, 1000, -1)  # invariant D: the last startup sync is still stored
    for previous, sync in pairwise(retained):
        _assert_sparse(store, sync, previous)
    store.handle_sync(TP, 1500, 11000)  # upstream rewind
    _assert_invariants(store)
    assert store.translate_downstream(TP, 1499) == -1
    assert store.translate_downstream(TP, 1500) == 11000
    assert store.translate_downstream(TP, 2000) == 11001


def test_past_offset_translation_keeping_startup_syncs() -> None:
    """initialization_must_read_to_end=False (checkpoints loaded fine): startup syncs are kept."""
    store = OffsetSyncStore(initialization_must_read_to_end=False)
    for offset in range(0, 10001, 10):
        if offset == 1010:
            store.start()
        store.handle_sync(TP, offset, offset)
        _assert_invariants(store)
    retained = [0, 3840, 7680, 8640, 9120, 9600, 9840, 9900, 9960, 9990, 10000]
    assert sorted({s.upstream for s in store.syncs(TP)}) == retained
    assert store.syncs(TP)[-1] == (0, 0)  # invariant D
    for previous, sync in pairwise(retained):
        _assert_sparse(store, sync, previous)


def test_keep_most_distinct_syncs_fixed_steps() -> None:
    """MM2's OffsetSyncStoreTest with its steps 1, 3, 7, ... (fewer iterations than MM2's
    1,000,000)."""
    iterations = 20_000
    step = 1
    while step < 2**62 // iterations:
        store = _started_store()
        last = 1
        for offset in range(0, iterations + 1, step):
            store.handle_sync(TP, offset, offset)
            assert store.syncs(TP)[0].upstream == offset  # invariant A
            assert store.syncs(TP)[-1].upstream == 0  # invariant D
            count = _distinct(store)
            assert count - last >= -1
            last = count
        step = (step << 1) + 1


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**40), st.integers(1, 2**34), st.integers(1, 400))
def test_keep_most_distinct_syncs_property(base: int, step: int, count: int) -> None:
    """MM2's OffsetSyncStoreTest: each new sync removes at most one distinct stored sync (fixed sync
    spacing, as in MM2's test); slot 0 holds the newest sync and slot 63 the earliest; B and C
    hold."""
    store = _started_store()
    first = None
    last = 1
    for offset in range(base, base + count * step, step):
        store.handle_sync(TP, offset, offset + 7)
        syncs = store.syncs(TP)
        first = first or syncs[0]
        assert syncs[0] == (offset, offset + 7)
        assert syncs[-1] is first
        distinct = _distinct(store)
        assert distinct - last >= -1
        last = distinct
        _assert_invariants(store)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**40),
    st.lists(
        st.one_of(st.integers(1, 20), st.integers(1, 2000), st.integers(1, 2**32)),
        min_size=1,
        max_size=150,
    ),
)
def test_sync_store_invariants_variable_spacing(base: int, steps: list[int]) -> None:
    """With variable spacing a long jump may expire several syncs (invariant B forces it), but
    invariants A-D hold and translation stays monotonic and never skips a record."""
    store = _started_store()
    store.handle_sync(TP, base, base)
    first = store.syncs(TP)[0]
    offset = base
    for step in steps:
        offset += step
        store.handle_sync(TP, offset, offset + 7)
        syncs = store.syncs(TP)
        assert syncs[0] == (offset, offset + 7)
        assert syncs[-1] is first
        _assert_invariants(store)
    queries = range(base - 1, offset + 2, max(1, (offset - base) // 50))
    translations = [store.translate_downstream(TP, c) for c in queries]
    assert translations == sorted(translations)  # monotonic for a fixed state
    for c, t in zip(queries, translations, strict=True):
        assert t is not None
        assert t == -1 if c < base else t <= c + 7


@given(RECORDS, st.data())
def test_drop_below_keeps_every_translation_at_or_above(
    records: list[tuple[int, int]], data: st.DataObject
) -> None:
    segments = _tracked(records)
    index = SegmentIndex(segments)
    floor = data.draw(st.integers(0, records[-1][0] + 3))
    dropped = index.drop_below(floor)
    assert dropped == max(0, min(sum(s.upstream_end < floor for s in segments), len(segments) - 1))
    assert len(index) == len(segments) - dropped
    assert index.last == segments[-1]  # kept even when it ends below the floor
    for upstream in range(floor, records[-1][0] + 3):
        assert index.translate(upstream) == _expected(records, upstream)


def test_drop_below_an_empty_index_and_add_reports_contradictions() -> None:
    index = SegmentIndex()
    assert index.drop_below(10) == 0
    assert index.last is None
    assert index.add(Segment(0, 9, 0, 9)) is False
    assert index.add(Segment(5, 12, 5, 12)) is False  # the same mapping, merged
    assert index.add(Segment(14, 20, 14, 20)) is False  # a gap on both sides
    assert index.add(Segment(0, 4, 30, 34)) is True  # a replay: the latest copy wins
    assert index.segments == (Segment(0, 4, 30, 34),)


def test_the_newest_write_below_everything_known_is_a_new_log() -> None:
    """A reader in write order that dropped old segments still sees a re-created topic."""
    index = SegmentIndex([Segment(990, 999, 1089, 1098)])
    assert index.add(Segment(0, 99, 0, 99), newest=True) is True
    assert index.segments == (Segment(0, 99, 0, 99),)
    assert index.translate(500) == 100
    index = SegmentIndex([Segment(990, 999, 1089, 1098)])
    assert index.add(Segment(0, 99, 0, 99)) is False  # in any order: an older piece of history
    assert len(index) == 2
    index = SegmentIndex([Segment(0, 9, 0, 9)])
    assert index.add(Segment(10, 19, 11, 20), newest=True) is False  # the next transaction
    assert index.add(Segment(10, 19, 11, 20), newest=True) is False  # read twice: the same
    assert len(index) == 2
