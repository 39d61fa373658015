"""The per-flow settings we understand: MM2's connector keys (MM2's defaults) plus ``mirror.*``.

Each :class:`~mirror_lib.config.setting_values.Setting` knows its key, its default and how to
parse a string (:mod:`~mirror_lib.config.setting_values`); the flow's value is ``A->B.<key>`` if
set, else the top-level ``<key>``, else an old alias (``A->B.<alias>``, then ``<alias>``), else
the default (MM2's resolution order). Process-wide keys, never per flow, are in
:mod:`~mirror_lib.config.global_settings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from mirror_lib.config.setting_values import (
    Setting,
    boolean,
    choice,
    int_at_least,
    int_between,
    metrics_retention,
    nonempty,
    principal,
    regex_list,
    replication_factor,
    seconds,
    text,
)
from mirror_lib.mm2.filters import DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS_EXCLUDE

DEFAULT_CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, min\.insync\.replicas"
)
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"

# The settings that take one of a few words: their parsers accept exactly these, so a comparison
# with another word is an error mypy reports.
DefaultsFrom = Literal["target", "source"]
SyncsLocation = Literal["source", "target"]
Delivery = Literal["exactly_once", "at_least_once"]
StartingOffsets = Literal["", "earliest", "latest"]
OnGap = Literal["fail", "skip"]


#: ``mirror.commit.interval.ms`` at least once when the user did not set it: there a commit does
#: not decide when a record is visible, and commits every 20 ms loaded the brokers
#: (docs/how-it-works.md, "At least once").
AT_LEAST_ONCE_COMMIT_INTERVAL_MS = 1000

#: ``mirror.metrics.topic.retention.ms`` by default: 7 days, the broker's own default
#: (``log.retention.hours = 168``) and Kafka's ``offsets.retention.minutes``, stated on the topic
#: so that neither a shorter cluster default cuts translation short nor an unlimited one keeps
#: the topic growing (docs/operations/state.md).
METRICS_RETENTION_MS = 7 * 24 * 3600 * 1000
#: ``refresh.topics.interval.seconds`` when unset, so that a new topic is copied within a minute
#: of its creation (issue 52): after discovery the slice ends, the planner creates the remote
#: topic and new copy tasks start, about 30 s on the busy 2-core bench machine. Each copy task
#: lists the source's topics this often; MM2's default, 600 s, keeps new topics waiting.
REFRESH_TOPICS_S = 15


SETTINGS: tuple[Setting, ...] = (
    Setting("topics", "topics", ".*", regex_list, "topics to replicate (regexes, full match)"),
    Setting(
        "topics.exclude",
        "topics_exclude",
        DEFAULT_TOPICS_EXCLUDE,
        regex_list,
        "topics never replicated; exclude wins",
        ("topics.blacklist",),
    ),
    Setting("groups", "groups", ".*", regex_list, "consumer groups to checkpoint"),
    Setting(
        "groups.exclude",
        "groups_exclude",
        DEFAULT_GROUPS_EXCLUDE,
        regex_list,
        "groups never checkpointed",
        ("groups.blacklist",),
    ),
    Setting("replication.policy.class", "policy_class", DEFAULT_POLICY, text, "naming policy"),
    Setting("replication.policy.separator", "separator", ".", nonempty, "remote topic separator"),
    Setting(
        "replication.policy.internal.topic.separator.enabled",
        "internal_separator_enabled",
        "true",
        boolean,
        "use the separator in internal topic names (KIP-690)",
    ),
    Setting("emit.heartbeats.enabled", "emit_heartbeats", "true", boolean, "write heartbeats"),
    Setting(
        "emit.heartbeats.interval.seconds",
        "heartbeats_interval",
        "1",
        seconds,
        "heartbeat period",
    ),
    Setting("emit.checkpoints.enabled", "emit_checkpoints", "true", boolean, "write checkpoints"),
    Setting(
        "emit.checkpoints.interval.seconds",
        "checkpoints_interval",
        "60",
        seconds,
        "checkpoint period",
    ),
    Setting(
        "sync.group.offsets.enabled",
        "sync_group_offsets",
        "false",
        boolean,
        "commit translated offsets on the target (KIP-545)",
    ),
    Setting(
        "sync.group.offsets.interval.seconds",
        "sync_group_offsets_interval",
        "60",
        seconds,
        "group offset sync period",
    ),
    Setting(
        "refresh.topics.enabled",
        "refresh_topics",
        "true",
        boolean,
        "discover new topics and partitions while running (false: those found at start)",
    ),
    Setting(
        "refresh.topics.interval.seconds",
        "refresh_topics_interval",
        str(REFRESH_TOPICS_S),
        seconds,
        "how often a copy task looks for new topics and partitions (at most every 60 s), and "
        "partitions are synced; MM2's default is 600. Topics are listed every slice regardless",
    ),
    Setting(
        "refresh.groups.enabled",
        "refresh_groups",
        "true",
        boolean,
        "discover new groups while running (false: those the checkpoint job listed first)",
    ),
    Setting(
        "refresh.groups.interval.seconds",
        "refresh_groups_interval",
        "600",
        seconds,
        "group discovery period (groups are listed every checkpoint cycle, at least this often)",
    ),
    Setting("sync.topic.configs.enabled", "sync_topic_configs", "true", boolean, "sync configs"),
    Setting(
        "sync.topic.configs.interval.seconds",
        "sync_topic_configs_interval",
        "600",
        seconds,
        "config sync period",
    ),
    Setting("sync.topic.acls.enabled", "sync_topic_acls", "true", boolean, "sync topic ACLs"),
    Setting(
        "sync.topic.acls.interval.seconds",
        "sync_topic_acls_interval",
        "600",
        seconds,
        "ACL sync period",
    ),
    Setting(
        "mirror.protect.remote.topics",
        "protect_remote_topics",
        "true",
        boolean,
        "deny WRITE on the flow's remote topics to every other principal that B grants it, "
        "until mirror cutover or mirror failover --apply lifts it (needs an authorizer on B)",
    ),
    Setting(
        "mirror.protect.remote.topics.principal",
        "protect_principal",
        "",
        principal,
        "the principal the flow writes to B as, never denied; default: from B's login (SASL "
        "PLAIN/SCRAM username, or User:ANONYMOUS without a login)",
    ),
    Setting(
        "config.properties.exclude",
        "config_properties_exclude",
        DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
        regex_list,
        "topic configs never synced",
        ("config.properties.blacklist",),
    ),
    Setting(
        "use.defaults.from",
        "use_defaults_from",
        "target",
        choice(*get_args(DefaultsFrom)),
        "whose defaults apply to synced topic configs (KIP-894)",
    ),
    Setting("offset.lag.max", "offset_lag_max", "100", int_at_least(0), "MM2 sync spacing"),
    Setting(
        "offset-syncs.topic.location",
        "offset_syncs_location",
        "target",
        choice(*get_args(SyncsLocation)),
        "cluster holding the offset-syncs topic (KIP-716); target = written in the data's "
        "transaction (MM2's default is source)",
    ),
    Setting(
        "emit.offset-syncs.enabled",
        "emit_offset_syncs",
        "true",
        boolean,
        "write offset syncs (KIP-1031)",
    ),
    Setting(
        "heartbeats.replication.enabled",
        "heartbeats_replication",
        "true",
        boolean,
        "replicate heartbeats topics even when topics does not match (KIP-1089)",
    ),
    Setting("replication.factor", "replication_factor", "2", replication_factor, "remote topics"),
    Setting(
        "offset-syncs.topic.replication.factor",
        "offset_syncs_replication_factor",
        "3",
        replication_factor,
        "offset-syncs topic",
    ),
    Setting(
        "checkpoints.topic.replication.factor",
        "checkpoints_replication_factor",
        "3",
        replication_factor,
        "checkpoints topic",
    ),
    Setting(
        "heartbeats.topic.replication.factor",
        "heartbeats_replication_factor",
        "3",
        replication_factor,
        "heartbeats topic",
    ),
    Setting(
        "tasks.max",
        "tasks",
        "2",
        int_at_least(1),
        "task slots (stable partition owners, as MM2's tasks); the default is a fixed 2, not the "
        "machine's cores, so that a partition keeps its slot on any machine",
    ),
    Setting(
        "mirror.slots.shared.below.records.per.second",
        "slots_shared_below",
        "10000",
        int_at_least(0),
        "while a flow copies fewer records a second than this and has no backlog, its slots "
        "share one copy task (one producer, one transaction a commit); 0: a task per slot always",
    ),
    Setting(
        "admin.timeout.ms",
        "admin_timeout_ms",
        "60000",
        int_at_least(1),
        "how long one admin call may take (topics, configs, ACLs, listing groups)",
    ),
    Setting(
        "mirror.delivery",
        "delivery",
        "exactly_once",
        choice(*get_args(Delivery)),
        "transactions + ledger, or plain idempotent producer",
    ),
    Setting(
        "mirror.starting.offsets",
        "starting_offsets",
        "",
        choice(*get_args(StartingOffsets)),
        "where a new flow starts; default: its source consumer's auto.offset.reset, else earliest",
    ),
    Setting(
        "mirror.batch.duration.seconds",
        "batch_duration",
        "300",
        seconds,
        "life of one micro-batch (a time slice): copy tasks run that long, then Spark checkpoints",
    ),
    Setting(
        "mirror.commit.interval.ms",
        "commit_interval_ms",
        "20",
        int_at_least(1),
        "a copy task commits its Kafka transaction this often while it is at the source's head; "
        f"at least once, unset: {AT_LEAST_ONCE_COMMIT_INTERVAL_MS} (records are visible when "
        "acknowledged, and a commit moves only the ledger, metrics and offset syncs)",
    ),
    Setting(
        "mirror.fetch.pace.ms",
        "fetch_pace_ms",
        "0",
        int_at_least(0),
        "at the source's head, a partition is fetched again only this long after its last "
        "records arrived; 0: at once. For brokers whose fetch cost grows with the partition",
    ),
    Setting(
        "mirror.client.threads.nice",
        "client_threads_nice",
        "10",
        int_between(0, 19),
        "a copy task's Kafka client network threads run at this nice (Linux); 0: unchanged. "
        "They busy-wait while the target holds acknowledgements",
    ),
    Setting(
        "mirror.commit.max.records",
        "commit_max_records",
        "100000",
        int_at_least(1),
        "records of one Kafka transaction at most",
        ("mirror.batch.max.records",),
    ),
    Setting(
        "mirror.commit.max.bytes",
        "commit_max_bytes",
        "67108864",
        int_at_least(1),
        "bytes (keys + values) of one Kafka transaction at most",
        ("mirror.batch.max.bytes",),
    ),
    Setting(
        "mirror.on.gap",
        "on_gap",
        "fail",
        choice(*get_args(OnGap)),
        "a vanished source range is a gap event, then fails the query (default) or is skipped",
    ),
    Setting(
        "mirror.skip.older.than.ms",
        "skip_older_than_ms",
        "0",
        int_at_least(0),
        "stale-data policy: records older than this when the copier reaches them are not copied "
        "(each skipped range is a skip event); 0: off. Needs mirror.on.gap = skip",
    ),
    Setting(
        "mirror.skip.max.records",
        "skip_max_records",
        "0",
        int_at_least(0),
        "stale records one outage may skip per partition; past it they are copied; 0: no cap",
    ),
    Setting(
        "mirror.skip.max.bytes",
        "skip_max_bytes",
        "0",
        int_at_least(0),
        "key + value bytes one outage may skip per partition; past it, copied; 0: no cap",
    ),
    Setting(
        "mirror.skip.topics",
        "skip_topics",
        ".*",
        regex_list,
        "topics the stale-data policy applies to (regexes, full match)",
    ),
    Setting(
        "mirror.fanout.enabled",
        "fanout",
        "false",
        boolean,
        "enabled flows from one source that all set this share one read of the source "
        "(one consumer per partition, one transactional producer per target)",
    ),
    Setting(
        "mirror.fanout.max.lag.records",
        "fanout_max_lag_records",
        "100000",
        int_at_least(1),
        "fan-out: records a target may have unacknowledged before it leaves the shared read and "
        "catches up on its own",
    ),
    Setting(
        "mirror.metrics.interval.ms",
        "metrics_interval_ms",
        "1000",
        int_at_least(0),
        "a copy task sums its `batch` metrics per partition over this long and writes them with "
        "the next commit (0: one per partition per transaction)",
    ),
    Setting(
        "mirror.metrics.topic.retention.ms",
        "metrics_retention_ms",
        str(METRICS_RETENTION_MS),
        metrics_retention,
        "`retention.ms` of the flow's metrics topic when the flow creates it (MM2 has no such "
        "topic; an existing topic keeps its own): how far back translation's segments reach. "
        "At least a day, or -1 to keep everything",
    ),
    Setting(
        "mirror.trigger.interval.seconds",
        "trigger_interval",
        "1",
        seconds,
        "how often the planner looks for work when no slice runs (new topics, idle flows)",
    ),
)

BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
ALIASES: dict[str, str] = {alias: s.key for s in SETTINGS for alias in s.aliases}


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
    protect_remote_topics: bool
    protect_principal: str
    config_properties_exclude: tuple[str, ...]
    use_defaults_from: DefaultsFrom
    offset_lag_max: int
    offset_syncs_location: SyncsLocation
    emit_offset_syncs: bool
    heartbeats_replication: bool
    replication_factor: int
    offset_syncs_replication_factor: int
    checkpoints_replication_factor: int
    heartbeats_replication_factor: int
    tasks: int
    slots_shared_below: int
    admin_timeout_ms: int
    delivery: Delivery
    starting_offsets: StartingOffsets
    batch_duration: float
    commit_interval_ms: int
    fetch_pace_ms: int
    client_threads_nice: int
    commit_max_records: int
    commit_max_bytes: int
    on_gap: OnGap
    skip_older_than_ms: int
    skip_max_records: int
    skip_max_bytes: int
    skip_topics: tuple[str, ...]
    fanout: bool
    fanout_max_lag_records: int
    metrics_retention_ms: int
    metrics_interval_ms: int
    trigger_interval: float
    separator_configured: bool = False
    explicit: frozenset[str] = frozenset()

    @property
    def exactly_once(self) -> bool:
        """True when the flow delivers with transactions and the target-side ledger."""
        return self.delivery == "exactly_once"

    def describe(self) -> dict[str, Any]:
        """Key -> value for printing, in MM2 key names; a list as written in mm2.properties (its
        items are one regex joined with ``|``, so ``('(a', 'b)')`` would mislead)."""
        values = {s.key: getattr(self, s.attr) for s in SETTINGS}
        return {k: ", ".join(v) if isinstance(v, tuple) else v for k, v in values.items()}
