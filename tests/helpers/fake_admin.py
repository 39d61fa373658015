"""An in-memory :class:`~mirror_lib.kafka.admin_ops.AdminOps` that records every call: the fake
of the unit tests of topic/config/ACL sync (pure planning over the admin port). Tests only.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.admin_ops import (
    KAFKA_TOPIC_DEFAULTS,
    AclBinding,
    AdminOps,
    ClusterInfo,
    ConfigEntry,
    ConfigOp,
    CreateOutcome,
    NewTopicSpec,
    broker_error,
    default_entry,
    unknown_config_error,
)


class RecordingAdminOps(AdminOps):
    """In-memory fake: keeps topics/configs/ACLs and records every call as (method, args).

    Switches: ``unsupported`` (method names raising UnsupportedOperationError),
    ``security_disabled`` (ACL calls raise SecurityDisabledError), ``failures`` (method name →
    error to raise once). ``default_configs`` are the entries a topic reports when it has no
    override; tests may add e.g. STATIC_BROKER_CONFIG or read-only entries there.
    ``unknown_configs``: topic configs this broker's release does not have; creating a topic with
    one, or SETting one, is refused as Kafka refuses it (INVALID_CONFIG), DELETE is accepted.
    """

    def __init__(self, topics: Mapping[str, int] | None = None, *, brokers: int = 1) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.topics: dict[str, int] = dict(topics or {})
        self.overrides: dict[str, dict[str, str]] = {t: {} for t in self.topics}
        self.default_configs: dict[str, ConfigEntry] = {
            k: default_entry(k, v) for k, v in KAFKA_TOPIC_DEFAULTS.items()
        }
        self.acls: list[AclBinding] = []
        self.cluster = ClusterInfo("recording", 0, tuple(range(brokers)))
        self.unsupported: set[str] = set()
        self.security_disabled = False
        self.failures: dict[str, BrokerError] = {}
        self.unknown_configs: set[str] = set()

    def _enter(self, method: str, *args: Any) -> None:
        self.calls.append((method, copy.deepcopy(args)))
        if method in self.unsupported:
            raise broker_error(f"{method}: not supported by this broker", "UNSUPPORTED_VERSION")
        if self.security_disabled and "acl" in method:
            raise broker_error(f"{method}: no authorizer", "SECURITY_DISABLED")
        if method in self.failures:
            raise self.failures.pop(method)

    def calls_of(self, method: str) -> list[tuple[Any, ...]]:
        return [args for m, args in self.calls if m == method]

    def add_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> None:
        """Test setup without recording a call."""
        self.topics[name] = partitions
        self.overrides[name] = dict(configs or {})

    def config_value(self, topic: str, name: str) -> str | None:
        """Effective value of a topic config (override, else default)."""
        entry = self.describe_topic_configs_unrecorded(topic).get(name)
        return entry.value if entry else None

    def describe_topic_configs_unrecorded(self, topic: str) -> dict[str, ConfigEntry]:
        out = dict(self.default_configs)
        out.update({k: ConfigEntry(k, v) for k, v in self.overrides.get(topic, {}).items()})
        return out

    def list_topics(self) -> dict[str, int]:
        self._enter("list_topics")
        return dict(self.topics)

    def describe_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
        names = list(topics)
        self._enter("describe_topic_configs", names)
        return {t: self.describe_topic_configs_unrecorded(t) for t in names if t in self.topics}

    def create_topics(self, specs: list[NewTopicSpec]) -> dict[str, CreateOutcome]:
        self._enter("create_topics", list(specs))
        out: dict[str, CreateOutcome] = {}
        for s in specs:
            if s.name in self.topics:
                err = broker_error(f"topic {s.name} exists", "TOPIC_ALREADY_EXISTS")
                out[s.name] = CreateOutcome(s.name, "exists", err)
            elif unknown := sorted(self.unknown_configs & set(s.configs)):
                out[s.name] = CreateOutcome(s.name, "failed", unknown_config_error(unknown[0]))
            elif s.replication_factor > len(self.cluster.broker_ids):
                err = broker_error(
                    f"replication factor {s.replication_factor} too large",
                    "INVALID_REPLICATION_FACTOR",
                )
                out[s.name] = CreateOutcome(s.name, "failed", err)
            else:
                self.add_topic(s.name, s.partitions, s.configs)
                out[s.name] = CreateOutcome(s.name, "created")
        return out

    def create_partitions(self, topic: str, total: int) -> None:
        self._enter("create_partitions", topic, total)
        if topic not in self.topics:
            raise broker_error(f"unknown topic {topic}", "UNKNOWN_TOPIC_OR_PART")
        if total <= self.topics[topic]:
            raise broker_error(
                f"{topic} already has {self.topics[topic]} partitions", "INVALID_PARTITIONS"
            )
        self.topics[topic] = total

    def incremental_alter_configs(self, topic: str, ops: list[ConfigOp]) -> None:
        self._enter("incremental_alter_configs", topic, list(ops))
        if topic not in self.topics:
            raise broker_error(f"unknown topic {topic}", "UNKNOWN_TOPIC_OR_PART")
        for o in ops:
            if o.op == "SET" and o.name in self.unknown_configs:
                raise unknown_config_error(o.name)
        for o in ops:
            if o.op == "SET":
                self.overrides[topic][o.name] = str(o.value)
            else:
                self.overrides[topic].pop(o.name, None)

    def describe_topic_acls(self) -> list[AclBinding]:
        self._enter("describe_topic_acls")
        return [b for b in self.acls if b.resource_type == "TOPIC"]

    def create_acls(self, bindings: list[AclBinding]) -> dict[AclBinding, BrokerError | None]:
        self._enter("create_acls", list(bindings))
        for b in bindings:
            if b not in self.acls:
                self.acls.append(b)
        return {b: None for b in bindings}

    def delete_acls(self, bindings: list[AclBinding]) -> dict[AclBinding, BrokerError | None]:
        self._enter("delete_acls", list(bindings))
        self.acls = [b for b in self.acls if b not in bindings]
        return {b: None for b in bindings}

    def describe_cluster(self) -> ClusterInfo:
        self._enter("describe_cluster")
        return self.cluster
