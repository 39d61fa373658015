"""Keys MM2 reads that run differently here, checked before anything starts: plug-in classes
other than the default, transforms, MirrorMaker 1 names, unknown or misplaced ``mirror.*`` keys,
references where values are read as written; and the Connect keys accepted and ignored.
"""

from __future__ import annotations

from mirror_lib.config.global_settings import GLOBAL_BY_KEY
from mirror_lib.config.properties import has_reference
from mirror_lib.config.setting_values import split_list
from mirror_lib.config.settings import BY_KEY
from mirror_lib.errors import ConfigError

#: MirrorMaker 1 names MM2 never read -> the MM2 key meant (a hint, not an alias).
MM1_NAMES: dict[str, str] = {"topics.whitelist": "topics", "groups.whitelist": "groups"}
#: Connect's single message transform keys: refused unless empty (records are copied unchanged).
TRANSFORM_KEYS: tuple[str, ...] = ("transforms", "predicates")

#: MM2/Connect keys we accept and ignore (they configure Connect, not replication semantics).
IGNORED_PREFIXES: tuple[str, ...] = (
    "dedicated.mode",
    "topic.filter.class",
    "group.filter.class",
    "config.property.filter.class",
    "forwarding.admin.class",
    "metric.reporters",
    "metric.names.formats",
    "exactly.once",
    "consumer.poll.timeout.ms",
    "offset.storage",
    "config.storage",
    "status.storage",
    "offset.flush",
    "key.converter",
    "value.converter",
    "header.converter",
    "task.",
    "worker.",
    "listeners",
    "rest.",
    "name",
    "connector.class",
)

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


def connector_extra(
    key: str, name: str, value: str, origin: str, warnings: list[str], transform_keys: list[str]
) -> bool:
    """True when ``key`` (``name`` without a flow prefix) is a connector key handled here:
    ``transforms``/``predicates`` (refused unless empty; their sub-keys collected in
    ``transform_keys``) or an MM1 name (warned with the MM2 name)."""
    if name in TRANSFORM_KEYS:
        if split_list(value):
            expected = (
                f"no {name}: mirror_lib copies records unchanged and runs no single message "
                f"transforms (SMTs); remove {name} and its {name}.<name>.* keys"
            )
            raise ConfigError(key, value, expected, origin)
        return True
    if name.startswith(tuple(k + "." for k in TRANSFORM_KEYS)):
        transform_keys.append(key)
        return True
    if name in MM1_NAMES:
        new = MM1_NAMES[name]
        warnings.append(
            f"{key} is ignored: a MirrorMaker 1 name, which MM2 does not read either ({new} "
            f"decides what is mirrored; its default .* is everything); did you mean {new!r}?"
        )
        return True
    return False


def refuse_reference(key: str, value: str, origin: str) -> None:
    """Process-wide keys are read as written (also outside this module): no references."""
    if has_reference(value):
        raise ConfigError(
            key,
            value,
            "a value written out: ${...} references are resolved in flow and client settings, "
            "not in clusters, mirror.state.dir or the process-wide mirror.* keys",
            origin,
        )


def default_plugin(key: str, name: str, value: str, origin: str) -> bool:
    """True for an MM2 plug-in class key set to its default, which is what runs here (``name``
    is ``key`` without a flow prefix); another class is refused."""
    if name not in _PLUGIN_CLASSES:
        return False
    default, instead = _PLUGIN_CLASSES[name]
    if value.strip() not in (default, default.rsplit(".", 1)[1]):
        raise ConfigError(key, value, f"{default} (no other class can run here: {instead})", origin)
    return True


def mirror_key_error(key: str, value: str, name: str, origin: str) -> ConfigError:
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
