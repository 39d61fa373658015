"""A Google Cloud environment that never leaves the machine: no gcloud configuration, no
metadata server (its address is a closed loopback port), and service account keys whose token
endpoint is a local fake (tests/helpers/fake_idp.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

EMAIL = "mirror@mirror-test.iam.gserviceaccount.com"


def offline_gcp(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Only this test's Google settings: none, until a test names a key file."""
    for name in list(os.environ):
        if name.startswith(("GOOGLE_", "CLOUDSDK_", "GCE_")):
            monkeypatch.delenv(name)
    (folder / "gcloud").mkdir(exist_ok=True)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(folder / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")


def service_account_key(
    monkeypatch: pytest.MonkeyPatch, folder: Path, token_uri: str
) -> rsa.RSAPrivateKey:
    """A service account key file as the Cloud console writes it, named in
    ``GOOGLE_APPLICATION_CREDENTIALS``; its tokens come from ``token_uri``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "mirror-test",
        "private_key_id": "k1",
        "private_key": pem,
        "client_email": EMAIL,
        "client_id": "1",
        "token_uri": token_uri,
    }
    path = folder / "service-account.json"
    path.write_text(json.dumps(info))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    return key
