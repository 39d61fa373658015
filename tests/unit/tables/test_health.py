"""The error line of ``mirror status``: a flow's newest error since its newest start."""

from __future__ import annotations

from mirror_lib.app.status import format_status
from mirror_lib.tables.health import health, last_error

T0 = 1_790_000_000_000  # 2026-09-21T14:13:20Z


def event(kind: str, flow: str, ms: int, action: str | None = None, reason: str | None = None):
    return {"type": kind, "flow": flow, "_ms": ms, "action": action, "reason": reason}


EVENTS = [
    event("start", "A->C", T0, "started"),
    event("error", "A->C", T0 + 5_000, "left_out", "RecordTooLargeError: t[1] offset 101"),
    event("gap", "A->C", T0 + 6_000, "skip", "records were deleted (retention)"),
    event("error", "A->B", T0 + 7_000, "failed", "an earlier run"),
    event("start", "A->B", T0 + 8_000, "started"),
]


def test_a_target_left_out_is_the_flows_error_until_its_next_start():
    assert last_error(EVENTS, "A->C") == (
        "2026-09-21T14:13:25+00:00 left_out: RecordTooLargeError: t[1] offset 101"
    )
    later = [*EVENTS, event("start", "A->C", T0 + 9_000, "started")]
    assert last_error(later, "A->C") is None


def test_an_error_before_the_newest_start_is_history():
    assert last_error(EVENTS, "A->B") is None
    assert last_error(EVENTS, "X->Y") is None


def test_the_newest_error_wins_and_a_missing_reason_is_said():
    events = [
        event("start", "A->B", T0),
        event("error", "A->B", T0 + 2_000, "failed", None),
        event("error", "A->B", T0 + 1_000, "left_out", "older"),
    ]
    assert last_error(events, "A->B") == "2026-09-21T14:13:22+00:00 failed: (no reason given)"


def test_mirror_status_prints_the_error_below_the_table():
    rows = health([], [], [], [("A->B", "A", "B"), ("A->C", "A", "C")], T0 + 10_000, EVENTS)
    assert [r.error is None for r in rows] == [True, False]
    text = format_status(rows)
    assert (
        "A->C: error: 2026-09-21T14:13:25+00:00 left_out: RecordTooLargeError: t[1] offset 101"
    ) in text.splitlines()
    assert "A->B: error" not in text
