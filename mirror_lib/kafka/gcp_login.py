"""The OAUTHBEARER token callback for Google Cloud Managed Service for Apache Kafka.

It makes the token Google's Java ``GcpLoginCallbackHandler`` makes: a JWT-shaped string whose
header is ``{"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}``, whose payload holds ``exp``, ``iat``,
``scope = kafka`` and ``sub`` (the principal's email), and whose third part is the access token of
Application Default Credentials (``google-auth``, extra ``gcp``): a service account key in
``GOOGLE_APPLICATION_CREDENTIALS``, workload identity, impersonation, or the VM's or GKE's
service account. librdkafka asks again before the token expires.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import timezone
from typing import Any

from mirror_lib.errors import ConfigError

GCP_NAME = "GcpLoginCallbackHandler"
_INSTALL = "pip install 'mirror_lib[gcp]' (google-auth)"
_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_HEADER = json.dumps({"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}, separators=(",", ":"))


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


class _Adc:
    """Application Default Credentials, found once per process (per key file named in
    ``GOOGLE_APPLICATION_CREDENTIALS``) and refreshed when expired, as the Java handler keeps
    one credentials object: every client of a slice asks for a token."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[str | None, Any] = {}

    def token(self) -> tuple[str, str, float]:
        """(access token, principal email, expiry in epoch seconds)."""
        import google.auth  # lazy: extra "gcp"
        import google.auth.transport.requests

        with self._lock:
            key_file = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
            if key_file not in self._found:
                self._found[key_file], _project = google.auth.default(scopes=[_SCOPE])
            credentials = self._found[key_file]
            if not hasattr(credentials, "service_account_email"):  # user credentials
                raise NoPrincipal(type(credentials).__name__)
            if not credentials.valid:
                credentials.refresh(google.auth.transport.requests.Request())
            email = getattr(credentials, "service_account_email", None)
            if not email or email == "default":
                raise NoPrincipal(type(credentials).__name__)
            expiry = credentials.expiry.replace(tzinfo=timezone.utc)  # google-auth: naive UTC
            return credentials.token, email, expiry.timestamp()


class NoPrincipal(Exception):
    """Credentials that name no principal email (user credentials), which the token needs."""


_ADC = _Adc()


@dataclass(frozen=True)
class GcpToken:
    """confluent-kafka's ``oauth_cb``: a Google Managed Kafka token and its expiry (epoch s)."""

    where: str  # the key that asked for the Google login, for errors

    def __call__(self, _oauthbearer_config: str | None = None) -> tuple[str, float]:
        access, email, expiry = _ADC.token()
        claims = {"exp": int(expiry), "iat": int(time.time()), "scope": "kafka", "sub": email}
        payload = json.dumps(claims, separators=(",", ":"))
        return ".".join((_b64(_HEADER), _b64(payload), _b64(access))), expiry

    def check(self) -> None:
        """Make one token now, so missing credentials or google-auth fail before anything
        starts (a failing callback only shows as librdkafka's 10 s token timeout)."""
        try:
            self()
        except ImportError as exc:
            raise ConfigError(self.where, GCP_NAME, f"google-auth installed: {_INSTALL}") from exc
        except NoPrincipal as exc:
            raise ConfigError(
                self.where,
                GCP_NAME,
                f"Application Default Credentials that name a service account ({exc} names "
                "none, as user credentials do not): a key in GOOGLE_APPLICATION_CREDENTIALS, "
                "impersonation (gcloud auth application-default login "
                "--impersonate-service-account=...), workload identity, or the VM's account",
            ) from exc
        except Exception as exc:  # google-auth's errors (DefaultCredentialsError, RefreshError)
            raise ConfigError(
                self.where,
                GCP_NAME,
                "Application Default Credentials to make a Google Managed Kafka token: "
                f"{type(exc).__name__}: {exc}",
            ) from exc
