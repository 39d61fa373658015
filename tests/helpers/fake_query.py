"""Stand-ins for a Spark StreamingQuery and the SparkContext a stop watches, for unit tests of
the runner's supervision and of stopping."""

from __future__ import annotations

import time
from typing import Any


class FakeQuery:
    """isActive / exception() / recentProgress, driven by the test."""

    def __init__(self) -> None:
        self.isActive = True
        self.error: Exception | None = None
        self.recentProgress: list[dict[str, Any]] = []

    def fail(self, text: str) -> None:
        self.isActive = False
        self.error = RuntimeError(text)

    def exception(self) -> Exception | None:
        return self.error

    def batch(self) -> None:
        self.recentProgress.append({"batchId": len(self.recentProgress)})


class FakeSparkContext:
    """The SparkContext calls a stop makes: ``cancelJobGroup`` and a status tracker whose job
    and stage views follow a script, one step per look (the last step stays)."""

    def __init__(self, steps: list[tuple[str, int]]) -> None:
        self.steps = steps  # (job status, active tasks of its stage) per look
        self.looks = 0
        self.cancelled: list[str] = []

    def cancelJobGroup(self, group: str) -> None:
        self.cancelled.append(group)

    def statusTracker(self) -> FakeSparkContext:
        return self

    def step(self) -> tuple[str, int]:
        return self.steps[min(self.looks - 1, len(self.steps) - 1)]

    def getJobIdsForGroup(self, group: str) -> list[int]:
        self.looks += 1
        return [7]

    def getJobInfo(self, jid: int) -> Any:
        status, _active = self.step()
        return type("JobInfo", (), {"jobId": jid, "stageIds": [3], "status": status})()

    def getStageInfo(self, sid: int) -> Any:
        _status, active = self.step()
        return type("StageInfo", (), {"stageId": sid, "numActiveTasks": active})()


class FakeSession:
    """A classic session: its ``sparkContext`` is a :class:`FakeSparkContext`."""

    def __init__(self, context: FakeSparkContext) -> None:
        self.sparkContext = context


class MissedStopQuery:
    """A query whose ``stop()`` returns only once its job group is cancelled after the stop
    began, as a query whose thread started a batch's job after Spark's own cancel did; it
    raises after ``patience_s`` instead."""

    def __init__(self, context: FakeSparkContext, patience_s: float = 5.0) -> None:
        self.isActive = True
        self.runId = "run-1"
        self.context = context
        self.patience_s = patience_s

    def stop(self) -> None:
        deadline = time.monotonic() + self.patience_s
        while not self.context.cancelled:
            if time.monotonic() > deadline:
                raise AssertionError(f"the job went on: nobody cancelled it in {self.patience_s} s")
            time.sleep(0.01)
        self.isActive = False
