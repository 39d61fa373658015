"""An AWS environment that never leaves the machine: fixed keys, no profile files, no instance
metadata. The MSK IAM signer signs offline (SigV4 is local); nothing here contacts AWS."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

KEY_ID = "AKIDMIRRORTEST"


def offline_aws(monkeypatch: pytest.MonkeyPatch, folder: Path, keys: bool = True) -> None:
    """Only this test's AWS settings: ``keys`` in the environment, or no credentials at all."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(folder / "aws-config-none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "aws-credentials-none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    if keys:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "mirror/test/secret")


def token_url(token: str) -> tuple[str, dict[str, str]]:
    """The signed URL inside an MSK IAM token: host and query parameters."""
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    parsed = urlparse(url)
    return parsed.netloc, {k: v[0] for k, v in parse_qs(parsed.query).items()}
