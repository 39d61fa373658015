"""Record-by-record comparison through segments: gaps, extras, missing and changed records."""

from __future__ import annotations

from mirror_lib.offsets.record_compare import (
    STRAY_RANGES_MAX,
    OffsetMap,
    Rec,
    SkippedRanges,
    compare_ranges,
    encode_record,
)
from mirror_lib.offsets.segments import Segment
from mirror_lib.replication.migration.verify import fits


def rec(offset: int, n: int, **change) -> Rec:
    base = Rec(offset, f"k{n}".encode(), f"v{n}".encode(), (("h", str(n).encode()),), 1000 + n)
    return base._replace(**change)


# Source offsets 0-4 and 6-9 (5: a transaction marker), copied to 0-4 and 10-13 (5-9: earlier
# markers and an aborted run on the target).
SEGMENTS = [Segment(0, 4, 0, 4), Segment(6, 9, 10, 13)]
SOURCE = [rec(u, u) for u in (*range(5), *range(6, 10))]
TARGET = [rec(d, u) for u, d in [*((u, u) for u in range(5)), *((u, u + 4) for u in range(6, 10))]]


def run(source, target, u_from=0, d_from=0, seed="", segments=SEGMENTS, skipped=None):
    return compare_ranges(
        OffsetMap(segments), source, target, upstream_from=u_from, downstream_from=d_from,
        checksum_seed=seed, skipped=skipped,
    )  # fmt: skip


def test_identical_copies_with_gaps_on_both_sides_match():
    out = run(SOURCE, TARGET)
    assert out.difference is None
    assert (out.records, out.upstream_next, out.downstream_next) == (9, 10, 14)
    assert out.checksum == run(SOURCE, TARGET).checksum


def test_checksum_chains_across_runs_like_one_run():
    whole = run(SOURCE, TARGET)
    first = run(SOURCE[:5], TARGET[:5], segments=SEGMENTS[:1])  # verified before 6-9 were copied
    assert first.difference is None and (first.upstream_next, first.downstream_next) == (5, 5)
    rest = run(SOURCE[5:], TARGET[5:], first.upstream_next, first.downstream_next, first.checksum)
    assert rest.difference is None and rest.records == 4
    assert rest.checksum != whole.checksum  # chained: sha256(previous checksum + records)
    assert rest.checksum == run(SOURCE[5:], TARGET[5:], 5, 5, first.checksum).checksum


def test_changed_value_is_reported_at_both_offsets():
    target = [*TARGET[:6], TARGET[6]._replace(value=b"tampered"), *TARGET[7:]]
    out = run(SOURCE, target)
    assert out.difference is not None
    u, d, why = out.difference
    assert (u, d) == (7, 11)
    assert "value b'v7' on source, b'tampered' on target" in why
    assert (out.records, out.upstream_next, out.downstream_next) == (6, 7, 11)


def strays(out) -> tuple[int, list[tuple[int, int]], str]:
    return out.strays.count, out.strays.ranges, out.strays.offsets()


def test_a_record_in_a_gap_between_segments_is_stray_and_the_walk_goes_on():
    target = [*TARGET[:5], rec(7, 99), rec(8, 98), *TARGET[5:]]
    out = run(SOURCE, target)
    assert out.difference is None
    assert strays(out) == (2, [(7, 8)], "7-8")
    assert (out.records, out.upstream_next, out.downstream_next) == (9, 10, 14)
    assert out.checksum == run(SOURCE, TARGET).checksum  # strays are not in it


def test_a_record_before_the_first_segment_is_stray():
    segments = [Segment(0, 4, 2, 6)]  # 0-1: produced to the target before the first copy
    target = [rec(0, 90), rec(1, 91), *(rec(u + 2, u) for u in range(5))]
    out = run(SOURCE[:5], target, segments=segments)
    assert out.difference is None and out.records == 5
    assert strays(out) == (2, [(0, 1)], "0-1")


def test_records_after_the_last_copied_one_are_stray():
    out = run(SOURCE, [*TARGET, rec(14, 50), rec(16, 51)])  # 15: a marker of their transaction
    assert out.difference is None
    assert strays(out) == (2, [(14, 16)], "14-16")
    assert (out.records, out.upstream_next, out.downstream_next) == (9, 10, 14)


def test_strays_with_a_copy_between_them_are_separate_ranges():
    segments = [Segment(0, 4, 1, 5), Segment(6, 9, 10, 13)]  # before, between and after them
    target = [rec(0, 90), *(rec(u + 1, u) for u in range(5)), rec(7, 99)]
    target += [*(rec(u + 4, u) for u in range(6, 10)), rec(20, 50)]
    out = run(SOURCE, target, segments=segments)
    assert out.difference is None and out.records == 9
    assert strays(out) == (3, [(0, 0), (7, 7), (20, 20)], "0, 7, 20")


def test_only_the_first_ranges_are_listed_and_every_stray_is_counted():
    segments = [Segment(u, u, 2 * u + 1, 2 * u + 1) for u in range(30)]  # strays at 0, 2, ..
    source = [rec(u, u) for u in range(30)]
    target = [rec(d, d // 2 if d % 2 else 100 + d) for d in range(60)]
    out = run(source, target, segments=segments)
    assert out.difference is None and out.records == 30
    count, ranges, text = strays(out)
    assert (count, len(ranges), ranges[-1]) == (30, STRAY_RANGES_MAX, (38, 38))
    assert text.startswith("0, 2, 4, ") and text.endswith(", 36, 38, ...")


def test_copies_before_the_verified_point_are_passed_over_and_strays_there_found():
    target = [*TARGET[:5], rec(7, 99), *TARGET[5:]]  # read from 0, resumed at 5/5
    out = run(SOURCE[5:], target, u_from=5, d_from=5)
    assert out.difference is None and out.records == 4
    assert strays(out) == (1, [(7, 7)], "7")
    assert strays(run(SOURCE[5:], TARGET, u_from=5, d_from=5))[0] == 0


def test_a_difference_stops_the_walk_with_the_strays_seen_before_it():
    target = [*TARGET[:5], rec(7, 99), TARGET[5], TARGET[6]._replace(value=b"x"), *TARGET[7:]]
    out = run(SOURCE, target)
    assert out.difference[:2] == (7, 11)
    assert strays(out) == (1, [(7, 7)], "7")


def test_record_missing_on_the_target():
    target = [t for t in TARGET if t.offset != 12]
    u, d, why = run(SOURCE, target).difference
    assert (u, d) == (8, 12)
    assert why.startswith("missing on the target")


def test_source_record_that_no_segment_covers_was_never_copied():
    source = [*SOURCE[:5], rec(5, 5), *SOURCE[5:]]
    u, d, why = run(source, TARGET).difference
    assert (u, d) == (5, 10)
    assert "never copied" in why


def test_source_records_inside_a_skip_events_range_are_counted_not_compared():
    source = [*SOURCE[:5], rec(5, 5), *SOURCE[5:]]  # 5: skipped on purpose, not a marker
    out = run(source, TARGET, skipped=SkippedRanges([(5, 5)]))
    assert out.difference is None
    assert (out.records, out.skipped, out.upstream_next, out.downstream_next) == (9, 1, 10, 14)
    assert out.checksum == run(SOURCE, TARGET).checksum  # skipped records are not in it
    u, _d, why = run(source, TARGET, skipped=SkippedRanges([(6, 9)])).difference
    assert (u, "never copied" in why) == (5, True)  # only the event's own range is excused


def test_a_copied_record_inside_a_skip_range_is_still_compared():
    target = [*TARGET[:6], TARGET[6]._replace(value=b"tampered"), *TARGET[7:]]
    u, _d, why = run(SOURCE, target, skipped=SkippedRanges([(0, 9)])).difference
    assert u == 7 and "tampered" in why


def test_skipped_ranges_hold_their_offsets_only():
    ranges = SkippedRanges([[20, 29], (3, 3)])
    assert [o in ranges for o in (2, 3, 4, 19, 20, 29, 30)] == [0, 1, 0, 0, 1, 1, 0]


def test_record_gone_from_the_source_after_the_copy():
    source = [s for s in SOURCE if s.offset != 2]
    u, d, why = run(source, TARGET).difference
    assert (u, d) == (2, 2)
    assert "source no longer holds offset 2" in why


def test_headers_null_and_empty_values_are_distinguished():
    a = rec(0, 1, value=None, headers=(("h", None),))
    assert encode_record(a) != encode_record(a._replace(value=b""))
    assert encode_record(a) != encode_record(a._replace(headers=(("h", b""),)))


def test_stored_points_fit_only_the_segments_they_came_from():
    offsets = OffsetMap(SEGMENTS)
    assert fits(offsets, 0, 0)
    assert fits(offsets, 5, 5)  # after offset 4 -> 4
    assert fits(offsets, 10, 14)  # the replicated end
    assert not fits(offsets, 10, 13)
    assert not fits(offsets, 6, 6)  # offset 5 was not copied
    assert not fits(OffsetMap([Segment(0, 9, 100, 109)]), 10, 14)  # a re-created target topic
