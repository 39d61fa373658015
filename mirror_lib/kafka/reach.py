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
import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mirror_lib.config.model import ClusterConfig, MirrorConfig
from mirror_lib.config.properties import REDACTED, resolve_references
from mirror_lib.errors import BrokerError, ConfigError
from mirror_lib.kafka.client_check import ClientSpec, client_specs
from mirror_lib.kafka.clients import client_config, librdkafka_logger, raw_settings

_log = logging.getLogger(__name__)

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


class Unreachable(Exception):
    """No broker of a bootstrap list answered in time; ``tried`` says what each one did."""

    def __init__(self, tried: str) -> None:
        super().__init__(tried)
        self.tried = tried


#: ``127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms
#: in state CONNECT)`` -> the address and what happened, without librdkafka's timing.
_BROKER_ERROR = re.compile(r"^(?P<addr>\S+?)(?:/\w+)?: (?P<what>.*?)(?: \(after \d+ms.*\))?$")


def tried_text(errors: Sequence[str], fallback: str) -> str:
    """What each broker did, its latest error once, from librdkafka's error texts:
    ``127.0.0.1:1: Connect to ipv4#127.0.0.1:1 failed: Connection refused``; ``fallback`` when
    it reported none (its ``1/1 brokers are down`` counts are left out)."""
    said: dict[str, str] = {}
    for text in errors:
        match = _BROKER_ERROR.match(text)
        if match:
            said[match["addr"]] = match["what"]
    return ", ".join(f"{addr}: {what}" for addr, what in said.items()) or fallback


def _cluster_id(role: str, conf: dict[str, Any], timeout_s: float) -> str | None:
    """The cluster id the brokers at ``conf``'s bootstrap report, asked by a client of ``role``
    built from ``conf`` (its own security settings); raises :class:`Unreachable` when no broker
    answers in ``timeout_s`` and :class:`LoginRefused` as soon as the cluster refuses the
    client's login. librdkafka's own log lines go to the ``mirror_lib.librdkafka`` logger."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer  # lazy: "kafka"

    from mirror_lib.kafka.admin import admin_client  # lazy: confluent-kafka

    refused: list[str] = []
    errors: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            refused.append(err.str())
        errors.append(err.str())

    conf = {**conf, "logger": conf.get("logger", librdkafka_logger()), "error_cb": on_error}
    client: Any = Consumer(conf) if role == "consumer" else None
    if client is None:
        client = Producer(conf) if role == "producer" else admin_client(conf)
    deadline = time.monotonic() + timeout_s
    try:
        while True:  # short asks: a refused login is told by the error callback, at once
            left = deadline - time.monotonic()
            try:
                return client.list_topics(timeout=max(0.1, min(1.0, left))).cluster_id
            except KafkaException as exc:
                client.poll(0.05)  # serves the error callback
                if refused:
                    raise LoginRefused(refused[0]) from None
                if left <= 1.0:
                    raise Unreachable(tried_text(errors, exc.args[0].str())) from None
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


def _unreachable_text(
    alias: str, key: str, servers: str, timeout_s: float, exc: Unreachable, role: str | None
) -> str:
    who = f"cluster {alias}" + (f" ({role})" if role else "")
    return (
        f"cannot reach {who} at {key} = {servers}: no broker answered a metadata request "
        f"within {timeout_s:.0f}s (tried {exc.tried})"
    )


def _unreachable(
    alias: str, key: str, servers: str, timeout_s: float, exc: Unreachable
) -> BrokerError:
    text = _unreachable_text(alias, key, servers, timeout_s, exc, None)
    return BrokerError(f"{text}; nothing was started", transient=True)


def flow_roles(
    config: MirrorConfig, flow_names: Sequence[str], sides: Sequence[str]
) -> dict[str, str]:
    """alias -> its roles in the named flows, as an error names them: ``source of A->B``,
    ``target of A->B, source of B->C``; only the ``sides`` asked for."""
    roles: dict[str, list[str]] = {}
    for name in flow_names:
        flow = config.flow(name)
        for side in sides:
            alias = flow.source if side == "source" else flow.target
            roles.setdefault(alias, []).append(f"{side} of {flow.name}")
    return {alias: ", ".join(dict.fromkeys(said)) for alias, said in roles.items()}


def check_clusters(
    config: MirrorConfig,
    aliases: Sequence[str],
    timeout_s: float = 10,
    *,
    roles: Mapping[str, str] | None = None,
    kept: str = "nothing was started",
) -> None:
    """Fail fast, before anything starts, when a cluster cannot be reached: every cluster is
    asked at once, so the answer comes within ``timeout_s`` however many are down. One
    :class:`BrokerError` line names each unreachable cluster, its role (``roles``), its
    bootstrap servers and what each broker did; ``kept`` ends it (what the command left as
    it was). A refused login is a :class:`ConfigError` naming the key that holds it."""
    clusters = [config.cluster(alias) for alias in dict.fromkeys(aliases)]

    def probe(cluster: ClusterConfig) -> Exception | None:
        try:
            _cluster_id("admin", client_config(cluster, "admin"), timeout_s)
        except (LoginRefused, Unreachable) as exc:
            return exc
        return None

    with ThreadPoolExecutor(max(1, len(clusters)), thread_name_prefix="mirror-reach") as pool:
        outcomes = list(zip(clusters, pool.map(probe, clusters), strict=True))
    down = []
    for cluster, exc in outcomes:
        if isinstance(exc, LoginRefused):
            raise _login_refused(cluster, "admin", exc)
        if isinstance(exc, Unreachable):
            alias, servers = cluster.alias, cluster.bootstrap_servers
            role = (roles or {}).get(alias)
            key = f"{alias}.bootstrap.servers"
            down.append(_unreachable_text(alias, key, servers, timeout_s, exc, role))
    if down:
        raise BrokerError("; ".join(down) + f"; {kept}", transient=True)


def check_flow_clusters(
    config: MirrorConfig,
    flow_names: Sequence[str],
    sides: Sequence[str] = ("source", "target"),
    *,
    timeout_s: float = 10,
    kept: str = "nothing was started",
) -> None:
    """:func:`check_clusters` for the ``sides`` of the named flows, each cluster named with
    its role: what every command that talks to Kafka calls before it starts."""
    roles = flow_roles(config, flow_names, sides)
    check_clusters(config, list(roles), timeout_s, roles=roles, kept=kept)


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
            except Unreachable as exc:
                key = f"{alias}.bootstrap.servers"
                raise _unreachable(alias, key, own, timeout_s, exc) from None
        overrides = config.flow(d.spec.flow).overrides(d.spec.side, d.spec.role)
        try:
            got = _cluster_id(d.spec.role, d.spec.conf, timeout_s)
        except LoginRefused as exc:
            raise _login_refused(cluster, d.spec.role, exc, overrides) from None
        except Unreachable as exc:
            raise _unreachable(alias, d.key, servers, timeout_s, exc) from None
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
