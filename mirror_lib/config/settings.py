"""The per-flow settings we understand: MM2's connector keys (MM2's defaults) plus ``mirror.*``.

Each :class:`Setting` knows its key, its default and how to parse a string; the flow's value is
``A->B.<key>`` if set, else the top-level ``<key>``, else the default (MM2's resolution order).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mirror_lib.errors import ConfigError
from mirror_lib.mm2.filters import (
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE,
    compile_patterns,
    parse_list,
)

DEFAULT_CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, min\.insync\.replicas"
)
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"


def split_list(text: str) -> tuple[str, ...]:
    """MM2's comma-separated list: items trimmed, empty items (e.g. a trailing comma) dropped."""
    return parse_list(text)


def _bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(key, raw, "true or false")
    return value == "true"


def _int_at_least(minimum: int) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(key, raw, f"a whole number >= {minimum}") from None
        if value < minimum:
            raise ConfigError(key, raw, f"a whole number >= {minimum}")
        return value

    return parse


def _replication_factor(key: str, raw: str) -> int:
    value = _int_at_least(-1)(key, raw)
    if value == 0:
        raise ConfigError(key, raw, "a replication factor >= 1, or -1 for the broker default")
    return value


def _seconds(key: str, raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(key, raw, "a positive number of seconds") from None
    if not value > 0:
        raise ConfigError(
            key, raw, "a positive number of seconds (to turn the feature off use its .enabled key)"
        )
    return value


def _choice(*choices: str) -> Callable[[str, str], str]:
    def parse(key: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ConfigError(key, raw, "one of " + ", ".join(choices))
        return value

    return parse


def _regex_list(key: str, raw: str) -> tuple[str, ...]:
    items = split_list(raw)
    compile_patterns(items, key)  # the same Java-to-Python translation the filters use
    return items


def _text(key: str, raw: str) -> str:
    return raw.strip()


def _nonempty(key: str, raw: str) -> str:
    if not raw:
        raise ConfigError(
            key,
            raw,
            "a non-empty string (empty only together with an empty source.cluster.alias, the "
            "pre-3.0 idiom for keeping topic names; prefer replication.policy.class = "
            "IdentityReplicationPolicy)",
        )
    return raw


@dataclass(frozen=True)
class Setting:
    """One known key: its attribute name on :class:`FlowSettings` (below), default and parser."""

    key: str
    attr: str
    default: str
    parse: Callable[[str, str], Any]
    doc: str
    aliases: tuple[str, ...] = ()


SETTINGS: tuple[Setting, ...] = (
    Setting("topics", "topics", ".*", _regex_list, "topics to replicate (regexes, full match)"),
    Setting(
        "topics.exclude",
        "topics_exclude",
        DEFAULT_TOPICS_EXCLUDE,
        _regex_list,
        "topics never replicated; exclude wins",
        ("topics.blacklist",),
    ),
    Setting("groups", "groups", ".*", _regex_list, "consumer groups to checkpoint"),
    Setting(
        "groups.exclude",
        "groups_exclude",
        DEFAULT_GROUPS_EXCLUDE,
        _regex_list,
        "groups never checkpointed",
        ("groups.blacklist",),
    ),
    Setting("replication.policy.class", "policy_class", DEFAULT_POLICY, _text, "naming policy"),
    Setting("replication.policy.separator", "separator", ".", _nonempty, "remote topic separator"),
    Setting(
        "replication.policy.internal.topic.separator.enabled",
        "internal_separator_enabled",
        "true",
        _bool,
        "use the separator in internal topic names (KIP-690)",
    ),
    Setting("emit.heartbeats.enabled", "emit_heartbeats", "true", _bool, "write heartbeats"),
    Setting(
        "emit.heartbeats.interval.seconds",
        "heartbeats_interval",
        "1",
        _seconds,
        "heartbeat period",
    ),
    Setting("emit.checkpoints.enabled", "emit_checkpoints", "true", _bool, "write checkpoints"),
    Setting(
        "emit.checkpoints.interval.seconds",
        "checkpoints_interval",
        "60",
        _seconds,
        "checkpoint period",
    ),
    Setting(
        "sync.group.offsets.enabled",
        "sync_group_offsets",
        "false",
        _bool,
        "commit translated offsets on the target (KIP-545)",
    ),
    Setting(
        "sync.group.offsets.interval.seconds",
        "sync_group_offsets_interval",
        "60",
        _seconds,
        "group offset sync period",
    ),
    Setting("refresh.topics.enabled", "refresh_topics", "true", _bool, "discover new topics"),
    Setting(
        "refresh.topics.interval.seconds",
        "refresh_topics_interval",
        "600",
        _seconds,
        "partition/config refresh period (topics are listed every batch regardless)",
    ),
    Setting("refresh.groups.enabled", "refresh_groups", "true", _bool, "discover new groups"),
    Setting(
        "refresh.groups.interval.seconds",
        "refresh_groups_interval",
        "600",
        _seconds,
        "group discovery period",
    ),
    Setting("sync.topic.configs.enabled", "sync_topic_configs", "true", _bool, "sync configs"),
    Setting(
        "sync.topic.configs.interval.seconds",
        "sync_topic_configs_interval",
        "600",
        _seconds,
        "config sync period",
    ),
    Setting("sync.topic.acls.enabled", "sync_topic_acls", "true", _bool, "sync topic ACLs"),
    Setting(
        "sync.topic.acls.interval.seconds",
        "sync_topic_acls_interval",
        "600",
        _seconds,
        "ACL sync period",
    ),
    Setting(
        "config.properties.exclude",
        "config_properties_exclude",
        DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
        _regex_list,
        "topic configs never synced",
        ("config.properties.blacklist",),
    ),
    Setting(
        "use.defaults.from",
        "use_defaults_from",
        "target",
        _choice("target", "source"),
        "whose defaults apply to synced topic configs (KIP-894)",
    ),
    Setting("offset.lag.max", "offset_lag_max", "100", _int_at_least(0), "MM2 sync spacing"),
    Setting(
        "offset-syncs.topic.location",
        "offset_syncs_location",
        "target",
        _choice("source", "target"),
        "cluster holding the offset-syncs topic (KIP-716); target = written in the data's "
        "transaction (MM2's default is source)",
    ),
    Setting(
        "emit.offset-syncs.enabled",
        "emit_offset_syncs",
        "true",
        _bool,
        "write offset syncs (KIP-1031)",
    ),
    Setting(
        "heartbeats.replication.enabled",
        "heartbeats_replication",
        "true",
        _bool,
        "replicate heartbeats topics even when topics does not match (KIP-1089)",
    ),
    Setting("replication.factor", "replication_factor", "2", _replication_factor, "remote topics"),
    Setting(
        "offset-syncs.topic.replication.factor",
        "offset_syncs_replication_factor",
        "3",
        _replication_factor,
        "offset-syncs topic",
    ),
    Setting(
        "checkpoints.topic.replication.factor",
        "checkpoints_replication_factor",
        "3",
        _replication_factor,
        "checkpoints topic",
    ),
    Setting(
        "heartbeats.topic.replication.factor",
        "heartbeats_replication_factor",
        "3",
        _replication_factor,
        "heartbeats topic",
    ),
    Setting("tasks.max", "tasks", "1", _int_at_least(1), "task slots (stable partition owners)"),
    Setting("admin.timeout.ms", "admin_timeout_ms", "60000", _int_at_least(1), "admin calls"),
    Setting(
        "mirror.delivery",
        "delivery",
        "exactly_once",
        _choice("exactly_once", "at_least_once"),
        "transactions + ledger, or plain idempotent producer",
    ),
    Setting(
        "mirror.starting.offsets",
        "starting_offsets",
        "",
        _choice("", "earliest", "latest"),
        "where a new flow starts; default: <source>.consumer.auto.offset.reset or earliest",
    ),
    Setting(
        "mirror.batch.duration.seconds",
        "batch_duration",
        "300",
        _seconds,
        "life of one micro-batch (a time slice): copy tasks run that long, then Spark checkpoints",
    ),
    Setting(
        "mirror.commit.interval.ms",
        "commit_interval_ms",
        "100",
        _int_at_least(1),
        "a copy task commits its Kafka transaction this often while it is at the source's head",
    ),
    Setting(
        "mirror.commit.max.records",
        "commit_max_records",
        "100000",
        _int_at_least(1),
        "records of one Kafka transaction at most",
        ("mirror.batch.max.records",),
    ),
    Setting(
        "mirror.commit.max.bytes",
        "commit_max_bytes",
        "67108864",
        _int_at_least(1),
        "bytes (keys + values) of one Kafka transaction at most",
        ("mirror.batch.max.bytes",),
    ),
    Setting(
        "mirror.on.gap",
        "on_gap",
        "fail",
        _choice("fail", "skip"),
        "a vanished source range fails the query (default) or is recorded and skipped",
    ),
    Setting(
        "mirror.skip.older.than.ms",
        "skip_older_than_ms",
        "0",
        _int_at_least(0),
        "stale-data policy: records older than this when the copier reaches them are not copied "
        "(each skipped range is a skip event); 0: off. Needs mirror.on.gap = skip",
    ),
    Setting(
        "mirror.skip.max.records",
        "skip_max_records",
        "0",
        _int_at_least(0),
        "stale records one outage may skip per partition; past it they are copied; 0: no cap",
    ),
    Setting(
        "mirror.skip.max.bytes",
        "skip_max_bytes",
        "0",
        _int_at_least(0),
        "key + value bytes one outage may skip per partition; past it, copied; 0: no cap",
    ),
    Setting(
        "mirror.skip.topics",
        "skip_topics",
        ".*",
        _regex_list,
        "topics the stale-data policy applies to (regexes, full match)",
    ),
    Setting(
        "mirror.fanout.enabled",
        "fanout",
        "false",
        _bool,
        "enabled flows from one source that all set this share one read of the source "
        "(one consumer per partition, one transactional producer per target)",
    ),
    Setting(
        "mirror.fanout.max.lag.records",
        "fanout_max_lag_records",
        "100000",
        _int_at_least(1),
        "fan-out: records a target may have unacknowledged before it leaves the shared read and "
        "catches up on its own",
    ),
    Setting(
        "mirror.trigger.interval.seconds",
        "trigger_interval",
        "1",
        _seconds,
        "how often the planner looks for work when no slice runs (new topics, idle flows)",
    ),
)

BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
ALIASES: dict[str, str] = {alias: s.key for s in SETTINGS for alias in s.aliases}


def _tracking_uri(key: str, raw: str) -> str:
    value = raw.strip()
    if value and value != "databricks" and not re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", value):
        raise ConfigError(
            key,
            raw,
            "an MLflow tracking URI such as sqlite:///path/mlflow.db, http(s)://host:port or "
            "databricks, or empty for the default",
        )
    return value


def _experiment(key: str, raw: str) -> str:
    if not raw.strip():
        raise ConfigError(key, raw, "a non-empty MLflow experiment name")
    return raw.strip()


_SCHEMA = r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)?|`[^`]+`(\.`[^`]+`)?"


def _schema(key: str, raw: str) -> str:
    value = raw.strip()
    if value and not re.fullmatch(_SCHEMA, value):
        raise ConfigError(key, raw, "a schema name such as main.mirror (catalog.schema), or empty")
    return value


def _outage_seconds(key: str, raw: str) -> float | None:
    if not raw.strip():
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(key, raw, "a number of seconds > 0, or empty for the default") from None
    if not value > 0:
        raise ConfigError(key, raw, "a number of seconds > 0, or empty for the default")
    return value


#: Process-wide ``mirror.*`` keys (top level, never per flow); read with :func:`global_setting`.
GLOBAL_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "mirror.mlflow.enabled",
        "mlflow_enabled",
        "false",
        _bool,
        "log each `mirror run` as an MLflow run (also: `mirror run --mlflow`)",
    ),
    Setting(
        "mirror.mlflow.tracking.uri",
        "mlflow_tracking_uri",
        "",
        _tracking_uri,
        "MLflow tracking URI; empty: MLFLOW_TRACKING_URI, else databricks on Databricks, else "
        "sqlite:///<mirror.state.dir>/mlflow.db",
    ),
    Setting(
        "mirror.mlflow.experiment",
        "mlflow_experiment",
        "mirror_lib",
        _experiment,
        "MLflow experiment name (on Databricks a relative name goes under /Shared/)",
    ),
    Setting(
        "mirror.outage.max.seconds",
        "outage_max_seconds",
        "",
        _outage_seconds,
        "how long a run keeps retrying an unreachable cluster (or another transient failure) "
        "before it fails (for `--once` also: how long its slices may leave a partition where it "
        "was); empty: indefinitely for continuous runs, 120 s for `--once`",
    ),
)
GLOBAL_SETTINGS += (
    Setting(
        "mirror.tables.enabled",
        "tables_enabled",
        "true",
        _bool,
        "materialize the internal topics into Delta tables",
    ),
    Setting(
        "mirror.tables.writer",
        "tables_writer",
        "auto",
        _choice("auto", "delta-rs", "spark"),
        "delta-rs, Delta's Spark writer, or auto",
    ),
    Setting(
        "mirror.tables.schema",
        "tables_schema",
        "",
        _schema,
        "catalog.schema of the tables and views with the Spark writer",
    ),
)


def _metrics_port(key: str, raw: str) -> int:
    expected = "a TCP port 1..65535 to serve Prometheus metrics on, or 0 / empty for none"
    try:
        port = int(raw.strip() or "0")
    except ValueError:
        raise ConfigError(key, raw, expected) from None
    if not 0 <= port <= 65535:
        raise ConfigError(key, raw, expected)
    return port


def _metrics_host(key: str, raw: str) -> str:
    value = raw.strip()
    if not value or re.search(r"[\s/]", value):
        raise ConfigError(
            key, raw, "an address to listen on: 127.0.0.1 (default), 0.0.0.0 or a name"
        )
    return value


GLOBAL_SETTINGS += (
    Setting(
        "mirror.metrics.port",
        "metrics_port",
        "0",
        _metrics_port,
        "serve Prometheus metrics from the driver of `mirror run` on this port (0: off; also "
        "`mirror run --metrics-port`)",
    ),
    Setting(
        "mirror.metrics.host",
        "metrics_host",
        "127.0.0.1",
        _metrics_host,
        "address the metrics endpoint listens on (also `mirror run --metrics-host`)",
    ),
)
GLOBAL_BY_KEY: dict[str, Setting] = {s.key: s for s in GLOBAL_SETTINGS}


def global_setting(props: Mapping[str, str], key: str) -> Any:
    """The parsed value of a top-level key of :data:`GLOBAL_SETTINGS`, else its default."""
    setting = GLOBAL_BY_KEY[key]
    return setting.parse(key, props.get(key, setting.default))


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
    batch_duration: float
    commit_interval_ms: int
    commit_max_records: int
    commit_max_bytes: int
    on_gap: str
    skip_older_than_ms: int
    skip_max_records: int
    skip_max_bytes: int
    skip_topics: tuple[str, ...]
    fanout: bool
    fanout_max_lag_records: int
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
