"""Everything one flow ``A->B`` needs at run time, rebuilt from plain strings on any process.

Spark ships data source options as strings to the driver-side runners and the executors, so a
:class:`FlowContext` is serialised as the raw properties plus the flow name and re-validated
wherever it is used. Secrets stay references until :meth:`FlowContext.client` builds a client.
"""

from __future__ import annotations

import contextlib
import json
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirror_lib.config.describe import internal_topics
from mirror_lib.config.model import ClusterConfig, FlowConfig, MirrorConfig
from mirror_lib.config.parse import parse_config, resolved_flow_properties
from mirror_lib.config.properties import has_reference, is_sensitive
from mirror_lib.config.settings import FlowSettings
from mirror_lib.errors import BrokerError, ConfigError
from mirror_lib.kafka.clients import (
    client_config,
    idempotence_off,
    librdkafka_logger,
    producer_defaults,
)
from mirror_lib.mm2.filters import GroupFilter, TopicFilter, should_replicate_topic
from mirror_lib.mm2.policy import ReplicationPolicy, is_cycle

if TYPE_CHECKING:  # confluent-kafka is imported when a client is built
    from mirror_lib.kafka.admin import KafkaAdminOps, NamedAdminClient

#: Option carrying secret values resolved on the driver; Spark redacts options named like this.
SECRET_OPTION = "secret.properties"
#: Filter answers a context remembers (topics and groups); past it they are worked out again.
ANSWERS_KEPT = 100_000


def flow_dir(config: MirrorConfig, flow_name: str) -> Path:
    """State folder of one flow under ``mirror.state.dir``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", flow_name.replace("->", "_to_"))
    return Path(config.state_dir) / "flows" / safe


def stable_slot(topic: str, partition: int, slots: int) -> int:
    """The task slot owning a partition: stable across batches and restarts (like tasks.max).

    Partitions of a topic go round-robin from a per-topic offset, so they spread over all
    slots (hashing "topic+partition" with CRC32 did not: CRC32 is linear).
    """
    return (zlib.crc32(topic.encode()) + partition) % slots


@dataclass(frozen=True)
class FlowContext:
    """A validated flow plus derived names: policy, filters, internal topics, clients."""

    config: MirrorConfig
    flow: FlowConfig

    @classmethod
    def create(cls, config: MirrorConfig, flow_name: str) -> FlowContext:
        """Context of ``flow_name`` in ``config``."""
        return cls(config, config.flow(flow_name))

    @classmethod
    def from_options(cls, options: dict[str, str]) -> FlowContext:
        """Rebuild from data source options written by :meth:`to_options`."""
        props = json.loads(options["properties"])
        props.update(json.loads(options.get(SECRET_OPTION, "{}")))
        return cls.create(
            parse_config(props, origin=options.get("origin", "<options>")), options["flow"]
        )

    def to_options(self) -> dict[str, str]:
        """Spark data source options carrying this context.

        Secret references stay unresolved; secret values resolved on the driver (serverless, see
        :mod:`mirror_lib.config.databricks`) go into an option whose name Spark's redaction matches.
        """
        props = resolved_flow_properties(self.config.properties)  # the driver's environment
        values = {k: v for k, v in props.items() if is_sensitive(k) and not has_reference(v)}
        options = {
            "properties": json.dumps(
                {k: v for k, v in props.items() if k not in values}, sort_keys=True
            ),
            "flow": self.flow.name,
            "origin": self.config.origin,
        }
        if values:
            options[SECRET_OPTION] = json.dumps(values, sort_keys=True)
        return options

    @property
    def source(self) -> str:
        return self.flow.source

    @property
    def target(self) -> str:
        return self.flow.target

    @property
    def settings(self) -> FlowSettings:
        return self.flow.settings

    @cached_property
    def policy(self) -> ReplicationPolicy:
        return self.flow.policy()

    @cached_property
    def topic_filter(self) -> TopicFilter:
        s = self.settings
        return TopicFilter(s.topics, s.topics_exclude)

    @cached_property
    def group_filter(self) -> GroupFilter:
        s = self.settings
        return GroupFilter(s.groups, s.groups_exclude)

    @cached_property
    def _answers(self) -> dict[tuple[str, str], bool]:
        """The filters' answers by (kind, name): a checkpoint round asks them once per group
        and partition (5,000 groups: 100,000 regex matches, a quarter of the round)."""
        return {}

    def _remembered(self, kind: str, name: str, answer: Callable[[], bool]) -> bool:
        """The answer, worked out once; the parts of a run share its contexts across threads,
        so an answer is never read back after another thread may have cleared them."""
        answers = self._answers
        key = (kind, name)
        known = answers.get(key)
        if known is None:
            if len(answers) >= ANSWERS_KEPT:  # names that came and went: start over
                answers.clear()
            known = answers[key] = answer()
        return known

    def should_replicate(self, topic: str) -> bool:
        """MM2's shouldReplicateTopic: filter or heartbeats, not internal, no cycle."""
        return self._remembered(
            "topic",
            topic,
            lambda: (
                should_replicate_topic(
                    self.policy,
                    self.topic_filter,
                    topic,
                    self.flow.mm2_target,  # MM2's cycle rule compares with its name for the target
                    heartbeats_replication_enabled=self.settings.heartbeats_replication,
                )
                and not is_cycle(self.policy, topic, self.flow.mm2_target)
            ),
        )

    @cached_property
    def reverse(self) -> FlowContext | None:
        """The enabled flow the other way (``B->A`` of ``A->B``), if any."""
        name = f"{self.target}->{self.source}"
        flows = {f.name: f for f in self.config.enabled_flows()}
        return FlowContext(self.config, flows[name]) if name in flows else None

    def comes_back(self, topic: str) -> bool:
        """True when the reverse flow would copy ``topic``'s remote copy back into ``topic``: a
        loop, each record copied back and forth forever. Only a policy that keeps names
        (``IdentityReplicationPolicy``) allows it; the default one prefixes and detects cycles."""
        back = self.reverse
        if back is None:
            return False
        remote = self.remote_topic(topic)
        return back.should_replicate(remote) and back.remote_topic(remote) == topic

    def refuse_loops(self, topics: Iterable[str]) -> None:
        """A :class:`ConfigError` for the topics (of this flow's) that would come back."""
        loops = sorted(t for t in topics if self.comes_back(t))
        if not loops:
            return
        back = f"{self.target}->{self.source}"
        raise ConfigError(
            f"{self.flow.name}.topics",
            ", ".join(loops[:10]) + (" ..." if len(loops) > 10 else ""),
            f"topics that {back} does not copy back: with {self.settings.policy_class} both "
            "flows keep topic names, so each record would be copied back and forth forever "
            f"(MM2 has the same limit). Keep the flows' topics apart ({self.flow.name}.topics / "
            f"{back}.topics or .topics.exclude), or use DefaultReplicationPolicy, whose "
            "prefixes let each side tell a copy from the original",
        )

    def should_checkpoint_group(self, group: str) -> bool:
        """Group filter, never our own ledger groups."""
        return self._remembered(
            "group",
            group,
            lambda: (
                not group.startswith("__mirror") and self.group_filter.should_replicate_group(group)
            ),
        )

    @cached_property
    def starting_offsets(self) -> str:
        """Where a new flow starts, ``earliest`` or ``latest``: ``mirror.starting.offsets``, else
        the ``auto.offset.reset`` its source consumer gets (``A->B.consumer.*``,
        ``A->B.source.consumer.*``, ``A.consumer.*``, ``A.*``, top-level ``consumer.*``), as MM2's
        source consumer would, else ``earliest``."""
        if self.settings.starting_offsets:
            return str(self.settings.starting_offsets)
        reset = str(self.client("source", "consumer").get("auto.offset.reset", "earliest"))
        return "latest" if reset.strip().lower() in ("latest", "largest", "end") else "earliest"

    def remote_topic(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.flow.mm2_source, topic)

    @property
    def offset_syncs_on_target(self) -> bool:
        return self.settings.offset_syncs_location == "target"

    @property
    def offset_syncs_topic(self) -> str:
        return self.internal_topics["offset_syncs"]["topic"]

    @property
    def checkpoints_topic(self) -> str:
        return self.internal_topics["checkpoints"]["topic"]

    @property
    def metrics_topic(self) -> str:
        return self.internal_topics["metrics"]["topic"]

    @cached_property
    def internal_topics(self) -> dict[str, dict[str, str]]:
        """Name and cluster of each internal topic (one definition: :func:`internal_topics`)."""
        return internal_topics(self.flow)

    def where(self, side: str) -> str:
        """Names a cluster of this flow for messages: ``source cluster A (bootstrap host:port)``.

        ``side`` is "source", "target" or an alias of one of them.
        """
        alias = {"source": self.source, "target": self.target}.get(side, side)
        role = "source" if alias == self.source else "target"
        servers = self.config.cluster(alias).bootstrap_servers
        return f"{role} cluster {alias} (bootstrap {servers})"

    def admin(self, side: str) -> NamedAdminClient:
        """An AdminClient on ``side`` whose failures name the cluster and this flow
        (:mod:`mirror_lib.kafka.lookups` reads its ``mirror_where``)."""
        from mirror_lib.kafka.admin import admin_client  # lazy: confluent-kafka

        return admin_client(self.client(side, "admin"), f"{self.where(side)} for {self.label}")

    def admin_ops(self, side: str, timeout_s: float | None = None) -> KafkaAdminOps:
        """:class:`~mirror_lib.kafka.admin.KafkaAdminOps` on ``side``; each call may take
        ``admin.timeout.ms`` unless ``timeout_s`` says otherwise."""
        from mirror_lib.kafka.admin import KafkaAdminOps  # lazy: confluent-kafka

        if timeout_s is None:
            timeout_s = self.settings.admin_timeout_ms / 1000
        return KafkaAdminOps(self.client(side, "admin"), timeout_s=timeout_s)

    @property
    def label(self) -> str:
        """What this flow is to the user: ``flow A->B``, or the heartbeats MM2 emits for every
        cluster pair when the user did not enable the pair."""
        name = self.flow.name
        if self.flow.enabled:
            return f"flow {name}"
        return (
            f"heartbeats {name}, emitted for every cluster pair as MM2 does; turn off with "
            f"`{name}.emit.heartbeats.enabled = false`"
        )

    def ledger_group(self, slot: int) -> str:
        """Target-side group whose committed offsets record the next upstream offset
        (docs/design.md#d3-exactly-once).

        One group per slot: only the slot's own (fenced) transaction can leave its offsets
        pending, so reading the ledger never waits on another slot.
        """
        return f"__mirror_ledger.{self.flow.name}.{slot}"

    @property
    def reader_group(self) -> str:
        """The group id of the flow's readers (source records, internal topics on the target);
        it never commits, but a cluster with an authorizer checks READ on it."""
        return f"__mirror_reader.{self.flow.name}"

    def transactional_id(self, slot: int) -> str:
        return f"mirror-{self.flow.name}-{slot}"

    def _cluster_overrides(
        self, cluster: str, role: str
    ) -> tuple[ClusterConfig, dict[str, tuple[str, str]] | None]:
        """(ClusterConfig, this flow's overrides of ``role`` there) for ``cluster``
        ("source"/"target" or an alias)."""
        alias = {"source": self.source, "target": self.target}.get(cluster, cluster)
        side = "source" if alias == self.source else "target" if alias == self.target else ""
        return self.config.cluster(alias), self.flow.overrides(side, role) if side else None

    def idempotent(self, cluster: str) -> bool:
        """Whether producers to ``cluster`` are idempotent (the user may turn that off for a
        service without idempotent producers, with ``mirror.delivery = at_least_once``)."""
        return idempotence_off(*self._cluster_overrides(cluster, "producer")) is None

    def producer(
        self, cluster: str, defaults: dict[str, Any] | None = None, /, **extra: Any
    ) -> dict[str, Any]:
        """librdkafka config of a producer on ``cluster``: :meth:`client` with our producer
        defaults (:func:`~mirror_lib.kafka.clients.producer_defaults`: idempotent, unless the
        user turned it off) under ``defaults``."""
        ours = producer_defaults(*self._cluster_overrides(cluster, "producer"))
        return self.client(cluster, "producer", {**ours, **(defaults or {})}, **extra)

    def client(
        self, cluster: str, role: str, defaults: dict[str, Any] | None = None, /, **extra: Any
    ) -> dict[str, Any]:
        """librdkafka config for ``role`` on ``cluster`` ("source"/"target" or an alias).

        ``defaults`` yield to the user's settings (with the flow's ``A->B.consumer.*`` etc.);
        ``extra`` overrides them. librdkafka's own lines go to :func:`librdkafka_logger`, also in
        Spark's workers, where no ``mirror --verbose`` routes them: the engine reports what
        they mean in its own words.
        """
        cluster_config, overrides = self._cluster_overrides(cluster, role)
        alias = cluster_config.alias
        conf = client_config(
            cluster_config,
            role,
            # The side and alias let lower layers name the cluster in errors (admin.where_from).
            client_id=f"mirror|{self.flow.name}|{'source' if alias == self.source else 'target'}"
            f"={alias}|{role}",
            defaults=defaults,
            extra=extra,
            overrides=overrides,
        )
        if "debug" not in conf:  # asked for: stays on stderr
            conf.setdefault("logger", librdkafka_logger())
        return conf


class PlainProducer:
    """A producer of internal records (heartbeat-like events, source-side offset syncs) to
    partition 0 of topics on one side, outside any transaction; idempotent unless the user
    turned that off for the cluster.

    A writer keeps one for its whole slice: a producer made per commit cost a connection and an
    InitProducerId on the source cluster for every transaction.
    """

    def __init__(self, ctx: FlowContext, side: str) -> None:
        from confluent_kafka import Producer  # lazy: optional extra "kafka"

        self.ctx, self.side = ctx, side
        self.producer = Producer(ctx.producer(side))
        self.failed: list[str] = []
        self.topics: set[str] = set()  # named when records are not acknowledged

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(f"{msg.topic()}: {err.str()}")

    def write(
        self, topic: str, records: Iterable[tuple[bytes, bytes]], *, timestamp: int = 0
    ) -> None:
        """Queue records; delivery is confirmed by :meth:`check` or :meth:`finish`."""
        self.topics.add(topic)
        for key, value in records:
            self.producer.produce(
                topic, value, key, partition=0, on_delivery=self._report, timestamp=timestamp
            )
        self.producer.poll(0)

    def check(self) -> None:
        """Raise (transient) if a record written earlier was not delivered."""
        self.producer.poll(0)
        if self.failed:
            raise BrokerError(
                f"writing to {self.ctx.where(self.side)} for {self.ctx.label} failed: "
                f"{self.failed[0]}",
                transient=True,
            )

    def finish(self, timeout_s: float = 30) -> None:
        """Wait until every record written is acknowledged; raise (transient) if not."""
        if self.producer.flush(timeout_s) > 0:
            raise BrokerError(
                f"writing to {', '.join(sorted(self.topics))} on {self.ctx.where(self.side)} "
                f"for {self.ctx.label}: records not acknowledged in {timeout_s:g}s",
                transient=True,
            )
        self.check()

    def close(self, timeout_s: float = 0) -> None:
        """Give queued records up to ``timeout_s`` to go out; never raises."""
        with contextlib.suppress(Exception):  # closing after a failure must not hide it
            self.producer.flush(timeout_s)

    def drop(self) -> None:
        """Give up what is still queued (after a failure), so that the client can go: queued
        records keep it, and its threads reconnecting, alive. Never raises."""
        with contextlib.suppress(Exception):
            self.producer.purge()
            self.producer.flush(0)


def produce_plain(
    ctx: FlowContext,
    side: str,
    topic: str,
    records: Iterable[tuple[bytes, bytes]],
    *,
    timestamp: int = 0,
    timeout_s: float = 30,
) -> None:
    """Write (key, value) records to partition 0 of ``topic`` outside any transaction, and wait
    until all are acknowledged (internal records written once: planner events)."""
    out = PlainProducer(ctx, side)
    try:
        out.write(topic, records, timestamp=timestamp)
        out.finish(timeout_s)
    except BaseException:
        out.drop()
        raise
