"""Segments read back from the metrics topic: what an event adds, what a scan reads, and the
floor a take-over from MirrorMaker 2 sets."""

from __future__ import annotations

import json

from mirror_lib.offsets.segments import Segment
from mirror_lib.replication.translate import add_segments, parse_segments
from tests.unit.replication.test_segment_view import TP, _segments_value, _takeover_value, _value


def test_parse_segments_decodes_only_what_it_needs() -> None:
    assert parse_segments(_segments_value((0, 9, 0, 9))) == (TP, [Segment(0, 9, 0, 9)])
    assert parse_segments(_value("batch", topic="t", partition=0, records=10)) == ()
    assert parse_segments(b"not json") is None
    assert parse_segments(b'{"type":"segments","topic":"t"}') is None  # no partition
    skips: dict[tuple[str, int], list[tuple[int, int]]] = {}
    value = _value("skip", topic="t", partition=0, first_offset=3, last_offset=7)
    assert parse_segments(value, skips) == ()
    assert skips == {TP: [(3, 7)]}


def test_a_scan_ends_after_the_last_record_read_not_at_the_brokers_end(monkeypatch) -> None:
    """Past the last record may lie a transaction still open: a reader going on from the
    broker's end offset would never read its segments."""
    from mirror_lib.kafka.reader import Chunk
    from mirror_lib.replication import translate
    from tests.helpers.fake_kafka import FakeMessage

    records = [FakeMessage("m", 0, o) for o in (40, 49)]  # not JSON: counted as skipped
    monkeypatch.setattr(translate, "reader_conf", lambda ctx: {})
    monkeypatch.setattr(
        translate, "read_back", lambda *a: iter([Chunk(0, 100, records, at_start=True)])
    )
    ctx = type("Ctx", (), {"metrics_topic": "m"})()
    scan = translate.scan_segments(ctx, {TP: 0})  # type: ignore[arg-type]
    assert (scan.end, scan.complete, scan.skipped) == (50, True, 2)


def test_takeover_without_a_matched_record_floors_at_our_first_offset() -> None:
    mm2_below: dict[tuple[str, int], int] = {}
    assert parse_segments(_takeover_value(50, None, 39), mm2_below=mm2_below) == ()
    assert mm2_below == {TP: 50}


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
