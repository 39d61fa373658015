"""Build confluent-kafka (librdkafka) client configurations from a :class:`ClusterConfig`.

This is the only place where secret references are resolved. Java client settings that MM2 users
carry over are translated by :mod:`mirror_lib.config.java_clients` (same name, renamed, ignored
with one
warning, or refused with the way out); :func:`check_clients` builds every client configuration
without resolving secrets, so ``mirror validate`` refuses whatever ``mirror run`` would, and
:mod:`mirror_lib.kafka.client_check` then constructs the clients themselves, offline.

:func:`client_principal` reads a built configuration back: the Kafka principal it logs in as.
Brokers name a session's principal with their principal builder; with Kafka's default one a SASL
PLAIN or SCRAM login is ``User:<username>`` and a connection without any login (PLAINTEXT, or
TLS without a client certificate) is ``User:ANONYMOUS``. Everything else (a client certificate's
distinguished name after ``ssl.principal.mapping.rules``, Kerberos names after
``sasl.kerberos.principal.to.local.rules``, OAUTHBEARER tokens' subject) is decided by the broker:
it is reported as unknown, with the reason.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from mirror_lib.config.gcp_login import GCP_LOGIN
from mirror_lib.config.jaas import translate_jaas
from mirror_lib.config.java_clients import translate
from mirror_lib.config.model import ROLES, ClusterConfig, FlowConfig, MirrorConfig, idempotence_off
from mirror_lib.config.msk_iam import MSK_IAM
from mirror_lib.config.properties import SecretLookup, resolve_references
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.gcp_login import GcpToken
from mirror_lib.kafka.msk_iam import region_note, token_callback

_log = logging.getLogger(__name__)
_WARNED: set[str] = set()

#: The Python logger that librdkafka's own lines (``%3|...|FAIL|rdkafka#consumer-1| ...``) go
#: to: the start-up probes' and those of every client built inside a
#: :func:`routed_librdkafka_logs` block. It drops them unless the application gives it (or the
#: root logger) a handler.
LIBRDKAFKA_LOGGER = "mirror_lib.librdkafka"
logging.getLogger(LIBRDKAFKA_LOGGER).addHandler(logging.NullHandler())
_ROUTED: list[bool] = []


def librdkafka_logger() -> logging.Logger:
    """The logger of librdkafka's own lines (:data:`LIBRDKAFKA_LOGGER`)."""
    return logging.getLogger(LIBRDKAFKA_LOGGER)


@contextlib.contextmanager
def routed_librdkafka_logs(verbose: bool) -> Iterator[None]:
    """While in the block, librdkafka's own lines of every client this process builds go to
    :func:`librdkafka_logger` instead of straight to stderr: shown on stderr (prefixed
    ``librdkafka:``) only when ``verbose``, as ``mirror --verbose`` asks. A client whose
    settings ask for librdkafka's ``debug`` output keeps writing it to stderr."""
    logger = librdkafka_logger()
    saved = (logger.propagate, logger.level, list(logger.handlers), list(_ROUTED))
    logger.propagate = False
    if verbose:
        shown = logging.StreamHandler()
        shown.setFormatter(logging.Formatter("librdkafka: %(message)s"))
        logger.addHandler(shown)
        logger.setLevel(logging.DEBUG)
    _ROUTED[:] = [True]
    try:
        yield
    finally:
        logger.propagate, level, logger.handlers, _ROUTED[:] = saved
        logger.setLevel(level)


def _translate_jaas(value: str, key: str = "sasl.jaas.config") -> dict[str, str]:
    """librdkafka's SASL settings for a ``sasl.jaas.config`` value (see
    :mod:`mirror_lib.config.jaas`)."""
    return translate_jaas(value, key)


#: librdkafka's default transaction.timeout.ms.
TRANSACTION_TIMEOUT_MS = 60000

#: Every client's defaults, under the user's settings: the Java clients' (MM2's), where
#: librdkafka's wait longer for a broker that went away (docs/how-it-works.md#faults-on-a-cluster).
#: ``reconnect.backoff.max.ms`` (librdkafka: 10 s): a client learns a partition's new leader after
#: a broker is lost only at its next reconnect attempt to the lost one; with the backoff grown to
#: 6-10 s while the controller waited out the broker's session (9 s), a slot waited 16 s after a
#: leader was killed instead of 10. ``socket.timeout.ms`` (librdkafka: 60 s, Java's
#: ``request.timeout.ms``: 30 s) and ``socket.connection.setup.timeout.ms`` (30 s, Java: 10 s):
#: a broker cut off by the network holds requests and connection attempts that long.
CLIENT_DEFAULTS: dict[str, Any] = {
    "reconnect.backoff.max.ms": 1000,
    "socket.timeout.ms": 30000,
    "socket.connection.setup.timeout.ms": 10000,
}


def raw_settings(
    cluster: ClusterConfig, role: str, overrides: Mapping[str, tuple[str, str]] | None
) -> tuple[dict[str, tuple[str, str]], frozenset[str]]:
    """key -> (value, key as written) for ``role``: cluster level, role level, then the flow's."""
    if role not in ROLES:
        raise ConfigError("role", role, "one of " + ", ".join(ROLES))
    props = {"bootstrap.servers": (cluster.bootstrap_servers, f"{cluster.alias}.bootstrap.servers")}
    props.update({k: (v, cluster.origin("client", k)) for k, v in cluster.client.items()})
    role_props = {k: (v, cluster.origin(role, k)) for k, v in getattr(cluster, role).items()}
    role_props.update(overrides or {})
    props.update(role_props)
    return props, frozenset(role_props)


def client_config(
    cluster: ClusterConfig,
    role: str,
    *,
    client_id: str | None = None,
    secret_lookup: SecretLookup | None = None,
    defaults: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    overrides: Mapping[str, tuple[str, str]] | None = None,
    resolve: bool = True,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """A ready librdkafka config for ``role`` (consumer, producer, admin) of ``cluster``.

    Layers: ``defaults`` (ours, tuning), then the user's settings (cluster, role, and the flow's
    ``overrides``), translated from Java names, then ``extra`` (ours, required for correctness,
    e.g. ``transactional.id``). ``resolve=False`` leaves secret references as they are (validate).
    Warnings go to ``notes`` when given, else to the log once per process.
    """
    raw, role_keys = raw_settings(cluster, role, overrides)
    if resolve:
        raw = {
            k: (resolve_references(where, v, secret_lookup, cluster.providers), where)
            for k, (v, where) in raw.items()
        }
    translated, found = translate(raw, role, role_keys)
    msk_iam = translated.pop(MSK_IAM, None)
    gcp = translated.pop(GCP_LOGIN, None)
    conf: dict[str, Any] = {**CLIENT_DEFAULTS, **(defaults or {})}
    conf.update(translated)
    if gcp is not None and resolve:
        conf["oauth_cb"] = GcpToken(json.loads(gcp)["where"])
    if msk_iam is not None:
        bootstrap = raw["bootstrap.servers"][0]
        if resolve:
            conf["oauth_cb"] = token_callback(msk_iam, cluster.alias, bootstrap)
        else:
            found += region_note(msk_iam, cluster.alias, bootstrap)
    if client_id and "client.id" not in conf:
        conf["client.id"] = client_id
    for key, value in (extra or {}).items():
        conf[key] = value
    found += _fit_transaction_timeout(conf, raw)
    if _ROUTED and "logger" not in conf and "debug" not in conf:
        conf["logger"] = librdkafka_logger()
    if notes is not None:
        notes.extend(found)
    else:
        for note in found:
            if note not in _WARNED:
                _WARNED.add(note)
                _log.warning(note)
    return conf


def _fit_transaction_timeout(conf: dict[str, Any], raw: Mapping[str, tuple[str, str]]) -> list[str]:
    """A transactional producer's delivery timeout lowered to its transaction timeout, which
    librdkafka requires (Java does not: a Java ``delivery.timeout.ms = 300000`` is common). The
    copy loop fails a commit after 30 s without acknowledgements anyway. Our own
    ``socket.timeout.ms`` yields to a short transaction timeout the same way, silently."""
    txn = str(conf.get("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS))
    if "transactional.id" not in conf or not txn.isdigit():
        return []
    socket_ms = conf.get("socket.timeout.ms")
    if socket_ms is CLIENT_DEFAULTS["socket.timeout.ms"] and socket_ms > int(txn) + 100:
        conf["socket.timeout.ms"] = int(txn) + 100  # ours, not the user's: as librdkafka requires
    notes = []
    for key in ("message.timeout.ms", "delivery.timeout.ms"):
        value = str(conf.get(key, ""))
        if value.isdigit() and int(value) > int(txn):
            where = raw.get(key, (None, key))[1]
            notes.append(
                f"{where} = {value} is lowered to {txn} (transaction.timeout.ms) for the "
                "transactional producer: librdkafka requires it not to exceed the transaction's"
            )
            conf[key] = int(txn)
    return notes


def _flow_side(flow: FlowConfig, side: str) -> str:
    return flow.source if side == "source" else flow.target


def producer_defaults(
    cluster: ClusterConfig, overrides: Mapping[str, tuple[str, str]] | None = None
) -> dict[str, Any]:
    """Our defaults of a producer to ``cluster``: idempotent, unless the user turned that off
    (:func:`idempotence_off`); then one request in flight per broker, so that a retried request
    cannot land after a later one and reorder a partition."""
    if idempotence_off(cluster, overrides):
        return {"max.in.flight.requests.per.connection": 1}
    return {"enable.idempotence": True}


def _delivery_conflicts(config: MirrorConfig, flow: FlowConfig, notes: list[str]) -> None:
    """Errors for user settings that contradict the flow's delivery mode (before anything runs)."""
    mode = f"mirror.delivery = {flow.settings.delivery} (flow {flow.name})"
    target, source = config.cluster(flow.target), config.cluster(flow.source)
    producer, _ = raw_settings(target, "producer", flow.overrides("target", "producer"))
    consumer, _ = raw_settings(source, "consumer", flow.overrides("source", "consumer"))

    def value(props: dict[str, tuple[str, str]], *keys: str) -> tuple[str, str] | None:
        found = [props[k] for k in keys if k in props]
        return (found[-1][0].strip().lower(), found[-1][1]) if found else None

    off = idempotence_off(target, flow.overrides("target", "producer"))
    if off and flow.settings.exactly_once:  # set so: without it the flow runs at least once
        raise ConfigError(
            off,
            "false",
            f"true or unset: {mode} is set, and it writes in transactions, which need "
            f"idempotent producers. For a target without them delete that line (the flow then "
            f"runs at least once, as MirrorMaker 2 does) or set {flow.name}.mirror.delivery = "
            "at_least_once: no transactions, no idempotence, and a retried request may copy "
            "records twice (docs: 'Coming from MirrorMaker 2')",
        )
    if off and "mirror.delivery" in flow.settings.explicit:  # else parse said it, at the top
        notes.append(
            f"{off} = false: flow {flow.name} writes at least once without idempotence: a "
            "produce request retried after its acknowledgement was lost writes its records "
            "twice, and the copy counts each such duplicate in a warning"
        )
    acks = value(producer, "acks", "request.required.acks")
    if acks and acks[0] not in ("all", "-1"):
        why = (
            f"a record only the leader acknowledged is lost if it fails ({off} = false)"
            if off
            else "idempotent producers need it"
        )
        raise ConfigError(acks[1], acks[0], f"all or unset: {mode} ({why})")
    in_flight = value(producer, "max.in.flight.requests.per.connection", "max.in.flight")
    most = 1 if off else 5
    if in_flight and in_flight[0].isdigit() and int(in_flight[0]) > most:
        why = (
            f"without idempotence ({off} = false) a retried request would land after later ones "
            "and reorder the partition"
            if off
            else "it is idempotent"
        )
        raise ConfigError(in_flight[1], in_flight[0], f"at most {most}: {mode}: {why}")
    isolation = value(consumer, "isolation.level")
    if isolation and isolation[0] == "read_uncommitted":
        if flow.settings.exactly_once:
            raise ConfigError(
                isolation[1],
                isolation[0],
                f"read_committed or unset: {mode} never copies aborted records",
            )
        notes.append(f"{isolation[1]} is ignored: mirror_lib reads committed records only")
    for props, key, why in (
        (producer, "transactional.id", "mirror_lib gives each task its own transactional.id"),
        (consumer, "group.id", "mirror_lib names its own groups and commits offsets itself"),
        (consumer, "enable.auto.commit", "mirror_lib commits offsets itself"),
    ):
        if key in props:
            notes.append(f"{props[key][1]} is ignored: {why}")


def check_clients(config: MirrorConfig) -> list[str]:
    """Build every client configuration (every cluster x role, and each flow's overrides) with
    secret references unresolved; a :class:`ConfigError` names the first key ``mirror run``
    would refuse. Returns the warnings (ignored settings), each once.
    """
    notes: list[str] = []
    for cluster in config.clusters.values():
        for role in ROLES:
            client_config(cluster, role, resolve=False, notes=notes)
    for flow in config.flows:
        for side in ("source", "target"):
            for role in ROLES:
                overrides = flow.overrides(side, role)
                if overrides:
                    cluster = config.cluster(_flow_side(flow, side))
                    client_config(cluster, role, overrides=overrides, resolve=False, notes=notes)
    for flow in config.enabled_flows():
        _delivery_conflicts(config, flow, notes)
    _WARNED.update(notes)  # the caller shows them; clients built later in this process do not
    return list(dict.fromkeys(notes))


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
