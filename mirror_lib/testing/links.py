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

Every byte of a three-broker cluster crosses its links (about twenty), replication and the
brokers' heartbeats to their controllers included, so they are served by one asyncio loop in a
process of their own (``python -m mirror_lib.testing.links``), at a higher CPU priority where
allowed: in the test's process they shared its interpreter lock with the test's own consumers,
and on a busy machine a slow network was the last thing the faults needed. A :class:`LinkHub`
starts that process and drives it over a Unix socket.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirror_lib.testing import processes

OPEN, BLACKHOLE, REFUSE = "open", "blackhole", "refuse"
MODES = (OPEN, BLACKHOLE, REFUSE)
_CHUNK = 256 * 1024
_NICE = -10  # the links' priority, where the user may raise it (root)


@dataclass(eq=False)
class Link:
    """One forwarded path: ``port`` (where its users connect) to ``upstream``. ``ends`` names
    what it joins (for example ``{"clients", "node 2"}``), so a fault can pick every link that
    touches one end."""

    name: str
    port: int
    upstream: int
    ends: frozenset[str]
    mode: str = OPEN


class LinkHub(processes.ChildProcess):
    """The links of one cluster, served by a process of their own (see the module docstring)."""

    def __init__(self, workdir: Path | None = None) -> None:
        super().__init__()
        folder = Path(workdir or tempfile.mkdtemp(prefix="mirror-links-"))
        folder.mkdir(parents=True, exist_ok=True)
        self.workdir = folder
        self._links: dict[str, Link] = {}
        self._lock = threading.Lock()
        # a short path: a Unix socket's path has a limit of about 100 bytes
        self._control = Path(tempfile.mkdtemp(prefix="mlk-")) / "control"
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "mirror_lib.testing.links", "--control", str(self._control)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.adopt(proc)
        self._sock = self._connect(time.monotonic() + 30)
        self._reader = self._sock.makefile("rb")

    @property
    def log_path(self) -> Path:
        return self.workdir / "links.log"

    def _connect(self, deadline: float) -> socket.socket:
        while True:
            exited = self.exit_report("the links process exited during start")
            if exited is not None:
                raise RuntimeError(exited)
            with contextlib.suppress(OSError):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(str(self._control))
                return sock
            if time.monotonic() > deadline:
                raise RuntimeError(f"the links process did not listen; log {self.log_path}")
            time.sleep(0.05)

    def _ask(self, **request: Any) -> dict[str, Any]:
        with self._lock:
            self._sock.sendall(json.dumps(request).encode() + b"\n")
            line = self._reader.readline()
        if not line:
            raise RuntimeError(f"the links process is gone; log {self.log_path}")
        answer = dict(json.loads(line))
        if "error" in answer:
            raise ValueError(answer["error"])
        return answer

    # -- the API the tests call (any thread) -------------------------------------------------
    def add(self, name: str, upstream: int, ends: Iterable[str], port: int = 0) -> Link:
        """A new open link on ``port`` (0: a free one) to ``upstream``."""
        if name in self._links:
            raise ValueError(f"link {name!r} exists")
        answer = self._ask(op="add", name=name, upstream=upstream, port=port)
        link = Link(name, int(answer["port"]), upstream, frozenset(ends))
        self._links[name] = link
        return link

    def links(self, touching: str | None = None) -> list[Link]:
        """Every link, or those with ``touching`` among their ends."""
        return [lk for lk in self._links.values() if touching is None or touching in lk.ends]

    def set_mode(self, mode: str, links: Iterable[Link]) -> None:
        """Put ``links`` in ``mode`` (one of :data:`MODES`)."""
        if mode not in MODES:
            raise ValueError(f"link mode {mode!r}: one of {', '.join(MODES)}")
        chosen = list(links)
        self._ask(op="mode", mode=mode, names=[lk.name for lk in chosen])
        for link in chosen:
            link.mode = mode

    def cut(self, end: str, mode: str = BLACKHOLE) -> list[Link]:
        """Cut every link that touches ``end``; returns them (for :meth:`mend`)."""
        found = self.links(end)
        self.set_mode(mode, found)
        return found

    def mend(self, end: str) -> None:
        """Open every link that touches ``end`` again."""
        self.set_mode(OPEN, self.links(end))

    def close(self) -> None:
        """Close every link and end the process."""
        with contextlib.suppress(Exception):
            self._sock.close()
        self.stop(5)
        self._links.clear()


# -- the links process ----------------------------------------------------------------------
@dataclass(eq=False)
class _Served:
    """A link as its process serves it."""

    port: int
    upstream: int
    mode: str = OPEN
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    opened: asyncio.Event = field(default_factory=asyncio.Event)


class _Server:
    """The asyncio side: the links by name, and the control connection's requests."""

    def __init__(self) -> None:
        self.links: dict[str, _Served] = {}

    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            request = json.loads(line)
            try:
                answer = await self.handle(request)
            except Exception as exc:  # told to the caller, who raises it
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        for served in self.links.values():  # the hub closed: so do the links
            await self.switch(served, REFUSE)
        asyncio.get_running_loop().stop()

    async def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] == "add":
            served = _Served(int(request["port"]), int(request["upstream"]))
            await self.serve(served)
            self.links[request["name"]] = served
            return {"port": served.port}
        if request["op"] == "mode":
            for name in request["names"]:
                await self.switch(self.links[name], request["mode"])
            return {"ok": True}
        raise ValueError(f"unknown request {request!r}")

    async def serve(self, served: _Served) -> None:
        served.opened.set()
        served.server = await asyncio.start_server(
            lambda r, w: self.connected(served, r, w), "127.0.0.1", served.port,
            reuse_address=True,
        )  # fmt: skip
        served.port = int(served.server.sockets[0].getsockname()[1])

    async def switch(self, served: _Served, mode: str) -> None:
        previous, served.mode = served.mode, mode
        if mode == OPEN:
            if previous != OPEN:
                self.close_all(served)  # held connections: their peers gave up on them
            served.opened.set()
            if served.server is None:
                await self.serve(served)
            return
        served.opened.clear()
        if mode == REFUSE:
            if served.server is not None:
                served.server.close()
                served.server = None
            self.close_all(served)

    @staticmethod
    def close_all(served: _Served) -> None:
        for writer in list(served.writers):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        served.writers.clear()

    async def connected(
        self, served: _Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        served.writers.add(writer)
        if served.mode != OPEN:
            return  # held: accepted, never answered; closed when the link is mended
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", served.upstream)
        except OSError:
            served.writers.discard(writer)
            writer.transport.abort()
            return
        served.writers.add(up_writer)
        # One side closing closes the other, as a process that dies resets its connections: a
        # broker whose controller was killed must not wait out its request timeout on a link
        # still open towards it.
        pumps = [
            asyncio.ensure_future(self.pump(served, reader, up_writer)),
            asyncio.ensure_future(self.pump(served, up_reader, writer)),
        ]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        for w in (writer, up_writer):
            served.writers.discard(w)
            with contextlib.suppress(Exception):
                w.transport.abort()

    @staticmethod
    async def pump(served: _Served, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        while data := await src.read(_CHUNK):
            if served.mode != OPEN:  # the bytes are lost; mending closes the connection
                await served.opened.wait()
                return
            dst.write(data)
            await dst.drain()


def main(argv: list[str] | None = None) -> int:
    """The links process: serve links until the control connection closes."""
    parser = argparse.ArgumentParser(prog="python -m mirror_lib.testing.links")
    parser.add_argument("--control", required=True, help="the Unix socket to take requests on")
    args = parser.parse_args(argv)
    with contextlib.suppress(OSError):  # a network is not slower because the machine is busy
        os.nice(_NICE)
    loop = asyncio.new_event_loop()
    server = _Server()
    control = loop.run_until_complete(asyncio.start_unix_server(server.control, args.control))
    try:
        loop.run_forever()
    finally:
        control.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
