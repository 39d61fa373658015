"""The TLS proxy of the integration tests: a connection's pipe still waiting when the proxy
stopped goes quietly when the garbage collector closes it after its loop (it printed "Event
loop is closed" as an unraisable exception in the middle of a later test)."""

from __future__ import annotations

import asyncio
import gc
import sys
from typing import Any

from tests.helpers.proxy import _pipe


class _Writer:
    """A stream writer whose close, like a transport's, asks its loop to finish it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        self.loop.call_soon(lambda: None)


def test_a_pipe_left_waiting_on_a_closed_loop_goes_quietly() -> None:
    seen: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        loop = asyncio.new_event_loop()
        writer: Any = _Writer(loop)
        task = loop.create_task(_pipe(asyncio.StreamReader(loop=loop), writer))
        loop.run_until_complete(asyncio.sleep(0))  # the pipe waits for data
        loop.close()
        del task
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert [str(s.exc_value) for s in seen] == []
