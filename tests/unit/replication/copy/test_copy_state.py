"""The copier's segments from two delivery reports per transaction (pure logic, issue 11), and
its latency buckets."""

from __future__ import annotations

import pytest

from mirror_lib.offsets.segments import Segment
from mirror_lib.replication.copy.copy_state import (
    LATENCY_BUCKETS_MS,
    NO_END,
    Interleaved,
    PartState,
    bucket_counts,
    exact_segments,
)


def part_with(runs: list[tuple[int, int]], n: int, d_first: int, d_last: int) -> PartState:
    part = PartState("t", 0, "A.t", 0, NO_END)
    part.runs, part.n, part.d_first, part.d_last = runs, n, d_first, d_last
    return part


def test_upstream_runs_map_onto_contiguous_downstream_offsets():
    # upstream 0-2, then a gap (markers/aborted records), then 5-7; downstream 100-105
    part = part_with([(0, 0), (5, 3)], 6, 100, 105)
    assert part.segments(exact=False) == [Segment(0, 2, 100, 102), Segment(5, 7, 103, 105)]


def test_one_record_transaction_is_one_segment():
    assert part_with([(42, 0)], 1, 7, 7).segments(exact=False) == [Segment(42, 42, 7, 7)]


def test_a_downstream_range_longer_than_the_records_means_another_writer():
    with pytest.raises(Interleaved):
        part_with([(0, 0)], 3, 10, 13).segments(exact=False)  # 4 offsets for 3 records


def test_exact_reports_split_on_a_gap_on_either_side():
    us, ds = [0, 1, 2, 5, 6, 7], [10, 11, 13, 14, 15, 16]
    assert exact_segments(us, ds) == [
        Segment(0, 1, 10, 11),
        Segment(2, 2, 13, 13),
        Segment(5, 7, 14, 16),
    ]


def test_bucket_counts_put_a_bound_in_its_own_bucket_and_count_the_overflow():
    counts = bucket_counts([0, 5, 5.1, 300_000, 300_001, -3])
    assert len(counts) == len(LATENCY_BUCKETS_MS) + 1
    assert counts[0] == 3  # -3, 0 and 5 (le 5 ms)
    assert counts[1] == 1  # 5.1
    assert counts[-2] == 1 and counts[-1] == 1
    assert bucket_counts([]) == [0] * (len(LATENCY_BUCKETS_MS) + 1)
