"""Progress of a catch-up (``mirror run --once``, the demo): records done / to do and rate.

A bar on a terminal; one plain line per finished micro-batch otherwise (logs, CI, jobs).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

TP = tuple[str, int]


class CatchUpProgress:
    """Callable passed to :meth:`FlowRunner.await_caught_up` as ``on_progress``."""

    def __init__(self, flow: str, stream: TextIO | None = None) -> None:
        self.flow = flow
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self.base: int | None = None
        self.last_batch: int | None = None

    def update(self, progress: dict[str, Any] | None, target: dict[TP, int]) -> str | None:
        """The line for this progress (None when nothing new happened)."""
        from mirror_lib.runner import end_offsets

        if not progress:
            return None
        if self.base is None:
            starts = end_offsets(
                {"sources": [{"endOffset": progress["sources"][0].get("startOffset") or "{}"}]}
            )
            self.base = sum(min(starts.get(tp, 0), off) for tp, off in target.items())
        ends = end_offsets(progress)
        done = sum(min(ends.get(tp, 0), off) for tp, off in target.items()) - self.base
        total = max(sum(target.values()) - self.base, 0)
        rate = done / max(time.monotonic() - self.started, 1e-9)
        if self.tty:
            filled = int(30 * done / total) if total else 30
            return (
                f"\r{self.flow} [{'#' * filled}{'.' * (30 - filled)}] "
                f"{done}/{total} records {rate:,.0f} rec/s"
            )
        if progress["batchId"] == self.last_batch:
            return None
        self.last_batch = progress["batchId"]
        return (
            f"{self.flow} batch {progress['batchId']}: {done}/{total} records, {rate:,.0f} rec/s\n"
        )

    def __call__(self, runner: Any, target: dict[TP, int]) -> None:
        line = self.update(runner.query.lastProgress if runner.query else None, target)
        if line:
            self.stream.write(line)
            self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
