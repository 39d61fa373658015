"""Links (mirror_lib/testing/links.py) in their own process, to a plain TCP server here: an
upstream that goes away closes the connection its client holds through the link, as a process
that dies resets its connections."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from mirror_lib.testing.links import LinkHub


def test_an_upstream_that_closes_closes_its_clients_connection_through_the_link(
    tmp_path: Path,
) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        conn, _ = server.accept()
        accepted.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    hub = LinkHub(tmp_path)
    try:
        link = hub.add("clients>1", server.getsockname()[1], {"clients", "node 1"})
        client = socket.create_connection(("127.0.0.1", link.port), timeout=10)
        thread.join(10)
        client.sendall(b"request")  # a request in flight, waiting for its answer
        assert accepted[0].recv(7) == b"request"
        accepted[0].close()  # the upstream dies with the request unanswered
        started = time.monotonic()
        assert client.recv(1) == b""  # closed: not held open until a request timeout
        assert time.monotonic() - started < 5
        client.close()
    finally:
        hub.close()
        server.close()
