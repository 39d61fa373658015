"""Typed, validated configuration built from ``mm2.properties`` (MM2 keys plus ``mirror.*``).

:func:`load_config` / :func:`parse_config` return a frozen :class:`MirrorConfig`: clusters, every
ordered flow ``A->B`` with its resolved :class:`FlowSettings`. Every problem is a
:class:`~mirror_lib.errors.ConfigError` naming the key, the value and the valid form, raised before
anything connects. Secret references stay unresolved here (see :mod:`mirror_lib.properties`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mirror_lib.errors import ConfigError
from mirror_lib.properties import check_references, read_properties_file, redact
from mirror_lib.settings import (
    ALIASES,
    BY_KEY,
    GLOBAL_BY_KEY,
    IGNORED_PREFIXES,
    SETTINGS,
    global_setting,
    split_list,
)

ROLES = ("consumer", "producer", "admin")
_ALIAS = re.compile(r"[A-Za-z0-9_\-]+")
_FLOW_KEY = re.compile(r"^(?P<src>[^.>]+?)->(?P<tgt>[^.>]+?)\.(?P<rest>.+)$")
#: Top-level client settings that act as defaults for every cluster (MM2 does the same).
_CLIENT_PREFIXES = ("security.protocol", "ssl.", "sasl.", "client.dns.lookup", "socket.")
_TOP_LEVEL = (
    "clusters",
    "mirror.state.dir",
    "mirror.tables.enabled",
    "mirror.tables.writer",
    "mirror.tables.schema",
    *GLOBAL_BY_KEY,
)


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class ClusterConfig:
    """One cluster alias: bootstrap servers and Kafka client properties (passed through as given).

    ``client`` applies to every client; ``consumer``/``producer``/``admin`` override per role.
    Values may be unresolved secret references; ``repr`` never shows secrets.
    """

    alias: str
    bootstrap_servers: str
    client: Mapping[str, str] = field(default_factory=dict)
    consumer: Mapping[str, str] = field(default_factory=dict)
    producer: Mapping[str, str] = field(default_factory=dict)
    admin: Mapping[str, str] = field(default_factory=dict)

    def role_properties(self, role: str) -> dict[str, str]:
        """Raw (unresolved) client properties for ``role``: cluster-level, then role overrides."""
        if role not in ROLES:
            raise ConfigError("role", role, "one of " + ", ".join(ROLES))
        props = {"bootstrap.servers": self.bootstrap_servers, **self.client}
        props.update(getattr(self, role))
        return props

    def describe(self) -> dict[str, Any]:
        """A printable, redacted view."""
        out: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        out.update(redact(self.client))
        for role in ROLES:
            out.update({f"{role}.{k}": v for k, v in redact(getattr(self, role)).items()})
        return out

    def __repr__(self) -> str:
        return f"ClusterConfig(alias={self.alias!r}, {self.describe()!r})"


@dataclass(frozen=True)
class FlowSettings:
    """Resolved settings of one flow; attribute names mirror the keys in ``settings.SETTINGS``."""

    topics: tuple[str, ...]
    topics_exclude: tuple[str, ...]
    groups: tuple[str, ...]
    groups_exclude: tuple[str, ...]
    policy_class: str
    separator: str
    internal_separator_enabled: bool
    emit_heartbeats: bool
    heartbeats_interval: float
    emit_checkpoints: bool
    checkpoints_interval: float
    sync_group_offsets: bool
    sync_group_offsets_interval: float
    refresh_topics: bool
    refresh_topics_interval: float
    refresh_groups: bool
    refresh_groups_interval: float
    sync_topic_configs: bool
    sync_topic_configs_interval: float
    sync_topic_acls: bool
    sync_topic_acls_interval: float
    config_properties_exclude: tuple[str, ...]
    use_defaults_from: str
    offset_lag_max: int
    offset_syncs_location: str
    emit_offset_syncs: bool
    heartbeats_replication: bool
    replication_factor: int
    offset_syncs_replication_factor: int
    checkpoints_replication_factor: int
    heartbeats_replication_factor: int
    tasks: int
    admin_timeout_ms: int
    delivery: str
    starting_offsets: str
    batch_max_records: int
    batch_max_bytes: int
    on_gap: str
    trigger_interval: float
    separator_configured: bool = False
    explicit: frozenset[str] = frozenset()

    @property
    def exactly_once(self) -> bool:
        """True when the flow delivers with transactions and the target-side ledger (D3)."""
        return self.delivery == "exactly_once"

    def describe(self) -> dict[str, Any]:
        """Key -> value for printing, in MM2 key names."""
        return {s.key: getattr(self, s.attr) for s in SETTINGS}


@dataclass(frozen=True)
class FlowConfig:
    """An ordered pair ``source->target``; ``enabled`` is MM2's ``A->B.enabled`` (default false)."""

    source: str
    target: str
    enabled: bool
    settings: FlowSettings

    @property
    def name(self) -> str:
        """The flow's name as MM2 writes it, e.g. ``A->B``."""
        return f"{self.source}->{self.target}"

    def policy(self) -> Any:
        """The flow's replication policy (:mod:`mirror_lib.policy`)."""
        from mirror_lib.policy import make_policy

        s = self.settings
        return make_policy(
            s.policy_class,
            separator=s.separator,
            internal_separator_enabled=s.internal_separator_enabled,
            separator_configured=s.separator_configured,
            source_cluster_alias=self.source,
        )


@dataclass(frozen=True)
class MirrorConfig:
    """The whole configuration: clusters, all ordered flows, the state folder and unknown keys."""

    clusters: Mapping[str, ClusterConfig]
    flows: tuple[FlowConfig, ...]
    state_dir: str
    origin: str = "<dict>"
    unknown_keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)

    def enabled_flows(self) -> tuple[FlowConfig, ...]:
        """Flows that replicate data (``A->B.enabled=true``)."""
        return tuple(f for f in self.flows if f.enabled)

    def heartbeat_flows(self) -> tuple[FlowConfig, ...]:
        """Flows that emit heartbeats: MM2 runs a heartbeat connector for every pair by default."""
        return tuple(f for f in self.flows if f.settings.emit_heartbeats)

    def flow(self, name: str) -> FlowConfig:
        """The flow ``A->B``; a :class:`ConfigError` lists the enabled flows when it is unknown."""
        for f in self.flows:
            if f.name == name.replace(" ", ""):
                return f
        raise ConfigError(
            "--flow", name, "one of " + ", ".join(f.name for f in self.enabled_flows()), self.origin
        )

    def cluster(self, alias: str) -> ClusterConfig:
        """The cluster ``alias``; unknown aliases are a :class:`ConfigError`."""
        if alias not in self.clusters:
            raise ConfigError("cluster", alias, "one of " + ", ".join(self.clusters), self.origin)
        return self.clusters[alias]

    def __repr__(self) -> str:
        return (
            f"MirrorConfig(clusters={list(self.clusters.values())!r}, "
            f"flows={[f.name for f in self.enabled_flows()]!r}, state_dir={self.state_dir!r})"
        )


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


def _build_cluster(alias: str, props: Mapping[str, str], origin: str) -> ClusterConfig:
    prefix = alias + "."
    sections: dict[str, dict[str, str]] = {"client": {}, **{r: {} for r in ROLES}}
    for key, value in props.items():
        if key.startswith(_CLIENT_PREFIXES):
            sections["client"].setdefault(key, value)
        elif key.split(".", 1)[0] in ROLES and "." in key:
            role, name = key.split(".", 1)
            sections[role].setdefault(name, value)
    for key, value in props.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix) :]
        head = name.split(".", 1)[0]
        if head in ROLES and "." in name:
            sections[head][name.split(".", 1)[1]] = value
        elif not name.startswith(IGNORED_PREFIXES):
            sections["client"][name] = value
    bootstrap = sections["client"].pop("bootstrap.servers", "").strip()
    if not bootstrap:
        raise ConfigError(
            f"{alias}.bootstrap.servers",
            None,
            "host:port[,host:port...] of cluster " + alias,
            origin,
        )
    for section in sections.values():
        for key, value in section.items():
            check_references(f"{alias}.{key}", value)
    return ClusterConfig(alias, bootstrap, **{k: _frozen(v) for k, v in sections.items()})


def _flow_settings(
    src: str, tgt: str, props: Mapping[str, str], overrides: Mapping[str, str], origin: str
) -> tuple[bool, FlowSettings]:
    values: dict[str, Any] = {}
    explicit: set[str] = set()
    for setting in SETTINGS:
        for key in (setting.key, *setting.aliases):
            if key in overrides:
                raw, where = overrides[key], f"{src}->{tgt}.{key}"
                break
        else:
            for key in (setting.key, *setting.aliases):
                if key in props:
                    raw, where = props[key], key
                    break
            else:
                raw, where = setting.default, ""
        if where:
            explicit.add(setting.key)
        values[setting.attr] = setting.parse(where or setting.key, raw)
    values["separator_configured"] = (
        "replication.policy.separator" in props or "replication.policy.separator" in overrides
    )
    values["explicit"] = frozenset(explicit)
    raw_enabled = overrides.get("enabled", "false")
    if raw_enabled.strip().lower() not in ("true", "false"):
        raise ConfigError(f"{src}->{tgt}.enabled", raw_enabled, "true or false", origin)
    settings = FlowSettings(**values)
    needs_syncs = settings.emit_checkpoints or settings.sync_group_offsets
    if needs_syncs and not settings.emit_offset_syncs and raw_enabled.strip().lower() == "true":
        raise ConfigError(
            f"{src}->{tgt}.emit.offset-syncs.enabled",
            "false",
            "true while emit.checkpoints.enabled or sync.group.offsets.enabled is true",
            origin,
        )
    return raw_enabled.strip().lower() == "true", settings


def parse_config(props: Mapping[str, str], origin: str = "<dict>") -> MirrorConfig:
    """Validate ``props`` (mm2.properties keys) and build the typed configuration."""
    aliases = _cluster_aliases(props, origin)
    clusters = {a: _build_cluster(a, props, origin) for a in aliases}
    per_flow: dict[tuple[str, str], dict[str, str]] = {}
    unknown: list[str] = []
    for key, value in props.items():
        match = _FLOW_KEY.match(key)
        if match:
            src, tgt = match["src"].strip(), match["tgt"].strip()
            for alias in (src, tgt):
                if alias not in clusters:
                    raise ConfigError(
                        key, value, f"a flow between known clusters ({', '.join(aliases)})", origin
                    )
            if src == tgt:
                raise ConfigError(key, value, "a flow between two different clusters", origin)
            rest = match["rest"]
            per_flow.setdefault((src, tgt), {})[rest] = value
            if not (rest == "enabled" or _is_known(rest, clusters)):
                unknown.append(key)
            continue
        known = key in _TOP_LEVEL or _is_known(key, clusters)
        if key.startswith("mirror.") and not known:
            valid = ", ".join(
                sorted(k for k in (*BY_KEY, *GLOBAL_BY_KEY) if k.startswith("mirror."))
            )
            raise ConfigError(key, value, f"a known mirror.* key ({valid}, mirror.state.dir)")
        if not known:
            unknown.append(key)
    for key in GLOBAL_BY_KEY:
        if key in props:
            global_setting(props, key)  # fails early, like the per-flow settings
    flows = []
    for src in aliases:
        for tgt in aliases:
            if src != tgt:
                enabled, settings = _flow_settings(
                    src, tgt, props, per_flow.get((src, tgt), {}), origin
                )
                flows.append(FlowConfig(src, tgt, enabled, settings))
    config = MirrorConfig(
        clusters=_frozen_clusters(clusters),
        flows=tuple(flows),
        state_dir=props.get("mirror.state.dir", "./mirror-state").strip() or "./mirror-state",
        origin=origin,
        unknown_keys=tuple(unknown),
        properties=_frozen(props),
    )
    for flow in config.flows:
        flow.policy()  # fails early on an unknown policy class
    from mirror_lib.databricks import check_state_dir

    check_state_dir(config.state_dir)  # on Databricks: never the driver's local disk
    return config


def _is_known(key: str, clusters: Mapping[str, ClusterConfig]) -> bool:
    head = key.split(".", 1)[0]
    return (
        key in BY_KEY
        or key in ALIASES
        or head in clusters
        or (head in ROLES and "." in key)
        or key.startswith(_CLIENT_PREFIXES + IGNORED_PREFIXES)
    )


def _frozen_clusters(clusters: dict[str, ClusterConfig]) -> Mapping[str, ClusterConfig]:
    return MappingProxyType(clusters)


def load_config(path: str | os.PathLike[str], **overrides: str) -> MirrorConfig:
    """Read and validate an ``mm2.properties`` file; ``overrides`` replace keys (widgets)."""
    props = read_properties_file(path)
    props.update(overrides)
    return parse_config(props, origin=str(path))


def with_settings(flow: FlowConfig, **changes: Any) -> FlowConfig:
    """A copy of ``flow`` with some settings replaced (tests, notebooks)."""
    return dataclasses.replace(flow, settings=dataclasses.replace(flow.settings, **changes))
