"""A run observer that records what :func:`~mirror_lib.spark.runner.run_flows` tells it."""

from __future__ import annotations

from typing import Any


class RecordingObserver:
    """``calls``: ``("start", plan)`` and ``("finish", error or None)``, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def start(self, plan: Any) -> None:
        self.calls.append(("start", plan))

    def finish(self, error: BaseException | None) -> None:
        self.calls.append(("finish", error))
