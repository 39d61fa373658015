"""Build confluent-kafka (librdkafka) client configurations from a :class:`ClusterConfig`.

This is the only place where secret references are resolved. Java-only settings that MM2 users
carry over are translated where librdkafka has an equivalent (``sasl.jaas.config`` with the PLAIN
or SCRAM login modules) and rejected with a clear message where it has none (JKS trust stores).
"""

from __future__ import annotations

import re
from typing import Any

from mirror_lib.config import ClusterConfig
from mirror_lib.errors import ConfigError
from mirror_lib.properties import REDACTED, SecretLookup, resolve_references

_JAAS = re.compile(
    r"(?P<module>[\w.]+)\s+required(?P<opts>(?:\s+\w+\s*=\s*(?:\"[^\"]*\"|\S+?))*)\s*;?\s*$"
)
_JAAS_OPT = re.compile(r"(\w+)\s*=\s*(?:\"([^\"]*)\"|([^\s;]+))")
_JAVA_ONLY = {
    "ssl.truststore.location": "ssl.ca.location (a PEM file)",
    "ssl.truststore.password": "ssl.ca.location (a PEM file; no password)",
    "ssl.truststore.type": "ssl.ca.location (a PEM file)",
    "ssl.keystore.type": (
        "ssl.keystore.location (PKCS#12) or ssl.certificate.location + ssl.key.location"
    ),
    "sasl.login.callback.handler.class": "sasl.oauthbearer.* settings",
    "sasl.client.callback.handler.class": "sasl.oauthbearer.* settings",
}
#: Settings that are consumer-only in librdkafka; dropped from other roles to avoid warnings.
_CONSUMER_ONLY = ("isolation.level", "auto.offset.reset", "group.id", "enable.auto.commit")


def _translate_jaas(value: str) -> dict[str, str]:
    match = _JAAS.match(value.strip())
    if not match:
        raise ConfigError("sasl.jaas.config", REDACTED, "'<LoginModule> required key=\"v\" ...;'")
    module = match["module"].rsplit(".", 1)[-1]
    opts = {k: (q if q is not None else u) for k, q, u in _JAAS_OPT.findall(match["opts"])}
    if module in ("PlainLoginModule", "ScramLoginModule"):
        return {
            "sasl.username": opts.get("username", ""),
            "sasl.password": opts.get("password", ""),
        }
    raise ConfigError(
        "sasl.jaas.config",
        module,
        "PlainLoginModule or ScramLoginModule (set sasl.oauthbearer.* directly for OAUTHBEARER)",
    )


def client_config(
    cluster: ClusterConfig,
    role: str,
    *,
    client_id: str | None = None,
    secret_lookup: SecretLookup | None = None,
    defaults: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ready librdkafka config for ``role`` (consumer, producer, admin) of ``cluster``.

    Layers: ``defaults`` (ours, tuning), then the user's settings, then ``extra`` (ours, required
    for correctness, e.g. ``transactional.id``).
    """
    raw = cluster.role_properties(role)
    conf: dict[str, Any] = dict(defaults or {})
    for key, value in raw.items():
        value = resolve_references(f"{cluster.alias}.{key}", value, secret_lookup)
        if key in _JAVA_ONLY:
            raise ConfigError(
                f"{cluster.alias}.{key}",
                value if "password" not in key else REDACTED,
                f"a librdkafka setting: use {_JAVA_ONLY[key]}",
            )
        if key == "sasl.jaas.config":
            conf.update(_translate_jaas(value))
            continue
        if role != "consumer" and key in _CONSUMER_ONLY:
            continue
        conf[key] = value
    if client_id and "client.id" not in conf:
        conf["client.id"] = client_id
    for key, value in (extra or {}).items():
        conf[key] = value
    return conf
