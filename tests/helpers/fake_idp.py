"""A local OAuth token endpoint on 127.0.0.1: librdkafka's OIDC login posts its real token
request here (client credentials or a signed jwt-bearer assertion), and tests read what it was
sent. It answers with an unsigned JWT access token, which no broker is asked to accept."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs


@dataclass
class TokenRequest:
    """One token request: its form fields, the client id and secret of its Basic header, and
    the access token it was given."""

    form: dict[str, str]
    basic: tuple[str, str] | None
    access_token: str


@dataclass
class FakeIdp:
    url: str
    requests: list[TokenRequest] = field(default_factory=list)

    def first(self, timeout_s: float = 10.0, poll: Any = None) -> TokenRequest:
        """The first token request, waiting for it (``poll``: a client's poll, which serves
        librdkafka's token refresh)."""
        deadline = time.monotonic() + timeout_s
        while not self.requests:
            if time.monotonic() > deadline:
                raise AssertionError(f"no token request reached {self.url} in {timeout_s} s")
            poll(0.1) if poll is not None else time.sleep(0.05)
        return self.requests[0]


def b64url_json(part: str) -> dict[str, Any]:
    """One decoded part (header or payload) of a JWT."""
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def _access_token() -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = time.time()
    return f"{part({'alg': 'none'})}.{part({'sub': 'mirror', 'iat': now, 'exp': now + 3600})}."


@contextmanager
def fake_idp() -> Iterator[FakeIdp]:
    """Serve a token endpoint for one test."""
    idp = FakeIdp("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            basic = None
            header = self.headers.get("Authorization", "")
            if header.startswith("Basic "):
                user, _, secret = base64.b64decode(header[6:]).decode().partition(":")
                basic = (user, secret)
            form = {k: v[0] for k, v in parse_qs(body).items()}
            access = _access_token()
            idp.requests.append(TokenRequest(form, basic, access))
            answer = json.dumps(
                {"access_token": access, "token_type": "bearer", "expires_in": 3600}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    idp.url = f"http://127.0.0.1:{server.server_address[1]}/oauth2/token"
    try:
        yield idp
    finally:
        server.shutdown()
        server.server_close()
