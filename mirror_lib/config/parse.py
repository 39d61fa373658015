"""``mm2.properties`` (MM2 keys plus ``mirror.*``) -> the frozen :class:`MirrorConfig`.

:func:`load_config` / :func:`parse_config` resolve every ordered flow ``A->B`` with its
:class:`FlowSettings`. Every problem is a :class:`~mirror_lib.errors.ConfigError` naming the key,
the value and the valid form, raised before anything connects.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from mirror_lib.config.fanout import read_groups
from mirror_lib.config.global_settings import GLOBAL_BY_KEY, global_setting
from mirror_lib.config.model import ROLES, ClusterConfig, FlowConfig, MirrorConfig
from mirror_lib.config.properties import (
    ConfigProvider,
    check_references,
    parse_providers,
    read_properties_file,
)
from mirror_lib.config.setting_values import split_list
from mirror_lib.config.settings import ALIASES, BY_KEY, IGNORED_PREFIXES, SETTINGS, FlowSettings
from mirror_lib.errors import ConfigError

_ALIAS = re.compile(r"[A-Za-z0-9_\-]+")
_FLOW_KEY = re.compile(r"^(?P<src>[^.>]+?)->(?P<tgt>[^.>]+?)\.(?P<rest>.+)$")
#: Top-level client settings that act as defaults for every cluster (MM2 does the same).
_CLIENT_PREFIXES = ("security.protocol", "ssl.", "sasl.", "client.dns.lookup", "socket.")
_TOP_LEVEL = ("clusters", "mirror.state.dir", "config.providers", *GLOBAL_BY_KEY)
#: Per-flow client settings (MM2 connector-level prefixes) -> (side, roles) they configure.
_FLOW_CLIENT_PREFIXES: dict[str, tuple[str, tuple[str, ...]]] = {
    **{f"{side}.{role}.": (side, (role,)) for side in ("source", "target") for role in ROLES},
    "consumer.": ("source", ("consumer",)),
    "producer.": ("target", ("producer",)),
    "admin.": ("both", ("admin",)),
}
#: Connector-level alias keys MM2 sets per flow (honoured, never passed to a client).
_ALIAS_KEYS = ("source.cluster.alias", "target.cluster.alias")
#: MM2 plug-in class keys: their default class is what mirror_lib does; another class cannot run
#: here, and ignoring it would change what is copied, so it is refused with what to use instead.
_PLUGIN_CLASSES: dict[str, tuple[str, str]] = {
    "topic.filter.class": (
        "org.apache.kafka.connect.mirror.DefaultTopicFilter",
        "express the filter as the topics / topics.exclude regex lists",
    ),
    "group.filter.class": (
        "org.apache.kafka.connect.mirror.DefaultGroupFilter",
        "express the filter as the groups / groups.exclude regex lists",
    ),
    "config.property.filter.class": (
        "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
        "express the filter as the config.properties.exclude regex list",
    ),
    "forwarding.admin.class": (
        "org.apache.kafka.clients.admin.ForwardingAdmin",
        "mirror_lib creates topics, partitions, configs and ACLs through the Kafka admin API "
        "itself; remove the key",
    ),
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
        if not key.startswith(prefix) or key in _ALIAS_KEYS:  # clusters named source/target
            continue
        name = key[len(prefix) :]
        head = name.split(".", 1)[0]
        if _is_setting(name):
            warnings.append(
                f"{key} is ignored: {name} is a flow setting (set it at the top level or as "
                f"<source>-><target>.{name})"
            )
        elif name.startswith((*IGNORED_PREFIXES, *_ALIAS_KEYS)):
            warnings.append(f"{key} is ignored: a Connect/MM2 runtime setting, not a client one")
        elif head in ROLES and "." in name:
            put(head, name.split(".", 1)[1], value, key)
        else:
            put("client", name, value, key)
    bootstrap = sections["client"].pop("bootstrap.servers", "").strip()
    if not bootstrap:
        raise ConfigError(
            f"{alias}.bootstrap.servers",
            None,
            "host:port[,host:port...] of cluster " + alias,
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


def _lookup(key: str, props: Mapping[str, str], overrides: Mapping[str, str]) -> str | None:
    return overrides[key] if key in overrides else props.get(key)


def _alias_idiom(
    src: str,
    tgt: str,
    props: Mapping[str, str],
    overrides: Mapping[str, str],
    enabled: bool,
    warnings: list[str],
) -> bool:
    """True for the pre-3.0 identity idiom (empty separator and source alias); checks aliases."""
    separator = _lookup("replication.policy.separator", props, overrides)
    aliases = {k: _lookup(k, props, overrides) for k in _ALIAS_KEYS}
    if separator == "" and aliases["source.cluster.alias"] == "":
        warnings.append(
            "replication.policy.separator and source.cluster.alias are empty: the pre-3.0 way to "
            "keep topic names, read as identity naming (topics keep their names on the target). "
            "Prefer replication.policy.class = IdentityReplicationPolicy"
        )
        return True
    for key, expected in zip(_ALIAS_KEYS, (src, tgt), strict=True):
        value = aliases[key]
        if enabled and value is not None and value.strip() != expected:
            where = f"{src}->{tgt}.{key}" if key in overrides else key
            raise ConfigError(
                where,
                value,
                f"{expected!r} (or unset) for flow {src}->{tgt}: mirror_lib names clusters by "
                "their alias in clusters; rename the alias there"
                + (
                    ", or leave source.cluster.alias and replication.policy.separator empty "
                    "together for identity naming"
                    if key == "source.cluster.alias"
                    else ""
                ),
            )
    return False


def _flow_settings(
    src: str,
    tgt: str,
    props: Mapping[str, str],
    overrides: Mapping[str, str],
    origin: str,
    warnings: list[str],
) -> tuple[bool, FlowSettings]:
    raw_enabled = overrides.get("enabled", "false")
    if raw_enabled.strip().lower() not in ("true", "false"):
        raise ConfigError(f"{src}->{tgt}.enabled", raw_enabled, "true or false", origin)
    enabled = raw_enabled.strip().lower() == "true"
    idiom = _alias_idiom(src, tgt, props, overrides, enabled, warnings)
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
        if idiom and setting.key == "replication.policy.separator":
            raw, where = setting.default, ""
        if idiom and setting.key == "replication.policy.class":
            raw, where = "IdentityReplicationPolicy", setting.key
        if where:
            explicit.add(setting.key)
        values[setting.attr] = setting.parse(where or setting.key, raw)
    values["separator_configured"] = not idiom and (
        "replication.policy.separator" in props or "replication.policy.separator" in overrides
    )
    values["explicit"] = frozenset(explicit)
    settings = FlowSettings(**values)
    needs_syncs = settings.emit_checkpoints or settings.sync_group_offsets
    if needs_syncs and not settings.emit_offset_syncs and enabled:
        raise ConfigError(
            f"{src}->{tgt}.emit.offset-syncs.enabled",
            "false",
            "true while emit.checkpoints.enabled or sync.group.offsets.enabled is true",
            origin,
        )
    if enabled:
        from mirror_lib.config.stale import check_settings

        check_settings(f"{src}->{tgt}", settings, origin)
    return enabled, settings


def _flow_client_key(rest: str) -> tuple[str, tuple[str, ...], str] | None:
    """(side, roles, client key) of a per-flow client setting, e.g. ``consumer.fetch.min.bytes``."""
    for prefix, (side, roles) in _FLOW_CLIENT_PREFIXES.items():
        if rest.startswith(prefix) and len(rest) > len(prefix):
            return side, roles, rest[len(prefix) :]
    return None


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
    aliases = _cluster_aliases(props, origin)
    providers = parse_providers(props)
    clusters = {a: _build_cluster(a, props, origin, providers, warnings) for a in aliases}
    per_flow: dict[tuple[str, str], dict[str, str]] = {}
    flow_clients: dict[tuple[str, str], dict[str, dict[str, tuple[str, str]]]] = {}
    unknown: list[str] = []
    for key, value in props.items():
        if re.search(r"\s#", value):
            warnings.append(
                f"{key}: the value contains ' #', which Java reads as part of the value, not as a "
                "comment; move the comment to its own line"
            )
        match = _FLOW_KEY.match(key)
        if match:
            src, tgt = match["src"].strip(), match["tgt"].strip()
            missing = [a for a in (src, tgt) if a not in clusters]
            if missing:
                warnings.append(
                    f"{key} is ignored: {', '.join(missing)} is not in clusters "
                    f"({', '.join(aliases)})"
                )
                continue
            if src == tgt:
                raise ConfigError(key, value, "a flow between two different clusters", origin)
            rest = match["rest"]
            client = None if _is_setting(rest) else _flow_client_key(rest)
            if rest.startswith(IGNORED_PREFIXES):
                if not _default_plugin(key, rest, value, origin):
                    warnings.append(f"{key} is ignored: a Connect/MM2 runtime setting")
            elif client is not None:
                side, roles, name = client
                check_references(key, value, providers)
                for s in ("source", "target") if side == "both" else (side,):
                    for role in roles:
                        section = flow_clients.setdefault((src, tgt), {}).setdefault(
                            f"{s}.{role}", {}
                        )
                        section[name] = (value, key)
            else:
                if rest.startswith("mirror.") and not _is_setting(rest):
                    raise _mirror_key_error(key, value, rest, origin)
                per_flow.setdefault((src, tgt), {})[rest] = value
                if not (rest in ("enabled", *_ALIAS_KEYS) or _is_known(rest, clusters)):
                    unknown.append(key)
            continue
        if key in _ALIAS_KEYS or key.startswith("config.providers"):
            continue
        if key.startswith(IGNORED_PREFIXES) and not _is_setting(key):
            if not _default_plugin(key, key, value, origin):
                warnings.append(f"{key} is ignored: a Connect/MM2 runtime setting")
            continue
        known = key in _TOP_LEVEL or _is_known(key, clusters)
        if key.startswith("mirror.") and not known:
            raise _mirror_key_error(key, value, key, origin)
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
                    src, tgt, props, per_flow.get((src, tgt), {}), origin, warnings
                )
                overrides = {
                    k: MappingProxyType(v) for k, v in flow_clients.get((src, tgt), {}).items()
                }
                flows.append(FlowConfig(src, tgt, enabled, settings, MappingProxyType(overrides)))
    config = MirrorConfig(
        clusters=_frozen_clusters(clusters),
        flows=tuple(flows),
        state_dir=props.get("mirror.state.dir", "./mirror-state").strip() or "./mirror-state",
        origin=origin,
        unknown_keys=tuple(unknown),
        properties=_frozen(props),
        warnings=tuple(dict.fromkeys(warnings)),
    )
    for flow in config.flows:
        flow.policy()  # fails early on an unknown policy class
    read_groups(config.flows)  # fan-out flows that disagree on their shared read fail here
    # lazy: databricks.py imports this module
    from mirror_lib.config.databricks import check_state_dir

    check_state_dir(config.state_dir)  # on Databricks: never the driver's local disk
    return config


def _default_plugin(key: str, name: str, value: str, origin: str) -> bool:
    """True for an MM2 plug-in class key set to its default, which is what runs here (``name``
    is ``key`` without a flow prefix); another class is refused."""
    if name not in _PLUGIN_CLASSES:
        return False
    default, instead = _PLUGIN_CLASSES[name]
    if value.strip() not in (default, default.rsplit(".", 1)[1]):
        raise ConfigError(key, value, f"{default} (no other class can run here: {instead})", origin)
    return True


def _mirror_key_error(key: str, value: str, name: str, origin: str) -> ConfigError:
    """An unknown ``mirror.*`` key, or a process-wide one set per flow (``key`` as written,
    ``name`` without its flow prefix): refused, since ignoring it would change the run."""
    if name != key and (name in GLOBAL_BY_KEY or name == "mirror.state.dir"):
        prefix = key[: len(key) - len(name)]
        valid = f"{name} without '{prefix}': it is process-wide, set once at the top level"
        return ConfigError(key, value, valid, origin)
    per_flow = sorted(k for k in BY_KEY if k.startswith("mirror."))
    if name != key:
        return ConfigError(key, value, f"a per-flow mirror.* key ({', '.join(per_flow)})", origin)
    valid = ", ".join(sorted((*per_flow, *GLOBAL_BY_KEY, "mirror.state.dir")))
    return ConfigError(key, value, f"a known mirror.* key ({valid})", origin)


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


def load_config(path: str | os.PathLike[str], **overrides: str) -> MirrorConfig:
    """Read and validate an ``mm2.properties`` file; ``overrides`` replace keys (widgets)."""
    props = read_properties_file(path)
    props.update(overrides)
    return parse_config(props, origin=str(path))
