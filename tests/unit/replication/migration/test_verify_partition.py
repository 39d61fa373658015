"""What ``mirror verify`` says of one partition's records on the target that are not copies of
source records, and of records skipped on purpose (no Kafka)."""

from __future__ import annotations

from mirror_lib.replication.migration.verify_partition import skipped_text, stray_text


def test_stray_records_are_counted_in_words_with_their_offsets():
    assert stray_text(1, "7") == (
        "1 record on the target that is not a copy of a source record, at downstream offset 7"
    )
    assert stray_text(2, "7, 40") == (
        "2 records on the target that are not copies of source records, at downstream offsets 7, 40"
    )
    assert skipped_text(3) == "3 skipped on purpose (skip events)"
