"""`mirror verify`'s view of skip events: collected with the segments, shown in the report."""

from __future__ import annotations

import json

from mirror_lib.offsets.segments import Segment
from mirror_lib.replication.translate import add_segments
from mirror_lib.replication.verify import (
    PartitionVerification,
    VerifyReport,
    format_report,
    plan_task,
)


def event(kind: str, **fields) -> bytes:
    return json.dumps({"type": kind, "topic": "t", "partition": 0, **fields}).encode()


def test_skip_events_are_collected_beside_the_segments():
    indexes, skips = {}, {}
    assert add_segments(indexes, event("segments", segments=[[0, 9, 0, 9]]), skips)
    assert add_segments(indexes, event("skip", first_offset=10, last_offset=39), skips)
    assert add_segments(indexes, event("skip", first_offset=45, last_offset=45), skips)
    assert add_segments(indexes, event("batch", records=3), skips)
    assert not add_segments(indexes, event("skip", first_offset="x", last_offset=1), skips)
    assert not add_segments(indexes, b"[1, 2]", skips)
    assert skips == {("t", 0): [(10, 39), (45, 45)]}
    assert indexes[("t", 0)].segments == (Segment(0, 9, 0, 9),)
    assert add_segments({}, event("skip", first_offset=1, last_offset=2))  # no skips: ignored


def test_a_task_carries_only_the_skip_ranges_from_its_start_on():
    class Ctx:
        def to_options(self) -> dict[str, str]:
            return {}

        def remote_topic(self, topic: str) -> str:
            return f"A.{topic}"

    previous = {"upstream_to": 50, "downstream_to": 40, "total_records": 40, "checksum": "c"}
    segments = [Segment(0, 9, 0, 9), Segment(40, 49, 30, 39)]
    task = plan_task(Ctx(), "t", 0, segments, (0, 60), previous, [(10, 39), (55, 57)])
    assert (task.upstream_from, task.downstream_from, task.skipped) == (50, 40, [(55, 57)])


def verification(status: str, skipped: int, behind: int = 0) -> PartitionVerification:
    return PartitionVerification(
        flow="A->B", topic="t", remote_topic="A.t", partition=0, status=status, behind=behind,
        upstream_from=0, upstream_to=60, downstream_from=0, downstream_to=30, records=30,
        total_records=30, checksum="c", source_end_offset=60, skipped=skipped,
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
