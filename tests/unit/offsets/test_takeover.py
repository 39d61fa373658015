"""Where a flow continues a partition MirrorMaker 2 replicated: after MM2's last copied record."""

from __future__ import annotations

from mirror_lib.offsets.takeover import Boundary, Content, find_boundary


def rec(i: int, ts: int | None = None) -> Content:
    return Content(b"k", f"v{i}".encode(), (("h", b"x"),), 1000 + i if ts is None else ts)


def upstream(start: int, stop: int, gaps: tuple[int, ...] = ()) -> list[tuple[int, Content]]:
    """Records at upstream offsets start..stop-1 except ``gaps`` (transaction markers); the
    record at offset o has value v<o>."""
    return [(o, rec(o)) for o in range(start, stop) if o not in gaps]


def test_continues_after_the_last_record_mm2_copied_not_after_its_commit() -> None:
    # MM2 committed offset 40 but went on copying to 57 before it stopped; 45 is a marker
    found = find_boundary(
        committed=40, remote_last=(55, rec(57)), upstream=upstream(40, 90, (45,)), earliest=0
    )
    assert found == Boundary(next_offset=58, matched=57, committed=40, remote_last=55)
    assert found.beyond_commit == 17  # what a restarted MM2 would copy a second time


def test_identical_records_make_the_earliest_match_so_nothing_is_skipped() -> None:
    same = rec(7)
    records = [(o, same if o in (50, 53) else rec(o)) for o in range(40, 60)]
    found = find_boundary(committed=40, remote_last=(20, same), upstream=records, earliest=0)
    assert found is not None and found.next_offset == 51  # 52 and 53 are copied again


def test_never_matches_before_the_committed_offset() -> None:
    records = [(o, rec(5)) for o in range(0, 10)] + upstream(10, 20)
    found = find_boundary(committed=12, remote_last=(9, rec(5)), upstream=records, earliest=0)
    assert found == Boundary(next_offset=13, matched=None, committed=12, remote_last=9)


def test_without_a_commit_the_search_starts_at_the_earliest_offset() -> None:
    found = find_boundary(
        committed=None, remote_last=(4, rec(14)), upstream=upstream(10, 30), earliest=10
    )
    assert found == Boundary(15, 14, None, 4)


def test_timestamps_count_only_when_both_are_known() -> None:
    other_time = rec(14, ts=1)
    assert not rec(14).same(other_time)
    assert rec(14).same(rec(14)._replace(timestamp=None))
    found = find_boundary(
        committed=10, remote_last=(4, other_time), upstream=upstream(10, 30), earliest=0
    )
    assert found == Boundary(11, None, 10, 4)  # not found: after MM2's commit, as MM2 would


def test_nothing_to_continue_from() -> None:
    assert find_boundary(committed=None, remote_last=None, upstream=[], earliest=0) is None
    # MM2 committed but its remote partition is empty (e.g. deleted): after its commit
    assert find_boundary(committed=9, remote_last=None, upstream=[], earliest=0) == Boundary(
        10, None, 9, None
    )
