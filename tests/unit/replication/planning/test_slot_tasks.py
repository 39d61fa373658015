"""Slots that share a copy task (mirror_lib.replication.planning.slot_tasks): the planner's
choice between one task and a task a slot, the slots of each task, and the gate that ends a
shared task's slice once the flow got busy."""

from __future__ import annotations

import pytest

from mirror_lib.replication.planning.slot_tasks import (
    BACKLOG_S,
    GATE_S,
    SharedTaskGate,
    task_count,
    task_slots,
)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ({}, 1),
        ({"rate": 9_999.0}, 1),
        ({"rate": 10_001.0}, 4),
        ({"backlog": int(10_000 * BACKLOG_S)}, 1),
        ({"backlog": int(10_000 * BACKLOG_S) + 1}, 4),
        ({"ended_early": True}, 4),
        ({"once": True}, 4),
        ({"below": 0}, 4),
        ({"slots": 1}, 1),
    ],
    ids=[
        "quiet",
        "just below",
        "above the rate",
        "a small backlog",
        "a backlog",
        "a shared slice ended early",
        "--once",
        "sharing off",
        "one slot",
    ],
)
def test_slots_share_a_task_only_while_the_flow_is_quiet(case, expected):
    args = {"slots": 4, "below": 10_000, "backlog": 0, "rate": None, "ended_early": False,
            "once": False} | case  # fmt: skip
    slots, below = args.pop("slots"), args.pop("below")
    assert task_count(slots, below, **args) == expected


def test_each_task_gets_every_slot_of_its_remainder_and_the_first_is_its_own():
    assert task_slots(4, 1) == [[0, 1, 2, 3]]
    assert task_slots(4, 2) == [[0, 2], [1, 3]]
    assert task_slots(4, 4) == [[0], [1], [2], [3]]
    assert task_slots(2, 4) == [[0], [1]]


def test_the_gate_says_busy_after_a_window_above_the_rate_or_mostly_behind():
    gate = SharedTaskGate(below=1_000, started=0.0)
    assert not gate.busy(1.0, 50_000, False)  # the window is not over yet
    assert gate.busy(GATE_S, 0, False)  # 50,000 records in 10 s: 5,000 a second
    assert not gate.busy(2 * GATE_S, 9_000, False)  # a new window: 900 a second
    for i in range(3):
        gate.busy(2 * GATE_S + i, 0, True)
    assert gate.busy(3 * GATE_S, 0, False)  # behind in 3 passes of 4
