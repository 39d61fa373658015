"""Network links between test processes on loopback, each of which can be cut and mended.

A :class:`Link` listens on a loopback port and forwards every connection to an upstream port.
A multi-broker test cluster (:mod:`mirror_lib.testing.kafka_cluster`) routes each path between
two of its nodes, and between clients and each broker, through a link of its own, so cutting
every link that touches one broker isolates it as a network partition would: its clients, its
followers, the leaders it follows and its controllers all lose it, while the other brokers keep
talking to each other.

Modes:

- ``open``: bytes flow.
- ``blackhole``: as a partitioned network, bytes stop in both directions on every connection,
  which stays open, and new connections are accepted and never answered. Mending it closes what
  was held, as the peers' own timeouts would have by then.
- ``refuse``: live connections are closed and new ones refused (nothing listens).

All links of a :class:`LinkHub` are served by one asyncio loop in one thread: a three-broker
cluster has about twenty of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

OPEN, BLACKHOLE, REFUSE = "open", "blackhole", "refuse"
MODES = (OPEN, BLACKHOLE, REFUSE)
_CHUNK = 256 * 1024
T = TypeVar("T")


@dataclass(eq=False)
class Link:
    """One forwarded path: ``port`` (where its users connect) to ``upstream``. ``ends`` names
    what it joins (for example ``{"client", "broker 2"}``), so a fault can pick every link that
    touches one end."""

    name: str
    port: int
    upstream: int
    ends: frozenset[str]
    mode: str = OPEN
    _server: asyncio.Server | None = field(default=None, repr=False)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set, repr=False)
    _open: asyncio.Event | None = field(default=None, repr=False)


class LinkHub:
    """Links served by one event loop in a daemon thread; see the module docstring."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._links: dict[str, Link] = {}
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="links")
        self._thread.start()

    # -- the API the tests call (any thread) -------------------------------------------------
    def add(self, name: str, upstream: int, ends: Iterable[str], port: int = 0) -> Link:
        """A new open link on ``port`` (0: a free one) to ``upstream``."""
        if name in self._links:
            raise ValueError(f"link {name!r} exists")
        link = Link(name, port, upstream, frozenset(ends))
        self._call(self._serve(link))
        self._links[name] = link
        return link

    def links(self, touching: str | None = None) -> list[Link]:
        """Every link, or those with ``touching`` among their ends."""
        return [lk for lk in self._links.values() if touching is None or touching in lk.ends]

    def set_mode(self, mode: str, links: Iterable[Link]) -> None:
        """Put ``links`` in ``mode`` (one of :data:`MODES`)."""
        if mode not in MODES:
            raise ValueError(f"link mode {mode!r}: one of {', '.join(MODES)}")
        for link in list(links):
            self._call(self._switch(link, mode))

    def cut(self, end: str, mode: str = BLACKHOLE) -> list[Link]:
        """Cut every link that touches ``end``; returns them (for :meth:`mend`)."""
        found = self.links(end)
        self.set_mode(mode, found)
        return found

    def mend(self, end: str) -> None:
        """Open every link that touches ``end`` again."""
        self.set_mode(OPEN, self.links(end))

    def close(self) -> None:
        """Close every link, end every connection and stop the loop."""
        for link in list(self._links.values()):
            with contextlib.suppress(Exception):
                self._call(self._switch(link, REFUSE))
        self._links.clear()
        with contextlib.suppress(Exception):
            self._call(self._cancel_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    async def _cancel_all(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    # -- inside the loop ----------------------------------------------------------------------
    async def _serve(self, link: Link) -> None:
        link._open = asyncio.Event()
        link._open.set()
        link._server = await asyncio.start_server(
            lambda r, w: self._connected(link, r, w), "127.0.0.1", link.port, reuse_address=True
        )
        link.port = int(link._server.sockets[0].getsockname()[1])

    async def _switch(self, link: Link, mode: str) -> None:
        previous, link.mode = link.mode, mode
        assert link._open is not None
        if mode == OPEN:
            if previous != OPEN:
                self._close_all(link)  # held connections: their peers gave up on them
            link._open.set()
            if link._server is None:
                await self._serve(link)
            return
        link._open.clear()
        if mode == REFUSE:
            if link._server is not None:
                link._server.close()
                link._server = None
            self._close_all(link)

    @staticmethod
    def _close_all(link: Link) -> None:
        for writer in list(link._writers):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        link._writers.clear()

    async def _connected(
        self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # the hub closes: just end
            await self._forward(link, reader, writer)

    async def _forward(
        self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        link._writers.add(writer)
        if link.mode != OPEN:
            return  # held: accepted, never answered; closed when the link is mended
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", link.upstream)
        except OSError:
            link._writers.discard(writer)
            writer.transport.abort()
            return
        link._writers.add(up_writer)
        await asyncio.gather(
            self._pump(link, reader, up_writer),
            self._pump(link, up_reader, writer),
            return_exceptions=True,
        )
        for w in (writer, up_writer):
            link._writers.discard(w)
            with contextlib.suppress(Exception):
                w.transport.abort()

    @staticmethod
    async def _pump(link: Link, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        assert link._open is not None
        while True:
            data = await src.read(_CHUNK)
            if not data:
                break
            if link.mode != OPEN:  # the bytes are lost; mending closes the connection
                await link._open.wait()
                return
            dst.write(data)
            await dst.drain()
