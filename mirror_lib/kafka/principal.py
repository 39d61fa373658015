"""The Kafka principal a client authenticates as, read from its librdkafka configuration.

Brokers name a session's principal with their principal builder; with Kafka's default one a SASL
PLAIN or SCRAM login is ``User:<username>`` and a connection without any login (PLAINTEXT, or
TLS without a client certificate) is ``User:ANONYMOUS``. Everything else (a client certificate's
distinguished name after ``ssl.principal.mapping.rules``, Kerberos names after
``sasl.kerberos.principal.to.local.rules``, OAUTHBEARER tokens' subject) is decided by the broker:
it is reported as unknown, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ANONYMOUS = "User:ANONYMOUS"
_NAMED_SASL = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_CLIENT_CERT = (
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl_certificate",
    "ssl.keystore.location",
)


def client_principal(conf: Mapping[str, Any]) -> tuple[str | None, str]:
    """``(principal, how it is known)``, or ``(None, why it cannot be known)``."""
    protocol = str(conf.get("security.protocol", "plaintext")).strip().upper()
    if protocol in ("PLAINTEXT", "SSL"):
        cert = next((k for k in _CLIENT_CERT if conf.get(k)), None) if protocol == "SSL" else None
        if cert is None:
            return ANONYMOUS, f"security.protocol={protocol} without a login"
        return None, (
            f"security.protocol={protocol} with a client certificate ({cert}): the broker "
            "names it from the certificate's distinguished name and its "
            "ssl.principal.mapping.rules"
        )
    mechanism = str(conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "GSSAPI")
    mechanism = mechanism.strip().upper()
    username = str(conf.get("sasl.username") or "").strip()
    if mechanism in _NAMED_SASL and username:
        return f"User:{username}", f"the SASL {mechanism} username"
    return None, f"a SASL {mechanism} login: the broker names its principal"
