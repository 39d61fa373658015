"""The checkpoint job's view of a flow's segments: what it keeps, and when it must read back."""

from __future__ import annotations

from mirror_lib.offsets.segments import Segment, SegmentIndex
from mirror_lib.replication import events
from mirror_lib.replication.segment_view import UNKNOWN, SegmentView, load_view, save_view
from mirror_lib.replication.translate import SegmentScan, parse_segments

TP = ("t", 0)


def _value(kind: str, **fields: object) -> bytes:
    event = {"type": kind, "flow": "A->B", "source": "A", "target": "B", "ts_ms": 1, **fields}
    return events.encode(event)[1]


def _segments_value(*segs: tuple[int, int, int, int], tp: tuple[str, int] = TP) -> bytes:
    return _value("segments", topic=tp[0], remote_topic=f"A.{tp[0]}", partition=tp[1],
                  batch_id=1, segments=[list(s) for s in segs])  # fmt: skip


def _transactions(n: int, start: int = 0) -> list[Segment]:
    """n transactions of 10 records each; each commit marker takes one offset downstream."""
    return [Segment(10 * i, 10 * i + 9, 11 * i, 11 * i + 9) for i in range(start, start + n)]


def _view_of(segments: list[Segment], complete: bool = True, floor: int = 0) -> SegmentView:
    view = SegmentView()
    scan = SegmentScan({TP: SegmentIndex(segments)}, 500, complete, {} if complete else {TP: floor})
    view.load(scan, {TP: floor})
    return view


def test_settle_keeps_answers_of_offsets_that_stayed_and_segments_of_those_that_move() -> None:
    view = _view_of(_transactions(100))
    offsets = {("idle", TP): 55, ("busy", TP): 905}
    assert view.translate(TP, 55) == 60 and view.translate(TP, 905) == 995
    view.settle(offsets)  # first cycle: nothing is known to stay; below 55 is not needed
    assert len(view.indexes[TP]) == 95
    offsets[("busy", TP)] = 950
    view.settle(offsets)  # "idle" stayed: its answer is kept; "busy" needs from 950 on
    assert view.answers == {(TP, 55): 60}
    assert len(view.indexes[TP]) == 5
    assert view.known(TP, 55) and view.known(TP, 950) and not view.known(TP, 949)
    assert view.translate(TP, 55) == 60
    assert view.translate(TP, 972) == 1069


def test_an_offset_past_everything_replicated_is_never_kept_as_an_answer() -> None:
    view = _view_of(_transactions(10))
    offsets = {("g", TP): 100}  # the group is ahead of the copy: where the next record lands
    for _ in range(3):
        view.settle(offsets)
    assert view.answers == {}
    assert view.translate(TP, 100) == 109
    view.add(_segments_value((100, 104, 110, 114)))
    assert view.translate(TP, 100) == 110


def test_a_new_group_below_what_is_kept_must_be_read_back() -> None:
    view = _view_of(_transactions(100))
    offsets = {("g", TP): 900, ("idle", TP): 55}
    view.settle(offsets)
    view.settle(offsets)
    assert len(view.indexes[TP]) == 1
    assert not view.known(TP, 300)
    # the lowest offset has its answer; the new one above it has not
    assert view.missing({**offsets, ("new", TP): 300, ("new", ("t", 9)): 4}) == {TP: 300}
    assert view.translate(TP, 300) is None  # not a guess from what is left
    # the checkpoint job then reads back (scan_segments up to the view's position)
    scan = SegmentScan({TP: SegmentIndex(_transactions(80, start=20))}, 500, False, {TP: 200})
    view.load(scan, {TP: 300})
    assert view.known(TP, 300) and view.translate(TP, 300) == 330


def test_new_segments_of_a_partition_whose_history_is_unread_are_exact_from_their_start() -> None:
    view = _view_of(_transactions(3), complete=False, floor=0)
    assert view.default_from == UNKNOWN
    other = ("u", 1)
    view.add(_segments_value((500, 509, 40, 49), tp=other))
    assert view.known(other, 500) and not view.known(other, 499)
    assert view.translate(other, 505) == 45


def test_a_contradicting_segment_drops_the_answers_of_its_partition() -> None:
    view = _view_of(_transactions(100))
    offsets = {("idle", TP): 55}
    view.settle(offsets)
    view.settle(offsets)
    assert view.answers == {(TP, 55): 60}
    view.add(_segments_value((0, 99, 0, 99)))  # the target topic was re-created: copied again
    assert view.answers == {}
    assert view.indexes[TP].segments == (Segment(0, 99, 0, 99),)  # not the old log's last one
    assert view.translate(TP, 55) == 55


def test_after_a_complete_scan_a_partition_without_segments_is_known_empty() -> None:
    view = _view_of(_transactions(3))
    empty = ("t", 7)
    assert view.known(empty, 0) and view.translate(empty, 0) is None
    view.add(_segments_value((0, 4, 0, 4), tp=empty))
    assert view.translate(empty, 0) == 0


def test_a_saved_view_is_the_same_view_for_the_same_metrics_topic(tmp_path, caplog) -> None:
    view = _view_of(_transactions(100))
    offsets = {("idle", TP): 55, ("busy", TP): 905}
    view.settle(offsets)
    view.settle(offsets)
    view.exact_from[("t", 7)] = -1  # a partition known to have nothing yet
    path = tmp_path / "flows" / "A_to_B" / "checkpoint-segments.json"
    save_view(path, view, "id-1")
    again = load_view(path, "id-1")
    assert again.to_json() == view.to_json()
    assert again.answers == {(TP, 55): 60, (TP, 905): 995}
    assert again.indexes[TP].segments == view.indexes[TP].segments
    assert again.missing(offsets) == {}
    again.settle(offsets)  # the offsets seen before are kept too: they count as staying
    assert again.answers == view.answers

    assert load_view(path, "id-2").position is None  # the metrics topic was re-created
    assert load_view(path, None).position is None
    assert load_view(tmp_path / "none.json", "id-1").position is None
    path.write_text("{not json")
    assert load_view(path, "id-1").position is None
    assert "reading them from Kafka" in caplog.text


def test_a_view_that_read_nothing_is_not_saved(tmp_path) -> None:
    path = tmp_path / "segments.json"
    save_view(path, SegmentView(), "id-1")
    save_view(path, _view_of([]), None)
    assert not path.exists()


def test_an_offset_older_than_the_segments_retention_kept_has_no_answer(monkeypatch) -> None:
    """The metrics topic lost its first records to retention: an old offset below the oldest
    segment kept must not translate to that segment's start, which would skip the records
    replicated in between (MM2's store answers -1 there too)."""
    from mirror_lib.kafka.reader import Chunk
    from mirror_lib.replication import translate
    from tests.helpers.fake_kafka import FakeMessage

    records = [  # upstream 10000..19999 survive at metrics offsets 5000..5009
        FakeMessage("m", 0, 5000 + i, value=_segments_value((us, us + 999, us, us + 999)))
        for i, us in enumerate(range(10_000, 20_000, 1000))
    ]
    monkeypatch.setattr(translate, "reader_conf", lambda ctx: {})
    monkeypatch.setattr(
        translate, "read_back", lambda *a: iter([Chunk(5000, 5010, records, at_start=True)])
    )
    ctx = type("Ctx", (), {"metrics_topic": "m"})()
    scan = translate.scan_segments(ctx, {TP: 500})  # type: ignore[arg-type]
    assert not scan.complete and not scan.exact(TP, 500) and scan.exact(TP, 10_000)
    view = SegmentView()
    view.load(scan, {TP: 500})
    assert view.translate(TP, 500) is None
    assert "still keeps (from upstream offset 10000" in view.why_unknown(TP, 500)
    assert view.translate(TP, 12_345) == 12_345
    assert view.why_unknown(("u", 0), 5) == "nothing of the partition replicated"


def _takeover_value(upstream: int, matched: int | None, last: int | None) -> bytes:
    return _value("takeover", topic="t", remote_topic="A.t", partition=0, upstream=upstream,
                  mm2_committed=3, mm2_last_upstream=matched, mm2_last_downstream=last)  # fmt: skip


def test_takeover_from_mm2_is_the_floor_of_our_answers() -> None:
    # MM2 copied upstream 0..41 to downstream 0..39 (two records lost to a compaction, say);
    # we took over after its last record (41 -> 39) and copied 42.. to 40..
    mm2_below: dict[tuple[str, int], int] = {}
    parsed = parse_segments(_takeover_value(42, 41, 39), mm2_below=mm2_below)
    assert parsed == (TP, [Segment(41, 41, 39, 39)])
    assert mm2_below == {TP: 41}
    view = SegmentView()
    view.load(SegmentScan({}, 0, True), {TP: 0})
    view.add(_takeover_value(42, 41, 39))  # written by the planner before our first slice
    view.add(_segments_value((42, 99, 40, 97)))
    # MM2's records: no answer of ours (not one past them: that would skip them), and
    # nothing to read back for them either
    assert view.known(TP, 5) and view.translate(TP, 5) is None
    assert "MirrorMaker 2" in view.why_unknown(TP, 5)
    assert view.translate(TP, 41) == 39  # the record matched at the boundary
    assert view.translate(TP, 42) == 40 and view.translate(TP, 99) == 97
    # a scan that meets the event sets the same floor, and the view keeps it when saved
    scanned = SegmentView()
    scanned.load(SegmentScan({TP: SegmentIndex()}, 10, True, mm2_below={TP: 41}), {TP: 0})
    assert scanned.translate(TP, 5) is None and scanned.known(TP, 5)
    assert SegmentView.from_json(scanned.to_json()).mm2_below == {TP: 41}
