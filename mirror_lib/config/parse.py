"""``mm2.properties`` (MM2 keys plus ``mirror.*``) -> the frozen :class:`MirrorConfig`.

:func:`load_config` / :func:`parse_config` resolve every ordered flow ``A->B`` with its
:class:`~mirror_lib.config.settings.FlowSettings`. Every problem is a
:class:`~mirror_lib.errors.ConfigError` naming the key, the value and the valid form, raised
before anything connects.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from mirror_lib.config.addresses import check_bootstrap
from mirror_lib.config.fanout import read_groups
from mirror_lib.config.flow_parse import ALIAS_KEYS, flow_settings, is_alias_idiom, mm2_names
from mirror_lib.config.global_settings import GLOBAL_BY_KEY
from mirror_lib.config.java_clients import checked_protocol
from mirror_lib.config.key_checks import (
    IGNORED_PREFIXES,
    connector_extra,
    default_plugin,
    mirror_key_error,
    refuse_reference,
)
from mirror_lib.config.model import (
    COPY_KEYS,
    ROLES,
    ClusterConfig,
    CopyWarning,
    FlowConfig,
    MirrorConfig,
    idempotence_off,
    with_settings,
)
from mirror_lib.config.properties import (
    ConfigProvider,
    check_references,
    has_reference,
    parse_providers,
    read_properties_file,
    resolve_setting,
)
from mirror_lib.config.setting_values import split_list
from mirror_lib.config.settings import ALIASES, AT_LEAST_ONCE_COMMIT_INTERVAL_MS, BY_KEY
from mirror_lib.errors import ConfigError

_ALIAS = re.compile(r"[A-Za-z0-9_\-]+")
_FLOW_KEY = re.compile(r"^(?P<src>[^.>]+?)->(?P<tgt>[^.>]+?)\.(?P<rest>.+)$")
#: Top-level client settings that act as defaults for every cluster (MM2 does the same).
_CLIENT_PREFIXES = (
    "bootstrap.servers",
    "security.protocol",
    "ssl.",
    "sasl.",
    "client.dns.lookup",
    "socket.",
)
_TOP_LEVEL = ("clusters", "mirror.state.dir", "config.providers", *GLOBAL_BY_KEY)
#: Connect's client override of a connector (KIP-458; allowed by default since Kafka 3.0,
#: KIP-722): for MM2's source connector, the producer that writes the replicated records.
_RECORDS_PRODUCER = "producer.override."
#: Per-flow client settings (MM2 connector-level prefixes) -> (side, roles) they configure; a
#: ``source.``/``target.`` prefix beats the generic one, whatever the line order (as in MM2), and
#: ``producer.override.`` beats both (Connect applies it last, to the records' producer).
_FLOW_CLIENT_PREFIXES: dict[str, tuple[str, tuple[str, ...]]] = {
    **{f"{side}.{role}.": (side, (role,)) for side in ("source", "target") for role in ROLES},
    "consumer.": ("source", ("consumer",)),
    _RECORDS_PRODUCER: ("target", ("producer",)),
    "producer.": ("target", ("producer",)),
    "admin.": ("both", ("admin",)),
}
_COMMENT_HINT = (
    "; note: in a .properties file '#' starts a comment only at the start of a line, so the "
    "'# ...' after the value is part of the value: move the comment to its own line"
)


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


def _cluster_aliases(props: Mapping[str, str], origin: str) -> tuple[str, ...]:
    raw = props.get("clusters")
    if raw is None or not split_list(raw):
        raise ConfigError("clusters", raw, "a comma-separated list of cluster aliases", origin)
    aliases = split_list(raw)
    for alias in aliases:
        if not _ALIAS.fullmatch(alias):
            raise ConfigError("clusters", alias, "aliases of letters, digits, '_' and '-'", origin)
    if len(set(aliases)) != len(aliases):
        raise ConfigError("clusters", raw, "distinct aliases", origin)
    return aliases


def _is_setting(key: str) -> bool:
    return key in BY_KEY or key in ALIASES


def _build_cluster(
    alias: str,
    props: Mapping[str, str],
    origin: str,
    providers: Mapping[str, ConfigProvider],
    warnings: list[str],
) -> ClusterConfig:
    prefix = alias + "."
    sections: dict[str, dict[str, str]] = {"client": {}, **{r: {} for r in ROLES}}
    origins: dict[str, str] = {}

    def put(section: str, key: str, value: str, where: str) -> None:
        sections[section][key] = value
        origins[f"{section}.{key}"] = where

    for key, value in props.items():  # top-level client settings: defaults for every cluster
        if _is_setting(key) or key.startswith(IGNORED_PREFIXES):
            continue
        if key.startswith(_CLIENT_PREFIXES):
            put("client", key, value, key)
        elif key.split(".", 1)[0] in ROLES and "." in key:
            role, name = key.split(".", 1)
            put(role, name, value, key)
    for key, value in props.items():
        if not key.startswith(prefix) or key in ALIAS_KEYS:  # clusters named source/target
            continue
        name = key[len(prefix) :]
        head = name.split(".", 1)[0]
        if _is_setting(name):
            said = (
                f"{key} is ignored: {name} is a flow setting (set it at the top level or as "
                f"<source>-><target>.{name})"
            )
            warnings.append(CopyWarning(said) if name in COPY_KEYS else said)
        elif name.startswith((*IGNORED_PREFIXES, *ALIAS_KEYS)):
            warnings.append(f"{key} is ignored: a Connect/MM2 runtime setting, not a client one")
        elif head in ROLES and "." in name:
            put(head, name.split(".", 1)[1], value, key)
        else:
            put("client", name, value, key)
    for section, values in sections.items():  # a bad port, before librdkafka misreads it
        servers = values.get("bootstrap.servers", "")
        if servers.strip() and not has_reference(servers):
            check_bootstrap(origins[f"{section}.bootstrap.servers"], servers, origin)
    bootstrap = sections["client"].pop("bootstrap.servers", "").strip()
    if not bootstrap:
        raise ConfigError(
            f"{alias}.bootstrap.servers",
            None,
            f"host:port[,host:port...] of cluster {alias} (or a top-level bootstrap.servers, "
            "the default of every cluster that sets none)",
            origin,
        )
    for section, values in sections.items():
        for key, value in values.items():
            check_references(origins.get(f"{section}.{key}", key), value, providers)
    return ClusterConfig(
        alias,
        bootstrap,
        **{k: _frozen(v) for k, v in sections.items()},
        origins=_frozen(origins),
        providers=MappingProxyType(dict(providers)),
    )


def _flow_client_key(rest: str) -> tuple[str, tuple[str, ...], str] | None:
    """(side, roles, client key) of a per-flow client setting, e.g. ``consumer.fetch.min.bytes``."""
    for prefix, (side, roles) in _FLOW_CLIENT_PREFIXES.items():
        if rest.startswith(prefix) and len(rest) > len(prefix):
            return side, roles, rest[len(prefix) :]
    return None


def _rank(flow_key: str) -> int:
    """Which per-flow client key wins: ``A->B.producer.override.*`` (2) over ``A->B.source.*`` /
    ``A->B.target.*`` (1) over the generic prefixes (0); aliases have no dots."""
    rest = flow_key.split(".", 1)[1]
    if rest.startswith(_RECORDS_PRODUCER):
        return 2
    return int(rest.startswith(("source.", "target.")))


def _put_flow_client(
    sections: dict[str, dict[str, tuple[str, str]]],
    key: str,
    client: tuple[str, tuple[str, ...], str],
    value: str,
) -> None:
    """Record ``key``, a per-flow client setting (``client`` as :func:`_flow_client_key` gives),
    in the sections it configures: ``source.consumer.x`` beats ``consumer.x`` whichever comes
    first in the file (MM2 applies the generic prefix, then the specific one), and
    ``producer.override.x`` beats both (:func:`_rank`)."""
    side, roles, name = client
    for s in ("source", "target") if side == "both" else (side,):
        for role in roles:
            section = sections.setdefault(f"{s}.{role}", {})
            held = section.get(name)
            if held is None or _rank(key) >= _rank(held[1]):
                section[name] = (value, key)


def parse_config(props: Mapping[str, str], origin: str = "<dict>") -> MirrorConfig:
    """Validate ``props`` (mm2.properties keys) and build the typed configuration."""
    try:
        return _parse(props, origin)
    except ConfigError as exc:
        if isinstance(exc.value, str) and "#" in exc.value and _COMMENT_HINT not in exc.expected:
            raise ConfigError(exc.key, exc.value, exc.expected + _COMMENT_HINT, exc.where) from None
        raise


def _parse(props: Mapping[str, str], origin: str) -> MirrorConfig:
    warnings: list[str] = []
    for key in ("clusters", "mirror.state.dir", *GLOBAL_BY_KEY):
        if key in props:
            refuse_reference(key, props[key], origin)
    aliases = _cluster_aliases(props, origin)
    providers = parse_providers(props)
    clusters = {a: _build_cluster(a, props, origin, providers, warnings) for a in aliases}
    per_flow: dict[tuple[str, str], dict[str, str]] = {}
    flow_clients: dict[tuple[str, str], dict[str, dict[str, tuple[str, str]]]] = {}
    unknown: list[str] = []
    stray: list[tuple[str, str]] = []
    transform_keys: list[str] = []
    for key, value in props.items():
        if re.search(r"\s#", value):
            said = (
                f"{key}: the value contains ' #', which Java reads as part of the value, not as a "
                "comment; move the comment to its own line"
            )
            name = key.split(".", 1)[1] if _FLOW_KEY.match(key) else key
            warnings.append(CopyWarning(said) if name in COPY_KEYS else said)
        match = _FLOW_KEY.match(key)
        if match:
            src, tgt = match["src"].strip(), match["tgt"].strip()
            missing = [a for a in (src, tgt) if a not in clusters]
            if missing:
                listed = ", ".join(aliases)
                said = f"{key} is ignored: {', '.join(missing)} is not in clusters ({listed})"
                off = match["rest"] == "enabled" and value.strip().lower() == "false"
                warnings.append(
                    said if off else CopyWarning(f"{said}, so flow {src}->{tgt} does not exist")
                )
                stray.append((key, value))
                continue
            if src == tgt:
                raise ConfigError(key, value, "a flow between two different clusters", origin)
            rest = match["rest"]
            client = None if _is_setting(rest) else _flow_client_key(rest)
            if connector_extra(key, rest, value, origin, warnings, transform_keys):
                pass
            elif rest.startswith(IGNORED_PREFIXES):
                if not default_plugin(key, rest, value, origin):
                    warnings.append(f"{key} is ignored: a Connect/MM2 runtime setting")
            elif client is not None:
                check_references(key, value, providers)
                if client[2] == "bootstrap.servers" and not has_reference(value):
                    check_bootstrap(key, value, origin)
                _put_flow_client(flow_clients.setdefault((src, tgt), {}), key, client, value)
            else:
                if rest.startswith("mirror.") and not _is_setting(rest):
                    raise mirror_key_error(key, value, rest, origin)
                per_flow.setdefault((src, tgt), {})[rest] = value
                if not (rest in ("enabled", *ALIAS_KEYS) or _is_known(rest, clusters)):
                    unknown.append(key)
            continue
        if key in ALIAS_KEYS or key.startswith("config.providers"):
            continue
        if connector_extra(key, key, value, origin, warnings, transform_keys):
            continue
        if key.startswith(IGNORED_PREFIXES) and not _is_setting(key):
            if not default_plugin(key, key, value, origin):
                warnings.append(f"{key} is ignored: a Connect/MM2 runtime setting")
            continue
        known = key in _TOP_LEVEL or _is_known(key, clusters)
        if key.startswith("mirror.") and not known:
            raise mirror_key_error(key, value, key, origin)
        if not known:
            unknown.append(key)
    _check_protocols(clusters, flow_clients, origin)
    if transform_keys:
        warnings.append(
            f"{', '.join(transform_keys)} {'is' if len(transform_keys) == 1 else 'are'} ignored: "
            "no transforms or predicates are listed, so none runs (as in MM2)"
        )
    for key, setting in GLOBAL_BY_KEY.items():
        if key in props:
            setting.parse(key, props[key])  # fails early, like the per-flow settings
    flows = []
    for src in aliases:
        for tgt in aliases:
            if src != tgt:
                enabled, settings = flow_settings(
                    src, tgt, props, per_flow.get((src, tgt), {}), (origin, providers), warnings
                )
                overrides = {
                    k: MappingProxyType(v) for k, v in flow_clients.get((src, tgt), {}).items()
                }
                flow_props = per_flow.get((src, tgt), {})
                names: tuple[str | None, str | None] = (None, None)
                if not is_alias_idiom(props, flow_props):
                    names = mm2_names(src, tgt, props, flow_props, enabled, warnings)
                flow = FlowConfig(src, tgt, enabled, settings, MappingProxyType(overrides), *names)
                flows.append(_without_idempotence(flow, clusters[tgt], warnings))
    warnings += _loop_warnings(flows)
    config = MirrorConfig(
        clusters=_frozen_clusters(clusters),
        flows=tuple(flows),
        state_dir=props.get("mirror.state.dir", "./mirror-state").strip() or "./mirror-state",
        origin=origin,
        unknown_keys=tuple(unknown),
        properties=_frozen(props),
        warnings=tuple(dict.fromkeys(warnings)),
        stray_flow_keys=tuple(stray),
    )
    for flow in config.flows:
        flow.policy()  # fails early on an unknown policy class
    read_groups(config.flows)  # fan-out flows that disagree on their shared read fail here
    # lazy: databricks.py imports this module
    from mirror_lib.config.databricks import check_state_dir

    check_state_dir(config.state_dir)  # on Databricks: never the driver's local disk
    return config


def _check_protocols(
    clusters: Mapping[str, ClusterConfig],
    flow_clients: Mapping[tuple[str, str], Mapping[str, Mapping[str, tuple[str, str]]]],
    origin: str,
) -> None:
    """Every ``security.protocol`` a client would get names a protocol, checked here as MM2
    checks it when it reads its configuration (the library API and the notebooks see it too,
    not only ``mirror validate``); a reference is checked where it resolves, when clients are
    built."""
    key = "security.protocol"
    found = [
        (cluster.origin(section, key), getattr(cluster, section)[key])
        for cluster in clusters.values()
        for section in ("client", *ROLES)
        if key in getattr(cluster, section)
    ]
    found += [
        (where, value)
        for sections in flow_clients.values()
        for settings in sections.values()
        for name, (value, where) in settings.items()
        if name == key
    ]
    for where, value in found:
        if not has_reference(value):
            checked_protocol(where, value, origin)


def _without_idempotence(
    flow: FlowConfig, target: ClusterConfig, warnings: list[str]
) -> FlowConfig:
    """A flow whose target producers have idempotence turned off (a service without idempotent
    producers, such as OCI Streaming) and whose delivery is not set runs at least once, as
    MirrorMaker 2 runs that file, with a warning shown first; exactly once needs transactions,
    and those need idempotent producers. A delivery set to exactly once is refused when clients
    are checked (:func:`mirror_lib.kafka.clients.check_clients`)."""
    off = idempotence_off(target, flow.overrides("target", "producer"))
    s = flow.settings
    if not off or not s.exactly_once or "mirror.delivery" in s.explicit:
        return flow
    if flow.enabled:
        warnings.append(
            CopyWarning(
                f"{off} = false: flow {flow.name} runs at least once, as MirrorMaker 2 runs this "
                "file, not exactly once (the default): exactly once writes in transactions, "
                "which need idempotent producers. A produce request retried after its "
                "acknowledgement was lost writes its records twice, and the copy counts each "
                f"such duplicate in a warning; set {flow.name}.mirror.delivery = at_least_once "
                "to say so (this warning then goes)"
            )
        )
    interval = (
        s.commit_interval_ms
        if "mirror.commit.interval.ms" in s.explicit
        else AT_LEAST_ONCE_COMMIT_INTERVAL_MS
    )
    return with_settings(flow, delivery="at_least_once", commit_interval_ms=interval)


def _loop_warnings(flows: list[FlowConfig]) -> list[str]:
    """Both ways enabled, and one keeps topic names: a topic both copy would loop (``mirror
    run`` refuses such a topic; here no topic names are known yet)."""
    enabled = {f.name: f for f in flows if f.enabled}
    out = []
    for f in enabled.values():
        back = enabled.get(f"{f.target}->{f.source}")
        keeps = [x.name for x in (f, back) if x is not None and x.policy().keeps_names]
        if back is not None and f.source < f.target and keeps:
            who = "both keep" if len(keeps) == 2 else f"{keeps[0]} keeps"
            out.append(
                f"{f.name} and {back.name} are both enabled and {who} topic names "
                "(IdentityReplicationPolicy): a topic both flows copy would be copied back and "
                "forth forever, so mirror run refuses such a topic; keep their topics apart"
            )
    return out


def _is_known(key: str, clusters: Mapping[str, ClusterConfig]) -> bool:
    head = key.split(".", 1)[0]
    return (
        _is_setting(key)
        or head in clusters
        or (head in ROLES and "." in key)
        or key.startswith(_CLIENT_PREFIXES + IGNORED_PREFIXES)
    )


def _frozen_clusters(clusters: dict[str, ClusterConfig]) -> Mapping[str, ClusterConfig]:
    return MappingProxyType(clusters)


#: Client settings that name a file (librdkafka's and Java's).
FILE_SETTINGS = (
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.truststore.location",
    "ssl.crl.location",
    "https.ca.location",
    "sasl.kerberos.keytab",
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.jwt.template.file",
    "sasl.oauthbearer.assertion.private.key.file",
)
_URI = re.compile(r"^[A-Za-z][\w+.-]*:")  # s3://..., dbfs:/..., file:///...


def driver_path(path: str) -> str:
    """``path`` as the driver means it, for another process (an executor's Python worker starts
    in its own work folder): a relative local path made absolute against the driver's working
    folder; absolute paths, URIs and ``${...}`` references as given."""
    name = path.strip()
    if not name or os.path.isabs(name) or _URI.match(name) or has_reference(name):
        return path
    return os.path.abspath(name)


def resolved_flow_properties(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` with the references of flow settings resolved (``A->B.topics = ${env:X}``): what
    the driver ships to Spark's executors, where the variable or file may not exist. Client
    settings keep theirs (secrets are resolved only where clients are built).

    A relative file of a client setting (``A.ssl.ca.location = certs/ca.pem``) is made absolute:
    it means the driver's working folder, and an executor's Python worker starts in another.
    """
    providers = parse_providers(props)
    out = dict(props)
    for key, value in props.items():
        match = _FLOW_KEY.match(key)
        name = match["rest"] if match else key
        if has_reference(value) and (_is_setting(name) or (match and name == "enabled")):
            out[key] = resolve_setting(key, value, providers)
        elif any(key == k or key.endswith(f".{k}") for k in FILE_SETTINGS):
            out[key] = value if value.strip() == "probe" else driver_path(value)
    return out


def load_config(path: str | os.PathLike[str], **overrides: str) -> MirrorConfig:
    """Read and validate an ``mm2.properties`` file; ``overrides`` replace keys (widgets)."""
    repeated: list[str] = []
    props = read_properties_file(path, repeated)
    props.update(overrides)
    config = parse_config(props, origin=str(path))
    return replace(config, warnings=(*repeated, *config.warnings)) if repeated else config
