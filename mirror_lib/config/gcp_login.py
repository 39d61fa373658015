"""Google Cloud Managed Service for Apache Kafka logins as Java clients write them.

Google's Java clients log in with ``sasl.mechanism = OAUTHBEARER``, ``OAuthBearerLoginModule`` and
the login callback ``com.google.cloud.hosted.kafka.auth.GcpLoginCallbackHandler``, which wraps an
access token of Application Default Credentials in the token format the brokers take. librdkafka
cannot load that class; the login becomes OAUTHBEARER plus the marker :data:`GCP_LOGIN`, which
:func:`mirror_lib.kafka.clients.client_config` replaces by a token callback that makes the same
token (:mod:`mirror_lib.kafka.gcp_login`).
"""

from __future__ import annotations

import json
from typing import Any

from mirror_lib.config.jaas import name_leftovers, parse_jaas
from mirror_lib.errors import ConfigError

#: Marker in translated settings; never reaches librdkafka.
GCP_LOGIN = "mirror.gcp.login"
GCP_HANDLER = "com.google.cloud.hosted.kafka.auth.GcpLoginCallbackHandler"
_WHY_IGNORED = "GcpLoginCallbackHandler takes no options (Application Default Credentials)"


def take_gcp_login(rest: dict[str, tuple[str, str]], out: dict[str, Any], notes: list[str]) -> None:
    """Move a Google Managed Kafka login from the Java ``rest`` to ``out``: OAUTHBEARER and the
    marker. Refuses one without OAUTHBEARER or ``OAuthBearerLoginModule``, naming the key."""
    handler = rest.get("sasl.login.callback.handler.class")
    if handler is None or handler[0].strip() != GCP_HANDLER:
        return
    prefix = handler[1].removesuffix("sasl.login.callback.handler.class")
    mechanism = rest.get("sasl.mechanism") or rest.get("sasl.mechanisms")
    if mechanism is None or mechanism[0].strip().upper() != "OAUTHBEARER":
        raise ConfigError(
            mechanism[1] if mechanism else f"{prefix}sasl.mechanism",
            mechanism[0] if mechanism else None,
            f"OAUTHBEARER for {GCP_HANDLER}",
        )
    jaas = rest.get("sasl.jaas.config")
    module = None if jaas is None else parse_jaas(*jaas)
    if jaas is None or module is None or module.simple_name != "OAuthBearerLoginModule":
        raise ConfigError(
            jaas[1] if jaas else f"{prefix}sasl.jaas.config",
            None if module is None else module.module,
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required; "
            f"for {GCP_HANDLER}",
        )
    name_leftovers(module, jaas[1], set(), notes, _WHY_IGNORED)
    for key in ("sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config"):
        rest.pop(key, None)
    rest.pop("sasl.login.callback.handler.class")
    out["sasl.mechanism"] = "OAUTHBEARER"
    out[GCP_LOGIN] = json.dumps({"where": handler[1]})
