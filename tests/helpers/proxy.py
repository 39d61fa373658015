"""A loopback TCP proxy for fault tests: open, refuse, blackhole (cut and hang) or slow; and
one that ends TLS in front of a plaintext broker (:class:`TlsProxy`).

``mirror run`` reaches a broker only through the proxy when the broker advertises the proxy's
port (:func:`proxied_broker`), so cutting the proxy is an outage of that cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mirror_lib.testing import embedded, kafka_broker
from mirror_lib.testing.clusters import broker_kind

OPEN, REFUSE, BLACKHOLE, SLOW = "open", "refuse", "blackhole", "slow"


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``upstream``; :meth:`set_mode` injects faults.

    - ``refuse``: existing connections are cut and new ones refused (nothing listens).
    - ``blackhole``: existing connections are cut; new ones are accepted and never answered.
    - ``slow``: every forwarded chunk is delayed by ``delay_s``.
    """

    def __init__(self, port: int, upstream: int) -> None:
        self.port, self.upstream = port, upstream
        self.mode, self.delay_s = OPEN, 0.0
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._stopped = False

    def start(self) -> TcpProxy:
        self._listen()
        return self

    def _listen(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        self._listener = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # listener closed
            with self._lock:
                self._conns.append(client)
                mode = self.mode
            if mode == BLACKHOLE:
                continue  # held open, never answered, cut at the next mode change
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.append(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b, a is upstream), daemon=True).start()

    def _forwarded(self, from_broker: bool, n: int) -> None:
        """Called for every chunk forwarded (``n`` bytes); :class:`CountingProxy` counts."""

    def _pump(self, src: socket.socket, dst: socket.socket, from_broker: bool = False) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self._forwarded(from_broker, len(data))
                if self.mode == SLOW:
                    time.sleep(self.delay_s)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def _cut(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def set_mode(self, mode: str, delay_s: float = 0.0) -> None:
        """Switch to ``mode``; every change but to/from ``slow`` cuts live connections."""
        with self._lock:
            previous, self.mode, self.delay_s = self.mode, mode, delay_s
        if mode == SLOW or (previous == SLOW and mode == OPEN):
            return
        if mode == REFUSE and self._listener is not None:
            self._listener.close()
            self._listener = None
        self._cut()
        if mode != REFUSE and self._listener is None and not self._stopped:
            self._listen()

    def stop(self) -> None:
        self._stopped = True
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self._cut()


class CountingProxy(TcpProxy):
    """A :class:`TcpProxy` that counts the bytes the broker sends to its clients (what a
    cross-datacenter link would carry from that cluster): :attr:`from_broker`, :meth:`reset`."""

    def __init__(self, port: int, upstream: int) -> None:
        super().__init__(port, upstream)
        self.from_broker = 0
        self._count_lock = threading.Lock()

    def _forwarded(self, from_broker: bool, n: int) -> None:
        if from_broker:
            with self._count_lock:
                self.from_broker += n

    def reset(self) -> int:
        """Count from zero again; returns the count so far."""
        with self._count_lock:
            count, self.from_broker = self.from_broker, 0
        return count


class LostAckProxy(TcpProxy):
    """A :class:`TcpProxy` that loses the broker's answers to Produce requests while
    :attr:`losing` is on: the records are written, the producer never hears so. :meth:`cut`
    then closes the connections, and the producer sends its requests again."""

    def __init__(self, port: int, upstream: int) -> None:
        super().__init__(port, upstream)
        self.losing = False
        self.lost = 0  # answers dropped
        self._produce_ids: dict[socket.socket, set[int]] = {}  # per client connection

    def cut(self) -> None:
        self.losing = False
        self._cut()

    def _pump(self, src: socket.socket, dst: socket.socket, from_broker: bool = False) -> None:
        client = dst if from_broker else src
        ids = self._produce_ids.setdefault(client, set())
        pending = b""
        try:
            while data := src.recv(65536):
                pending += data
                # whole frames only: a 4-byte size, then a request or response of that size
                while len(pending) >= 4:
                    size = 4 + int.from_bytes(pending[:4], "big")
                    if len(pending) < size:
                        break
                    frame, pending = pending[:size], pending[size:]
                    if not from_broker and frame[4:6] == b"\x00\x00":  # api key 0: Produce
                        ids.add(int.from_bytes(frame[8:12], "big"))
                    elif from_broker and self.losing and int.from_bytes(frame[4:8], "big") in ids:
                        self.lost += 1
                        continue
                    dst.sendall(frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


class TlsProxy:
    """Ends TLS in front of a plaintext broker: clients connect with ``security.protocol = SSL``
    and must trust ``context``'s certificate (and, when ``context`` requires one, present a
    certificate it trusts). :attr:`peers`: the client certificates seen. asyncio, in a thread of
    its own: its TLS reads and writes of a connection never run at once (OpenSSL's rule)."""

    def __init__(self, port: int, upstream: int, context: ssl.SSLContext) -> None:
        self.port, self.upstream, self.context = port, upstream, context
        self.peers: list[dict] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None

    def start(self) -> TlsProxy:
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        if not ready.wait(10) or self._server is None:
            raise RuntimeError(f"TLS proxy did not listen on 127.0.0.1:{self.port}")
        return self

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        serve = asyncio.start_server(self._handle, "127.0.0.1", self.port, ssl=self.context)
        try:
            self._server = self._loop.run_until_complete(serve)
        finally:
            ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if peer := writer.get_extra_info("peercert"):
            self.peers.append(peer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    def stop(self) -> None:
        def close() -> None:
            if self._server is not None:
                self._server.close()
            self._loop.stop()

        if self._loop.is_running():
            self._loop.call_soon_threadsafe(close)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        # a pipe still waiting when the proxy stopped is closed by the garbage collector, after
        # its loop: "Event loop is closed", printed as unraisable in the middle of later tests
        with contextlib.suppress(RuntimeError):
            writer.close()


@contextlib.contextmanager
def proxied_broker(
    alias: str, workdir: Path, proxy_class: Callable[[int, int], TcpProxy] = TcpProxy
) -> Iterator[tuple[Any, Any]]:
    """A broker that clients reach through a proxy, and that proxy (both stopped afterwards).

    Clients bootstrap at ``127.0.0.1:<proxy.port>``; every connection of theirs goes through
    the proxy, while the broker's own ``bootstrap_servers`` stays direct (tests produce and
    check there, also during an outage). Apache Kafka by default (a second listener that
    advertises the proxy); tansu under ``MIRROR_TEST_BROKER=tansu``.
    ``proxy_class``: e.g. :class:`CountingProxy`, or ``functools.partial(TlsProxy, context=...)``.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    if broker_kind() == "kafka":
        listen = embedded.free_port(set())
        proxy = proxy_class(embedded.free_port({listen}), listen).start()
        try:
            options = kafka_broker.KafkaOptions(proxied=(listen, proxy.port))
            (broker,) = kafka_broker.start_kafka([alias], workdir, options)
        except BaseException:
            proxy.stop()
            raise
        try:
            yield broker, proxy
        finally:
            proxy.stop()
            kafka_broker.stop_kafka([broker])
        return
    binary = embedded.tansu_binary()
    for _attempt in range(5):
        broker_port = embedded.free_port(set())
        proxy = proxy_class(embedded.free_port({broker_port}), broker_port).start()
        tansu = embedded._launch(binary, alias, broker_port, workdir, advertised_port=proxy.port)
        try:
            if embedded._wait_ready(tansu, time.monotonic() + 30):
                break
        except BaseException:
            proxy.stop()
            embedded.stop_brokers([tansu])
            raise
        proxy.stop()
        embedded.stop_brokers([tansu])
    else:
        raise RuntimeError(f"no free port pair for proxied broker {alias} after 5 attempts")
    try:
        yield tansu, proxy
    finally:
        proxy.stop()
        embedded.stop_brokers([tansu])


def bootstrap(proxy: TcpProxy) -> str:
    """Bootstrap servers that go through ``proxy``."""
    return f"127.0.0.1:{proxy.port}"
