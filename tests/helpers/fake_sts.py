"""A local stand-in for AWS STS (AssumeRole, GetCallerIdentity) on 127.0.0.1, reached through
``AWS_ENDPOINT_URL_STS``: botocore sends it real signed query-protocol requests, and it answers
in STS's XML. Tests read what it was asked, and can make it refuse."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

ASSUMED_KEY_ID = "ASIAMIRRORASSUMED"
_NS = 'xmlns="https://sts.amazonaws.com/doc/2011-06-15/"'


@dataclass
class FakeSts:
    """What the fake was asked: each request's form fields plus the key id that signed it."""

    url: str
    calls: list[dict[str, str]] = field(default_factory=list)
    refuse: bool = False  # answer AssumeRole with AccessDenied

    def assumed(self) -> list[dict[str, str]]:
        return [c for c in self.calls if c["Action"] == "AssumeRole"]


def _result(action: str, inner: str) -> tuple[int, str]:
    return (
        200,
        f"<{action}Response {_NS}><{action}Result>{inner}</{action}Result></{action}Response>",
    )


def _answer(sts: FakeSts, form: dict[str, str]) -> tuple[int, str]:
    action = form["Action"]
    if action == "GetCallerIdentity":
        arn = f"arn:aws:sts::123456789012:assumed-role/mirror/{form['signed_by']}"
        return _result(
            action, f"<Arn>{arn}</Arn><UserId>AROA</UserId><Account>123456789012</Account>"
        )
    if sts.refuse:
        error = "<Type>Sender</Type><Code>AccessDenied</Code><Message>not authorized</Message>"
        return 403, f"<ErrorResponse {_NS}><Error>{error}</Error></ErrorResponse>"
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    keys = (
        f"<AccessKeyId>{ASSUMED_KEY_ID}</AccessKeyId><SecretAccessKey>s</SecretAccessKey>"
        f"<SessionToken>assumed-session-token</SessionToken><Expiration>{expires}</Expiration>"
    )
    user = (
        f"<Arn>{form['RoleArn']}</Arn><AssumedRoleId>AROA:{form['RoleSessionName']}</AssumedRoleId>"
    )
    return _result(
        action, f"<Credentials>{keys}</Credentials><AssumedRoleUser>{user}</AssumedRoleUser>"
    )


@contextmanager
def fake_sts(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSts]:
    """Serve the fake for one test and point botocore's STS clients at it."""
    sts = FakeSts("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            signed = re.search(r"Credential=([^/]+)/", self.headers.get("Authorization", ""))
            form["signed_by"] = signed.group(1) if signed else ""
            sts.calls.append(form)
            status, body = _answer(sts, form)
            self.send_response(status)
            self.send_header("Content-Type", "text/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    sts.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.url)
    try:
        yield sts
    finally:
        server.shutdown()
        server.server_close()
