"""Waiting for a condition with a deadline, as every integration test does (never sleep and hope),
and the records the kill tests load."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(
    check: Callable[[], T],
    timeout_s: float,
    what: str,
    alive: Callable[[], object] | None = None,
    *,
    poll_s: float = 0.2,
    detail: Callable[[], str] | None = None,
) -> T:
    """The first true result of ``check()``; an AssertionError naming ``what`` after
    ``timeout_s``. ``alive()`` runs before each check and raises when whatever should make the
    check true died; ``detail()`` adds to the timeout's message (e.g. the end of a log)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if alive is not None:
            alive()
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            more = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"{what} not within {timeout_s:.0f}s{more}")
        time.sleep(poll_s)


def process_alive(
    proc: subprocess.Popen, name: str = "mirror run", detail: Callable[[], str] | None = None
) -> Callable[[], None]:
    """An ``alive`` for :func:`wait_for`: raises once ``proc`` has exited."""

    def alive() -> None:
        if proc.poll() is not None:
            more = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"{name} exited (code {proc.returncode}) while waiting{more}")

    return alive


def keyed_records(n: int, partitions: int, first: int = 0) -> list[dict[str, Any]]:
    """``n`` records ``k<i>``/``v<i>`` (from ``i = first``) spread round-robin over
    ``partitions``."""
    return [
        {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % partitions}
        for i in range(first, first + n)
    ]
