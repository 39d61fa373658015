"""Before anything starts: each cluster answers, and each client reaches the cluster it is for.

A role's own ``bootstrap.servers`` (``B.producer.bootstrap.servers``, or a flow's
``A->B.producer.bootstrap.servers`` / ``A->B.producer.override.bootstrap.servers`` as AWS's MSK
migration samples write it) replaces the cluster's for that one client. That is right when it
names another listener of the same cluster. When it names another cluster, the producer would
write where the delivery ledger is not read, and exactly-once would no longer hold. So the run
compares the cluster id each address reports (Kafka's Metadata) before anything starts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mirror_lib.config.model import ClusterConfig, MirrorConfig
from mirror_lib.config.properties import REDACTED, resolve_references
from mirror_lib.errors import BrokerError, ConfigError
from mirror_lib.kafka.client_check import ClientSpec, client_specs
from mirror_lib.kafka.clients import client_config, raw_settings

_log = logging.getLogger(__name__)
_QUIET = logging.getLogger("mirror_lib.librdkafka")

#: Keys that carry a client's login, as written in mm2.properties (the first one set is named).
_LOGIN_KEYS = (
    "sasl.jaas.config",
    "sasl.password",
    "sasl.username",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.secret",
)

#: (side, role) -> what would go wrong if that client worked on another cluster.
_CONSEQUENCE = {
    ("source", "consumer"): "records would be read from another cluster than the one whose "
    "topics and offsets the flow lists",
    ("source", "admin"): "topics and offsets would be listed on another cluster than the one "
    "the records are read from",
    ("source", "producer"): "offset syncs would be written to another cluster than the source",
    ("target", "producer"): "the replicated records would be written to another cluster than "
    "the one the delivery ledger is read from, so exactly-once could not hold",
    ("target", "consumer"): "the delivery ledger would be read from another cluster than the "
    "one the records are written to, so exactly-once could not hold",
    ("target", "admin"): "remote topics would be created on another cluster than the one the "
    "records are written to",
}


@dataclass(frozen=True)
class Diverted:
    """A client whose ``bootstrap.servers`` is set for its role, not the cluster's."""

    spec: ClientSpec
    key: str  # the key as written, e.g. ``A->B.producer.override.bootstrap.servers``
    value: str  # as written (it may hold a reference)
    cluster_value: str  # the cluster's ``bootstrap.servers``, as written

    def note(self) -> str:
        """The line ``mirror validate`` shows."""
        return (
            f"{self.key} = {self.value}: {self.spec.describe()} connects there instead of "
            f"{self.spec.alias}.bootstrap.servers = {self.cluster_value}; mirror run checks "
            "before it starts that both reach the same cluster (its cluster id)"
        )


def _servers(text: str) -> frozenset[str]:
    return frozenset(s.strip().lower() for s in text.split(",") if s.strip())


def diverted_clients(
    config: MirrorConfig,
    flow_names: Sequence[str] | None = None,
    *,
    resolve: bool = False,
    heartbeats: bool = True,
) -> list[Diverted]:
    """The clients of the given (default: enabled) flows, and of the heartbeat flows a run adds
    unless ``heartbeats=False``, whose ``bootstrap.servers`` is their role's own and not written
    as the cluster's; offline, nothing connects."""
    out = []
    for spec in client_specs(config, flow_names, resolve=resolve):
        if not heartbeats and flow_names is not None and spec.flow not in flow_names:
            continue
        cluster = config.cluster(spec.alias)
        overrides = config.flow(spec.flow).overrides(spec.side, spec.role)
        value, key = raw_settings(cluster, spec.role, overrides)[0]["bootstrap.servers"]
        if _servers(value) != _servers(cluster.bootstrap_servers):
            out.append(Diverted(spec, key, value, cluster.bootstrap_servers))
    return out


class LoginRefused(Exception):
    """The cluster refused a client's credentials (librdkafka's ``_AUTHENTICATION``)."""


def _cluster_id(role: str, conf: dict[str, Any], timeout_s: float) -> str | None:
    """The cluster id the brokers at ``conf``'s bootstrap report, asked by a client of ``role``
    built from ``conf`` (its own security settings); raises KafkaException when unreachable and
    :class:`LoginRefused` as soon as the cluster refuses the client's login."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer  # lazy: "kafka"

    from mirror_lib.kafka.admin import admin_client  # lazy: confluent-kafka

    refused: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            refused.append(err.str())

    conf = {**conf, "logger": _QUIET, "error_cb": on_error}
    client: Any = Consumer(conf) if role == "consumer" else None
    if client is None:
        client = Producer(conf) if role == "producer" else admin_client(conf)
    deadline = time.monotonic() + timeout_s
    try:
        while True:  # short asks: a refused login is told by the error callback, at once
            left = deadline - time.monotonic()
            try:
                return client.list_topics(timeout=max(0.1, min(1.0, left))).cluster_id
            except KafkaException:
                client.poll(0.05)  # serves the error callback
                if refused:
                    raise LoginRefused(refused[0]) from None
                if left <= 1.0:
                    raise
    finally:
        if role == "consumer":
            client.close()


def credentials_key(cluster: ClusterConfig, role: str, overrides: Any = None) -> str:
    """The key, as written, that holds the login of ``role``'s client on ``cluster``."""
    raw, _role_keys = raw_settings(cluster, role, overrides)
    for key in _LOGIN_KEYS:
        if key in raw:
            return raw[key][1]
    return f"{cluster.alias}.sasl.jaas.config"


def _login_refused(
    cluster: ClusterConfig, role: str, exc: LoginRefused, overrides: Any = None
) -> ConfigError:
    return ConfigError(
        credentials_key(cluster, role, overrides),
        REDACTED,
        f"a login that cluster {cluster.alias} (bootstrap {cluster.bootstrap_servers}) "
        f"accepts; it refused this one: {exc}; nothing was started",
    )


def _unreachable(alias: str, key: str, servers: str, timeout_s: float, exc: Any) -> BrokerError:
    return BrokerError(
        f"cannot reach cluster {alias} at {key}={servers} within {timeout_s:.0f}s "
        f"({exc.args[0].str()}); nothing was started",
        transient=True,
    )


def check_clusters(config: MirrorConfig, aliases: list[str], timeout_s: float = 10) -> None:
    """Fail fast, before any query starts, when a cluster cannot be reached."""
    from confluent_kafka import KafkaException  # lazy: optional extra "kafka"

    for alias in dict.fromkeys(aliases):
        cluster = config.cluster(alias)
        try:
            _cluster_id("admin", client_config(cluster, "admin"), timeout_s)
        except LoginRefused as exc:
            raise _login_refused(cluster, "admin", exc) from None
        except KafkaException as exc:
            key = f"{alias}.bootstrap.servers"
            raise _unreachable(alias, key, cluster.bootstrap_servers, timeout_s, exc) from exc


def check_client_addresses(
    config: MirrorConfig,
    flow_names: Sequence[str] | None = None,
    timeout_s: float = 10,
    *,
    heartbeats: bool = True,
) -> None:
    """Refuse, before anything starts, a client whose own ``bootstrap.servers`` reaches another
    cluster than its cluster's ``bootstrap.servers``: ConfigError naming the key as written.
    Connects only for such clients; an address of the same cluster (another listener) passes.
    ``heartbeats=False``: only the named flows' clients (cutover, verify), not a run's."""
    from confluent_kafka import KafkaException  # lazy: optional extra "kafka"

    ids: dict[str, str | None] = {}
    for d in diverted_clients(config, flow_names, resolve=True, heartbeats=heartbeats):
        alias, cluster = d.spec.alias, config.cluster(d.spec.alias)
        own = resolve_references(
            f"{alias}.bootstrap.servers", d.cluster_value, None, cluster.providers
        )
        servers = str(d.spec.conf["bootstrap.servers"])
        if _servers(servers) == _servers(own):  # the same once references are resolved
            continue
        if alias not in ids:
            conf = client_config(cluster, "admin", extra={"bootstrap.servers": own})
            try:
                ids[alias] = _cluster_id("admin", conf, timeout_s)
            except LoginRefused as exc:
                raise _login_refused(cluster, "admin", exc) from None
            except KafkaException as exc:
                key = f"{alias}.bootstrap.servers"
                raise _unreachable(alias, key, own, timeout_s, exc) from exc
        overrides = config.flow(d.spec.flow).overrides(d.spec.side, d.spec.role)
        try:
            got = _cluster_id(d.spec.role, d.spec.conf, timeout_s)
        except LoginRefused as exc:
            raise _login_refused(cluster, d.spec.role, exc, overrides) from None
        except KafkaException as exc:
            raise _unreachable(alias, d.key, servers, timeout_s, exc) from exc
        want = ids[alias]
        if not got or not want:
            _log.warning(
                "%s = %s: cannot tell whether it reaches cluster %s (no cluster id reported)",
                d.key,
                d.value,
                alias,
            )
        elif got != want:
            raise ConfigError(
                d.key,
                d.value,
                f"an address of {d.spec.side} cluster {alias}, or no such key: it reaches the "
                f"cluster with id {got!r}, while {alias}.bootstrap.servers = {own} reaches "
                f"{want!r}, so for {d.spec.describe()} "
                + _CONSEQUENCE.get((d.spec.side, d.spec.role), "its work would go elsewhere"),
            )
