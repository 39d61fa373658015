"""`mirror verify`'s view of skip events and stray records: where a task reads, what it says."""

from __future__ import annotations

from mirror_lib.offsets.segments import Segment
from mirror_lib.replication.migration.verify import (
    PartitionVerification,
    VerifyReport,
    format_report,
    plan_task,
)


class Ctx:
    def to_options(self) -> dict[str, str]:
        return {}

    def remote_topic(self, topic: str) -> str:
        return f"A.{topic}"


def test_a_task_carries_only_the_skip_ranges_from_its_start_on():
    previous = {"upstream_to": 50, "downstream_to": 40, "total_records": 40, "checksum": "c"}
    segments = [Segment(0, 9, 0, 9), Segment(40, 49, 30, 39)]
    task = plan_task(Ctx(), "t", 0, segments, (0, 60), previous, [(10, 39), (55, 57)])
    assert (task.upstream_from, task.downstream_from, task.skipped) == (50, 40, [(55, 57)])


# Source 0-9 copied to 2-11 (0-1: strays), then 20-29 to 14-23; the source now starts at 20.
SEGMENTS = [Segment(0, 9, 2, 11), Segment(20, 29, 14, 23)]


def reads(task) -> tuple[int, int, int | None, int]:
    """(verified point upstream, downstream; where the target is read from, to at least)."""
    return (
        task.upstream_from,
        task.downstream_from,
        task.downstream_read_from,
        task.target_end_offset,
    )


def test_a_first_verification_reads_the_target_from_its_start_to_its_end():
    task = plan_task(Ctx(), "t", 0, SEGMENTS, (20, 30), None, target_end=30)
    assert reads(task) == (20, 14, 0, 30)  # 2-11: copies of what the source lost, 0-1: strays


def test_without_the_whole_history_nothing_below_the_oldest_segment_is_read():
    task = plan_task(Ctx(), "t", 0, SEGMENTS, (20, 30), None, target_end=30, whole_history=False)
    assert reads(task) == (20, 14, 2, 30)
    nothing = plan_task(Ctx(), "t", 0, [], (0, 5), None, target_end=30, whole_history=False)
    assert reads(nothing) == (0, 0, 30, 30)
    everything = plan_task(Ctx(), "t", 0, [], (0, 5), None, target_end=30)
    assert reads(everything) == (0, 0, 0, 30)  # no segments at all: no record there is a copy


def test_a_partition_taken_over_from_mm2_is_not_judged_below_the_first_segment():
    """Below the take-over's segment lies MirrorMaker 2's copy, which no segment of ours maps:
    its records are MM2's, not strays."""
    task = plan_task(Ctx(), "t", 0, SEGMENTS, (20, 30), None, target_end=30, taken_over=True)
    assert reads(task) == (20, 14, 2, 30)


def test_a_resumed_verification_reads_the_target_from_its_point_or_the_first_stray():
    point = {"upstream_to": 25, "downstream_to": 19, "total_records": 5, "checksum": "c"}
    assert reads(plan_task(Ctx(), "t", 0, SEGMENTS, (20, 30), point, target_end=30)) == (
        25, 19, 19, 30,
    )  # fmt: skip
    stray = {**point, "status": "stray", "diff_downstream_offset": 1}
    assert reads(plan_task(Ctx(), "t", 0, SEGMENTS, (20, 30), stray, target_end=30))[2] == 1
    kept = plan_task(Ctx(), "t", 0, SEGMENTS, (20, 30), stray, target_end=30, whole_history=False)
    assert reads(kept)[2] == 2
    later = {**stray, "diff_downstream_offset": 28}  # after the point: read from the point
    assert reads(plan_task(Ctx(), "t", 0, SEGMENTS, (20, 30), later, target_end=30))[2] == 19
    different = {**stray, "status": "different"}
    assert reads(plan_task(Ctx(), "t", 0, SEGMENTS, (20, 30), different, target_end=30))[2] == 19


def verification(
    status: str, skipped: int, behind: int = 0, stray: int = 0, at: str = ""
) -> PartitionVerification:
    return PartitionVerification(
        flow="A->B", topic="t", remote_topic="A.t", partition=0, status=status, behind=behind,
        upstream_from=0, upstream_to=60, downstream_from=0, downstream_to=30, records=30,
        total_records=30, checksum="c", source_end_offset=60, skipped=skipped, stray=stray,
        stray_offsets=at,
    )  # fmt: skip


def test_the_report_says_how_many_records_were_skipped_on_purpose():
    assert (
        verification("complete", 30).describe() == "complete, 30 skipped on purpose (skip events)"
    )
    assert verification("behind", 2, behind=5).describe().startswith("behind by 5, 2 skipped")
    assert verification("complete", 0).describe() == "complete"
    text = format_report(VerifyReport("A->B", "r1", [verification("complete", 30)]))
    assert text.splitlines()[-1] == (
        "A->B: 1 partitions, 0 different, 0 behind, 30 skipped on purpose (skip events) (run r1)"
    )


def test_stray_records_fail_the_report_and_name_their_offsets():
    one = verification("stray", 0, stray=1, at="40")
    assert one.describe() == (
        "stray: 1 record on the target that is not a copy of a source record, "
        "at downstream offset 40"
    )
    many = verification("stray", 2, behind=5, stray=3, at="0-1, 40")
    assert many.describe() == (
        "stray: 3 records on the target that are not copies of source records, at downstream "
        "offsets 0-1, 40; behind by 5, 2 skipped on purpose (skip events)"
    )
    report = VerifyReport("A->B", "r1", [one, verification("complete", 0)])
    assert (report.ok, report.complete, one.differs) == (False, False, True)
    assert format_report(report).splitlines()[-1] == (
        "A->B: 2 partitions, 0 different, 1 stray, 0 behind (run r1)"
    )
    assert VerifyReport("A->B", "r2", [verification("behind", 0, behind=1)]).ok
