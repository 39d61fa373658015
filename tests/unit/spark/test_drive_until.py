"""The one catch-up loop (spark/progress.py) on plain callables: no Spark needed."""

from __future__ import annotations

import pytest

from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.spark.progress import drive_until


def test_an_ended_query_is_checked_then_started_again_until_the_goal_is_reached():
    calls: list[str] = []
    state = {"runs": 1, "active": False}

    def again() -> None:
        calls.append("again")
        state["runs"] += 1
        state["active"] = state["runs"] == 3  # the third run stays up and gets there

    caught = drive_until(
        lambda: state["runs"] == 3,
        check=lambda: calls.append("check"),
        ended=lambda: not state["active"],
        again=again,
        timeout_s=30,
        tick=lambda: calls.append("tick"),
    )
    assert caught
    # the goal reached: the query is checked once more before the loop says so
    assert calls == [
        *["check", "check", "again", "tick"] * 2,
        *["check", "check"],
    ]


def test_a_failure_just_after_the_check_is_not_taken_for_the_goal():
    """An availableNow query whose planner fails ends: the goal (the ledger at the snapshot)
    may read as reached right after the check that still saw it running."""
    state = {"failed": False}

    def check() -> None:
        if state["failed"]:
            raise MirrorRuntimeError("replication of flow A->B failed: DataLossError")

    def reached() -> bool:
        state["failed"] = True
        return True

    with pytest.raises(MirrorRuntimeError, match="DataLossError"):
        drive_until(reached, check=check, ended=lambda: False, again=lambda: None, timeout_s=30)


def test_a_failure_raises_and_a_timeout_returns_false():
    def failed() -> None:
        raise MirrorRuntimeError("replication of flow A->B failed: boom")

    with pytest.raises(MirrorRuntimeError, match="boom"):
        drive_until(
            lambda: False, check=failed, ended=lambda: False, again=lambda: None, timeout_s=30
        )
    assert not drive_until(
        lambda: False, check=lambda: None, ended=lambda: False, again=lambda: None, timeout_s=0.6
    )
