"""The hand-back to MirrorMaker 2 as a user reads it: per partition where MM2 continues, and
what to do next, dry run or applied (no Kafka)."""

from __future__ import annotations

from mirror_lib.replication.migration.mm2_handback import HandBack, format_hand_back

ROWS = [HandBack("orders", 0, 120, 100, 120), HandBack("orders", 1, 0, None, None)]


def test_a_dry_run_shows_each_partition_and_how_to_apply_it():
    text = format_hand_back(ROWS, applied=False)
    header, first, second, last = text.splitlines()
    assert header.split() == ["topic", "partition", "next", "MM2", "before", "MM2", "after"]
    assert first.split() == ["orders", "0", "120", "100", "120"]
    assert second.split() == ["orders", "1", "0", "-", "-"]  # the flow copied nothing of it
    assert last == "dry run: --apply writes MM2's positions (stop `mirror run` first)"


def test_once_applied_it_says_to_start_mirrormaker_2():
    assert format_hand_back(ROWS, applied=True).endswith(
        "written: start MirrorMaker 2 on the same properties; it continues at 'next'"
    )
    assert ROWS[1].as_dict() == {"topic": "orders", "partition": 1, "next_offset": 0,
                                 "mm2_before": None, "mm2_after": None}  # fmt: skip
