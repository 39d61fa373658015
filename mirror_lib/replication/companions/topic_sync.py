"""Topic creation, config, ACL and partition sync as MM2 does it
(docs/mm2-reference.md#topic-sync), as pure planning plus a thin runner.

The pure functions take and return :mod:`mirror_lib.kafka.admin_ops` dataclasses and never talk to
Kafka.
:class:`TopicSyncer` applies their plans through two :class:`~mirror_lib.kafka.admin_ops.AdminOps`.
Scheduling (intervals, "has anything changed") belongs to the caller.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from mirror_lib.config import settings
from mirror_lib.errors import (
    BrokerError,
    ConfigError,
    RemoteTopicError,
    UnsupportedOperationError,
)
from mirror_lib.kafka.admin_ops import (
    AclBinding,
    AdminOps,
    ConfigEntry,
    ConfigOp,
    CreateOutcome,
    NewTopicSpec,
    kafka_error_name,
    unknown_topic_config,
)
from mirror_lib.mm2.filters import compile_patterns, parse_list

log = logging.getLogger(__name__)

#: MM2 4.x default of ``config.properties.exclude`` (regexes, each a full match).
DEFAULT_CONFIG_PROPERTIES_EXCLUDE: tuple[str, ...] = parse_list(
    settings.DEFAULT_CONFIG_PROPERTIES_EXCLUDE
)


@dataclass(frozen=True)
class ConfigPropertyFilter:
    """MM2's DefaultConfigPropertyFilter: ``config.properties.exclude`` + ``use.defaults.from``.

    ``exclude_patterns`` is a sequence of regexes or one comma-separated string (as in
    mm2.properties); a property is excluded when any pattern matches it entirely.
    """

    exclude_patterns: Sequence[str] | str = DEFAULT_CONFIG_PROPERTIES_EXCLUDE
    use_defaults_from: Literal["target", "source"] = "target"
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pats = parse_list(self.exclude_patterns)
        object.__setattr__(self, "exclude_patterns", pats)
        if self.use_defaults_from not in ("target", "source"):
            raise ConfigError("use.defaults.from", self.use_defaults_from, "'target' or 'source'")
        # as MM2: the items joined with '|' into one pattern (a comma always splits)
        compiled = compile_patterns(pats, "config.properties.exclude")
        object.__setattr__(self, "_regex", compiled[0] if compiled else re.compile("(?!)"))

    def excluded(self, name: str) -> bool:
        return self._regex.fullmatch(name) is not None

    @property
    def replicate_source_defaults(self) -> bool:
        return self.use_defaults_from == "source"


def _is_default(entry: ConfigEntry) -> bool:
    """Java's ConfigEntry.isDefault(): the value comes from DEFAULT_CONFIG."""
    if entry.source in ("", "UNKNOWN_CONFIG"):
        return entry.is_default
    return entry.source == "DEFAULT_CONFIG"


def _syncable(entries: Mapping[str, ConfigEntry], flt: ConfigPropertyFilter) -> list[ConfigEntry]:
    """Drop read-only, sensitive, STATIC_BROKER_CONFIG and excluded entries."""
    return [
        e
        for e in entries.values()
        if not e.is_read_only
        and not e.is_sensitive
        and e.source != "STATIC_BROKER_CONFIG"
        and not flt.excluded(e.name)
        and e.value is not None
    ]


def initial_topic_configs(
    source_entries: Mapping[str, ConfigEntry], flt: ConfigPropertyFilter
) -> dict[str, str]:
    """Configs for a newly created remote topic: non-defaults, plus defaults if
    ``use_defaults_from=source``; never read-only, sensitive, static-broker or excluded."""
    return {
        e.name: str(e.value)
        for e in _syncable(source_entries, flt)
        if not _is_default(e) or flt.replicate_source_defaults
    }


def config_sync_ops(
    source_entries: Mapping[str, ConfigEntry], flt: ConfigPropertyFilter
) -> list[ConfigOp]:
    """Incremental ops for the remote topic: DELETE source defaults when
    ``use_defaults_from=target``, else SET; excluded properties are never touched."""
    ops = []
    for e in sorted(_syncable(source_entries, flt), key=lambda e: e.name):
        if _is_default(e) and not flt.replicate_source_defaults:
            ops.append(ConfigOp(e.name, None, "DELETE"))
        else:
            ops.append(ConfigOp(e.name, str(e.value), "SET"))
    return ops


def acl_sync_bindings(
    source_bindings: Iterable[AclBinding],
    should_replicate: Callable[[str], bool],
    remote_name: Callable[[str], str],
) -> list[AclBinding]:
    """Target ACLs for the source's topic ACLs: TOPIC+LITERAL of replicated topics only;
    every ALLOW WRITE dropped; ALLOW ALL -> ALLOW READ; everything else copied to the remote
    topic (DENY WRITE included). Order kept, duplicates removed."""
    out: dict[AclBinding, None] = {}
    for b in source_bindings:
        if b.resource_type != "TOPIC" or b.pattern_type != "LITERAL":
            continue
        if not should_replicate(b.resource_name):
            continue
        operation = b.operation
        if b.permission == "ALLOW":
            if operation == "WRITE":
                continue
            if operation == "ALL":
                operation = "READ"
        remote = remote_name(b.resource_name)
        binding = AclBinding(remote, "LITERAL", b.principal, b.host, operation, b.permission)
        out[binding] = None
    return list(out)


def partition_plan(
    source_partitions: Mapping[str, int],
    target_partitions: Mapping[str, int],
    remote_name: Callable[[str], str],
) -> tuple[dict[str, int], dict[str, int]]:
    """(remote topics to create -> partition count, remote topics to grow -> new count).

    ``source_partitions`` must already be filtered to replicated topics. Never shrinks.
    """
    create: dict[str, int] = {}
    grow: dict[str, int] = {}
    for topic, count in sorted(source_partitions.items()):
        remote = remote_name(topic)
        have = target_partitions.get(remote)
        if have is None:
            create[remote] = count
        elif have < count:
            grow[remote] = count
    return create, grow


@dataclass
class PartitionSyncResult:
    created: dict[str, CreateOutcome] = field(default_factory=dict)
    grown: dict[str, int] = field(default_factory=dict)


class TopicSyncer:
    """Applies MM2's topic, config, ACL and partition sync for one flow source -> target through the
    admin layer.

    Stateless apart from "already warned" flags and the topic configs the target refused as
    unknown (:attr:`unknown_configs`); call each method on its own schedule.
    """

    def __init__(
        self,
        source: AdminOps,
        target: AdminOps,
        should_replicate: Callable[[str], bool],
        remote_name: Callable[[str], str],
        *,
        config_filter: ConfigPropertyFilter | None = None,
        replication_factor: int = 2,
        sync_acls_enabled: bool = True,
    ) -> None:
        self.source = source
        self.target = target
        self.should_replicate = should_replicate
        self.remote_name = remote_name
        self.config_filter = config_filter or ConfigPropertyFilter()
        self.replication_factor = replication_factor
        self.sync_acls_enabled = sync_acls_enabled
        self._warned: set[str] = set()
        #: remote topic -> why the target last refused to create or grow it (cleared on success)
        self.refused: dict[str, BrokerError] = {}
        #: topic configs the target's Kafka release does not have: never sent to it again
        self.unknown_configs: set[str] = set()

    def _warn_once(self, key: str, msg: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg, *args)

    def _unknown_to_target(
        self, err: BaseException | None, remote: str, sent: Iterable[str]
    ) -> str | None:
        """The config of ``sent`` that the target refused for ``remote`` in ``err`` as one its
        Kafka release does not have (a setting of a newer or an older release); else None. Noted,
        so it is never sent again, and so warned about once."""
        name = unknown_topic_config(err)
        if name is None or name not in set(sent):
            return None
        self.unknown_configs.add(name)
        log.warning(
            "the target does not know topic config %s (its Kafka release has no such setting): "
            "%s and every remote topic after it are created and synced without it",
            name,
            remote,
        )
        return name

    def _known(self, configs: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in configs.items() if k not in self.unknown_configs}

    def _replicated(self) -> dict[str, int]:
        return {t: n for t, n in self.source.list_topics().items() if self.should_replicate(t)}

    def create_missing(self, topics: Iterable[str] | None = None) -> dict[str, CreateOutcome]:
        """Create remote topics missing on the target; errors are logged, not raised.

        ``topics``: source topic names to consider (default: every replicated source topic).
        Returns outcomes keyed by remote topic name.
        """
        source = self._replicated()
        if topics is not None:
            wanted = set(topics)
            source = {t: n for t, n in source.items() if t in wanted}
        create, _ = partition_plan(source, self.target.list_topics(), self.remote_name)
        return self._create(source, create)

    def _create(
        self, source: Mapping[str, int], create: Mapping[str, int]
    ) -> dict[str, CreateOutcome]:
        if not create:
            return {}
        by_remote = {self.remote_name(t): t for t in source}
        configs, refused = self._source_configs([by_remote[r] for r in create])
        outcomes = {
            remote: CreateOutcome(remote, "failed", refused[by_remote[remote]])
            for remote in create
            if by_remote[remote] in refused
        }
        specs = [
            NewTopicSpec(
                remote,
                count,
                self.replication_factor,
                initial_topic_configs(configs.get(by_remote[remote], {}), self.config_filter),
            )
            for remote, count in create.items()
            if remote not in outcomes
        ]
        outcomes |= self._create_specs(specs)
        for remote, outcome in outcomes.items():
            if outcome.status == "failed":
                log.error("could not create remote topic %s: %s", remote, outcome.error)
                if outcome.error is not None:
                    self.refused[remote] = outcome.error
                continue
            self.refused.pop(remote, None)
            if outcome.status == "created":
                log.info("created remote topic %s (%d partitions)", remote, create[remote])
        return outcomes

    def _create_specs(self, specs: list[NewTopicSpec]) -> dict[str, CreateOutcome]:
        """Create ``specs`` on the target without the configs it does not know; a topic refused
        for one more such config is created again without it."""
        outcomes: dict[str, CreateOutcome] = {}
        while specs:
            specs = [dataclasses.replace(s, configs=self._known(s.configs)) for s in specs]
            created = self.target.create_topics(specs)
            again = []
            for spec in specs:
                outcome = created[spec.name]
                if self._unknown_to_target(outcome.error, spec.name, spec.configs) is not None:
                    again.append(spec)
                else:
                    outcomes[spec.name] = outcome
            specs = again
        return outcomes

    def _source_configs(
        self, topics: list[str]
    ) -> tuple[dict[str, dict[str, ConfigEntry]], dict[str, BrokerError]]:
        """Source configs of ``topics``, and the topics whose configs the source refused to
        describe (an ACL without DESCRIBE_CONFIGS): their remote topic is not created without
        them, so a compacted topic never becomes a deleting one. A transient failure raises."""
        try:
            return self.source.describe_topic_configs(topics), {}
        except BrokerError as e:
            if e.transient:
                raise
        configs: dict[str, dict[str, ConfigEntry]] = {}
        refused: dict[str, BrokerError] = {}
        for topic in topics:  # which of them: one at a time
            try:
                configs |= self.source.describe_topic_configs([topic])
            except BrokerError as e:
                if e.transient:
                    raise
                refused[topic] = e
        return configs, refused

    def sync_configs(self) -> dict[str, list[ConfigOp]]:
        """Push source topic configs to existing remote topics; returns applied ops.

        A target without IncrementalAlterConfigs raises UnsupportedOperationError (as MM2); a
        config the target does not know is left out (warned about once); other per-topic
        failures are logged and skipped.
        """
        target_topics = self.target.list_topics()
        pairs = {
            t: self.remote_name(t)
            for t in self._replicated()
            if self.remote_name(t) in target_topics
        }
        if not pairs:
            return {}
        applied: dict[str, list[ConfigOp]] = {}
        for topic, entries in self.source.describe_topic_configs(list(pairs)).items():
            ops = self._alter_configs(
                topic, pairs[topic], config_sync_ops(entries, self.config_filter)
            )
            if ops:
                applied[pairs[topic]] = ops
        return applied

    def _alter_configs(self, topic: str, remote: str, ops: list[ConfigOp]) -> list[ConfigOp]:
        """Apply ``ops`` to ``remote`` but those of configs the target does not know; returns
        what was applied (nothing after a failure, which is logged)."""
        while ops := [o for o in ops if o.name not in self.unknown_configs]:
            try:
                self.target.incremental_alter_configs(remote, ops)
                return ops
            except UnsupportedOperationError:
                raise
            except BrokerError as e:
                if self._unknown_to_target(e, remote, (o.name for o in ops)) is None:
                    log.error("could not sync configs of %s to %s: %s", topic, remote, e)
                    return []
        return []

    def sync_acls(self) -> list[AclBinding]:
        """Copy topic ACLs to the target; returns the bindings created.

        Skipped when disabled, or (logged once) when either cluster has no authorizer/ACL API.
        """
        if not self.sync_acls_enabled:
            return []
        try:
            source_bindings = self.source.describe_topic_acls()
        except UnsupportedOperationError as e:
            self._warn_once("source-acls", "skipping ACL sync: source has no ACL support (%s)", e)
            return []
        bindings = acl_sync_bindings(source_bindings, self.should_replicate, self.remote_name)
        if not bindings:
            return []
        try:
            results = self.target.create_acls(bindings)
        except UnsupportedOperationError as e:
            self._warn_once("target-acls", "skipping ACL sync: target has no ACL support (%s)", e)
            return []
        created = []
        for binding, err in results.items():
            if err is None:
                created.append(binding)
            else:
                log.error("could not create ACL %s on the target: %s", binding, err)
        return created

    def sync_partitions(self) -> PartitionSyncResult:
        """Create missing remote topics and grow remote partitions to the source count.

        Never shrinks or deletes. INVALID_PARTITIONS is ignored; a target without
        CreatePartitions is logged once per topic. Refusals are kept in ``refused``.
        """
        source = self._replicated()
        create, grow = partition_plan(source, self.target.list_topics(), self.remote_name)
        result = PartitionSyncResult(created=self._create(source, create))
        for remote, total in grow.items():
            try:
                self.target.create_partitions(remote, total)
            except UnsupportedOperationError as e:
                self._warn_once(f"grow-{remote}", "cannot grow %s to %d: %s", remote, total, e)
                self.refused[remote] = e
                continue
            except BrokerError as e:
                if kafka_error_name(e) != "INVALID_PARTITIONS":
                    log.error("could not grow %s to %d partitions: %s", remote, total, e)
                    self.refused[remote] = e
                continue
            self.refused.pop(remote, None)
            log.info("grew remote topic %s to %d partitions", remote, total)
            result.grown[remote] = total
        return result


def refusal_error(
    label: str,
    where_target: str,
    source_counts: Mapping[str, int],
    target_counts: Mapping[str, int],
    remote_name: Callable[[str], str],
    refused: Mapping[str, BrokerError],
) -> RemoteTopicError | None:
    """The error for source topics whose remote topic the target refused (terminally) to create
    or to grow: their partitions past the remote count have no partition of the same number to
    be copied to. MM2's task fails on them too. None while every short remote topic may still
    appear (no refusal yet, or a transient one)."""
    refusals = []
    for topic, want in sorted(source_counts.items()):
        remote = remote_name(topic)
        have = target_counts.get(remote, 0)
        err = refused.get(remote)
        if have >= want or err is None or err.transient:
            continue
        verb = f"creating {remote}" if have == 0 else f"growing {remote} from {have}"
        refusals.append(f"{topic} has {want} partitions; {verb} was refused: {err}")
    if not refusals:
        return None
    return RemoteTopicError(
        f"{label}: {where_target} has no partition of the same number for some source "
        f"partitions: {'; '.join(refusals)}. Create or grow each remote topic to its source "
        "topic's partition count on the target (kafka-topics.sh --alter --partitions N), or "
        "leave the topic out with topics.exclude"
    )
