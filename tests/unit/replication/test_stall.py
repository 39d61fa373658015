"""StallWatch: a --once partition that does not move for some slices and seconds is reported."""

from __future__ import annotations

from mirror_lib.replication.planning.slices import flows_short_of
from mirror_lib.replication.planning.stall import StallWatch, idle_slice_text, stall_text

A0, A1 = ("a", 0), ("a", 1)
ENDS = {A0: 10, A1: 20}


def test_a_partition_that_does_not_move_is_reported_after_slices_and_seconds() -> None:
    watch = StallWatch(limit_s=60, min_slices=3)
    assert watch.observe({A0: 4, A1: 0}, ENDS, now=0) == []
    assert watch.observe({A0: 4, A1: 5}, ENDS, now=30) == []  # A1 moved
    assert watch.observe({A0: 4, A1: 9}, ENDS, now=50) == []  # A0: 2 slices, 50 s
    assert watch.observe({A0: 4, A1: 12}, ENDS, now=59) == []  # 3 slices, 59 s: not yet
    (stall,) = watch.observe({A0: 4, A1: 15}, ENDS, now=61)
    assert (stall.tp, stall.position, stall.end, stall.slices) == (A0, 4, 10, 4)
    assert stall.seconds == 61 and str(stall) == "a-0 at 4 of 10"


def test_many_quick_slices_without_the_seconds_are_no_stall() -> None:
    watch = StallWatch(limit_s=60, min_slices=3)
    assert not any(watch.observe({A0: 4}, ENDS, now=t) for t in range(0, 50, 5))


def test_long_slices_need_the_slice_count_too() -> None:
    watch = StallWatch(limit_s=60, min_slices=3)
    assert watch.observe({A0: 4}, ENDS, now=0) == []
    assert watch.observe({A0: 4}, ENDS, now=100) == []  # one slice of 100 s ended early
    assert watch.observe({A0: 4}, ENDS, now=200) == []
    assert len(watch.observe({A0: 4}, ENDS, now=300)) == 1


def test_moving_resets_and_a_finished_partition_is_forgotten() -> None:
    watch = StallWatch(limit_s=10, min_slices=1)
    watch.observe({A0: 4, A1: 0}, ENDS, now=0)
    assert [s.tp for s in watch.observe({A0: 4, A1: 0}, ENDS, now=20)] == [A0, A1]
    assert watch.observe({A0: 5}, ENDS, now=40) == []  # A0 moved, A1 finished
    assert watch.observe({A0: 5, A1: 0}, ENDS, now=45) == []  # A1 is new again


def test_no_limit_never_reports() -> None:
    watch = StallWatch(limit_s=None, min_slices=0)
    assert not any(watch.observe({A0: 4}, ENDS, now=t * 1000) for t in range(5))


def test_the_text_names_the_flow_the_partitions_and_the_setting() -> None:
    watch = StallWatch(limit_s=1, min_slices=1)
    watch.observe({A0: 4, A1: 0}, ENDS, now=0)
    text = stall_text("flow A->B", "target cluster B (bootstrap b:9092)", watch.observe(
        {A0: 4, A1: 0}, ENDS, now=125
    ))  # fmt: skip
    assert text.startswith("flow A->B: --once made no progress for 125s over 1 slices")
    assert "a-0 at 4 of 10, a-1 at 0 of 20" in text
    assert "target cluster B (bootstrap b:9092)" in text
    assert "mirror.outage.max.seconds" in text


def test_a_fan_out_stall_names_the_flows_whose_own_ledger_did_not_move() -> None:
    """The group's slowest positions stalled on a-1; only C replicates it (B's ledger has no
    a-1) and B is done on a-0: the error names A->C, not the group's first flow."""
    watch = StallWatch(limit_s=1, min_slices=1)
    watch.observe({A1: 0}, ENDS, now=0)
    stalls = watch.observe({A1: 0}, ENDS, now=5)
    by_flow = {"A->B": {A0: 10}, "A->C": {A0: 10, A1: 0}}
    assert flows_short_of(by_flow, {s.tp: s.end for s in stalls}) == ["A->C"]
    by_flow["A->B"][A1] = 3  # both short of a-1's end
    assert flows_short_of(by_flow, {s.tp: s.end for s in stalls}) == ["A->B", "A->C"]


def test_an_idle_slice_says_where_its_partitions_stand() -> None:
    text = idle_slice_text(1, {A1: 20, A0: 6}, ENDS)
    assert text == (
        "slot 1: this --once slice copied nothing; by the ledger read in the task: "
        "a-0 at 6 of 10, a-1 at 20 of 20"
    )
