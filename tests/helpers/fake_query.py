"""A stand-in for a Spark StreamingQuery, for unit tests of the runner's supervision logic."""

from __future__ import annotations

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
