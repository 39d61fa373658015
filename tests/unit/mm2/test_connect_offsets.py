"""MirrorMaker 2's Connect source offsets: topic, group, and the bytes real MM2 4.3 writes."""

from __future__ import annotations

from mirror_lib.mm2.connect_offsets import (
    offsets_topic,
    parse_source_offset,
    source_offset_record,
    worker_group,
)

# as read from mm2-offsets.A.internal after a real MM2 4.3.1 copied topic t (2 partitions)
REAL_KEY = b'["MirrorSourceConnector",{"cluster":"A","partition":1,"topic":"t"}]'
REAL_VALUE = b'{"offset":149}'
HEARTBEAT_KEY = b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]'


def test_offsets_topic_and_group_as_mm2_dedicated_mode_names_them() -> None:
    assert offsets_topic({}, "A", "B") == "mm2-offsets.A.internal"
    assert offsets_topic({"B.offset.storage.topic": "b-offsets"}, "A", "B") == "b-offsets"
    both = {"B.offset.storage.topic": "b-offsets", "offset.storage.topic": "top"}
    assert offsets_topic(both, "A", "B") == "top"  # the top-level key wins, as in MM2
    assert worker_group({}, "A", "B") == "A-mm2"
    assert worker_group({"B.group.id": "mine"}, "A", "B") == "mine"


def test_parse_source_offsets_of_the_flow_only() -> None:
    assert parse_source_offset(REAL_KEY, REAL_VALUE, "A") == (("t", 1), 149)
    assert parse_source_offset(REAL_KEY, None, "A") == (("t", 1), None)  # a reset
    assert parse_source_offset(REAL_KEY, REAL_VALUE, "C") is None  # another source
    assert parse_source_offset(HEARTBEAT_KEY, b'{"offset":0}', "A") is None
    assert parse_source_offset(b"not json", REAL_VALUE, "A") is None
    assert parse_source_offset(None, REAL_VALUE, "A") is None


def test_written_records_are_byte_for_byte_mm2s() -> None:
    assert source_offset_record("A", "t", 1, 149) == (REAL_KEY, REAL_VALUE)
