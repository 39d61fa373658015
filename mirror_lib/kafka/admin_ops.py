"""The admin operations mirror_lib needs, as an interface over plain dataclasses.

:class:`AdminOps` is what topic, config and ACL sync plan against;
:class:`mirror_lib.kafka.admin.KafkaAdminOps` implements it over confluent-kafka, and the unit
tests' fake (:mod:`tests.helpers.fake_admin`) in memory. Broker failures are
:class:`BrokerError` subclasses tagged with the Kafka error name (see :func:`kafka_error_name`).
No confluent-kafka here.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from mirror_lib.errors import BrokerError, UnsupportedOperationError

log = logging.getLogger(__name__)


# fmt: off
#: Apache Kafka 4.x topic-level defaults. Used only for brokers that list explicit configs only
#: (tansu): missing properties are reported as DEFAULT_CONFIG entries with these values.
KAFKA_TOPIC_DEFAULTS: dict[str, str] = {
    "cleanup.policy": "delete", "compression.type": "producer", "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000", "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807", "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096", "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807", "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0", "min.insync.replicas": "1", "preallocate": "false",
    "remote.storage.enable": "false", "retention.bytes": "-1", "retention.ms": "604800000",
    "segment.bytes": "1073741824", "segment.index.bytes": "10485760", "segment.jitter.ms": "0",
    "segment.ms": "604800000", "unclean.leader.election.enable": "false",
}
UNSUPPORTED_ERRORS = frozenset({
    "UNSUPPORTED_VERSION", "INVALID_REQUEST", "_UNSUPPORTED_FEATURE", "_NOT_IMPLEMENTED",
})
# As MM2 (docs/mm2-reference.md#creating-internal-topics): when creating an internal topic, these
# errors mean "assume the topic exists".
ASSUME_EXISTS = UNSUPPORTED_ERRORS | {
    "TOPIC_ALREADY_EXISTS", "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
}
# fmt: on


class SecurityDisabledError(UnsupportedOperationError):
    """The cluster has no authorizer: ACLs cannot be described or created."""


@dataclass(frozen=True)
class ConfigEntry:
    """One described topic config property."""

    name: str
    value: str | None
    is_default: bool = False
    is_read_only: bool = False
    is_sensitive: bool = False
    source: str = "DYNAMIC_TOPIC_CONFIG"


@dataclass(frozen=True)
class ConfigOp:
    """One incremental config change: SET name=value, or DELETE name (revert to default)."""

    name: str
    value: str | None
    op: Literal["SET", "DELETE"] = "SET"

    def __post_init__(self) -> None:
        if self.op not in ("SET", "DELETE") or (self.op == "SET" and self.value is None):
            raise ValueError(f"invalid ConfigOp {self!r}: SET needs a value, op is SET|DELETE")


@dataclass(frozen=True)
class NewTopicSpec:
    """A topic to create; replication_factor -1 means the broker default."""

    name: str
    partitions: int
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CreateOutcome:
    """Result of creating one topic: created, already existed, or failed (with the error)."""

    topic: str
    status: Literal["created", "exists", "failed"]
    error: BrokerError | None = None

    @property
    def ok(self) -> bool:
        return self.status != "failed"


@dataclass(frozen=True)
class AclBinding:
    """A topic ACL binding; enum-like fields are upper-case Kafka names ("LITERAL", "ALLOW")."""

    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str
    resource_type: str = "TOPIC"


@dataclass(frozen=True)
class ClusterInfo:
    """Cluster id, controller and broker (node) ids."""

    cluster_id: str | None
    controller_id: int | None
    broker_ids: tuple[int, ...]


def kafka_error_name(exc: BaseException) -> str | None:
    """The Kafka error name (e.g. ``"INVALID_PARTITIONS"``) an admin error was mapped from."""
    return getattr(exc, "kafka_error", None)


#: How Apache Kafka (2.8 to 4.x alike) refuses a topic config of another release, in
#: CreateTopics and IncrementalAlterConfigs: INVALID_CONFIG with this message.
_UNKNOWN_TOPIC_CONFIG = re.compile(r"Unknown topic config name: ([\w.\-]+)")


def unknown_topic_config(exc: BaseException | None) -> str | None:
    """The topic config that a broker refused because its release has no such setting (one new
    in a later release, or one an earlier release had), else None."""
    if exc is None or kafka_error_name(exc) != "INVALID_CONFIG":
        return None
    match = _UNKNOWN_TOPIC_CONFIG.search(str(exc))
    return match.group(1) if match else None


def unknown_config_error(name: str) -> BrokerError:
    """The error of a broker that does not know topic config ``name`` (as Kafka words it)."""
    return broker_error(f"INVALID_CONFIG: Unknown topic config name: {name}", "INVALID_CONFIG")


def broker_error(message: str, name: str | None, *, transient: bool = False) -> BrokerError:
    """Build the mirror_lib error for Kafka error ``name`` (also used by the fake)."""
    cls: type[BrokerError] = BrokerError
    if name == "SECURITY_DISABLED":
        cls = SecurityDisabledError
    elif name in UNSUPPORTED_ERRORS:
        cls = UnsupportedOperationError
    exc = cls(message, transient=transient)
    exc.kafka_error = name  # type: ignore[attr-defined]
    return exc


class AdminOps(ABC):
    """The admin operations mirror_lib needs, over plain dataclasses."""

    @abstractmethod
    def list_topics(self) -> dict[str, int]:
        """All topics (internal ones included) with their partition counts."""

    @abstractmethod
    def describe_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
        """Config entries per topic; topics that do not exist are left out."""

    @abstractmethod
    def create_topics(self, specs: list[NewTopicSpec]) -> dict[str, CreateOutcome]:
        """Create topics; an existing topic is outcome "exists", other errors "failed"."""

    @abstractmethod
    def create_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions (raises INVALID_PARTITIONS if not larger)."""

    @abstractmethod
    def incremental_alter_configs(self, topic: str, ops: list[ConfigOp]) -> None:
        """Apply SET/DELETE operations to one topic's configs."""

    @abstractmethod
    def describe_topic_acls(self) -> list[AclBinding]:
        """All TOPIC ACL bindings (any pattern); SecurityDisabledError without an authorizer."""

    @abstractmethod
    def create_acls(self, bindings: list[AclBinding]) -> dict[AclBinding, BrokerError | None]:
        """Create ACL bindings; returns the error (or None) per binding."""

    @abstractmethod
    def delete_acls(self, bindings: list[AclBinding]) -> dict[AclBinding, BrokerError | None]:
        """Delete exactly these ACL bindings (one that is not there is no error); returns the
        error (or None) per binding."""

    @abstractmethod
    def describe_cluster(self) -> ClusterInfo: ...

    def create_compacted_topic(
        self, name: str, replication_factor: int = -1, *, fit_to_cluster: bool = False
    ) -> CreateOutcome:
        """Create an MM2 internal topic (1 partition, cleanup.policy=compact), idempotently.

        Like MM2: an existing topic, a broker without CreateTopics, and authorization
        failures count as "exists". If the cluster has fewer brokers than ``replication_factor``
        this raises a non-transient BrokerError naming the problem, unless ``fit_to_cluster``
        is true: then it retries with the broker count and logs a warning. -1 = broker default.
        """
        spec = NewTopicSpec(name, 1, replication_factor, {"cleanup.policy": "compact"})
        outcome = self.create_topics([spec])[name]
        if outcome.status == "failed" and outcome.error is not None:
            err = outcome.error
            code = kafka_error_name(err)
            if code in ASSUME_EXISTS:
                log.info("assuming internal topic %s exists (%s)", name, code)
                return CreateOutcome(name, "exists", err)
            if code == "INVALID_REPLICATION_FACTOR" and replication_factor > 0:
                brokers = len(self.describe_cluster().broker_ids)
                if not fit_to_cluster or not 0 < brokers < replication_factor:
                    raise broker_error(
                        f"cannot create internal topic {name}: replication factor "
                        f"{replication_factor} but the cluster has {brokers} live broker(s); set "
                        "the *.replication.factor setting to <= the broker count or -1",
                        code,
                    ) from err
                log.warning(
                    "internal topic %s: replication factor %d > %d brokers; using %d",
                    name,
                    replication_factor,
                    brokers,
                    brokers,
                )
                return self.create_compacted_topic(name, brokers)
            raise err
        return outcome


def default_entry(name: str, value: str) -> ConfigEntry:
    """A property the broker did not list: its Kafka default."""
    return ConfigEntry(name, value, is_default=True, source="DEFAULT_CONFIG")
