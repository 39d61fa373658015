"""MM2's ``MirrorClient`` / ``RemoteClusterUtils`` for one cluster
(docs/mm2-reference.md#mirrorclient).

Reads only: topic listing, heartbeat and checkpoint topics. Readers use a throwaway ``group.id``,
assign partitions directly and never commit. Records that cannot be decoded are skipped and
counted in :attr:`MirrorClient.skipped_records`, as MM2 skips records failing with
``SchemaException``. Works against topics written by a real MM2 (same bytes).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaException

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import BrokerError, DecodeError
from mirror_lib.kafka.clients import client_config
from mirror_lib.kafka.reader import read_topic
from mirror_lib.mm2 import policy as pol
from mirror_lib.mm2.formats import TP as TopicPartition  # its name in MM2's MirrorClient
from mirror_lib.mm2.formats import Checkpoint, Heartbeat
from mirror_lib.mm2.policy import DefaultReplicationPolicy, ReplicationPolicy

__all__ = ["MirrorClient", "TopicPartition"]

#: Broker-internal topics that Java's ``Admin.listTopics()`` leaves out by default.
_BROKER_INTERNAL = frozenset({"__consumer_offsets", "__transaction_state"})


class MirrorClient:
    """Answers MM2 client questions about one cluster: heartbeats, remote topics, checkpoints.

    ``conf`` is a librdkafka consumer config for the cluster (at least ``bootstrap.servers``);
    ``policy`` must be the replication policy the flows use. ``timeout_s`` bounds each broker
    call (listing, and each fetch while reading a topic to its end).
    """

    def __init__(self, conf: dict[str, Any], policy: ReplicationPolicy, *, timeout_s: float = 30):
        self.conf = dict(conf)
        self.policy = policy
        self.timeout_s = timeout_s
        #: Undecodable checkpoint/heartbeat records skipped so far (cumulative over all calls).
        self.skipped_records = 0

    @classmethod
    def from_config(
        cls, config: MirrorConfig, alias: str, policy: ReplicationPolicy | None = None
    ) -> MirrorClient:
        """Client for cluster ``alias`` of ``config`` (``MirrorMakerConfig.clientConfig``).

        Without ``policy``, uses the policy of the first flow targeting ``alias`` (enabled flows
        first), else of the first flow leaving it, else ``DefaultReplicationPolicy()``.
        """
        cluster = config.cluster(alias)
        if policy is None:
            flows = sorted(config.flows, key=lambda f: not f.enabled)  # stable: keeps order
            chosen = next((f for f in flows if f.target == alias), None) or next(
                (f for f in flows if f.source == alias), None
            )
            policy = chosen.policy() if chosen is not None else DefaultReplicationPolicy()
        return cls(client_config(cluster, "consumer"), policy)

    def __repr__(self) -> str:
        servers = self.conf.get("bootstrap.servers")
        return f"MirrorClient({servers!r}, {self.policy!r})"

    # --- topic-name questions ------------------------------------------------------------------

    def _reader_conf(self) -> dict[str, Any]:
        """Consumer config with a unique throwaway group that is never joined nor committed."""
        return {
            **self.conf,
            "group.id": f"__mirror_client.{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "allow.auto.create.topics": False,
        }

    def topics(self) -> list[str]:
        """All topic names on the cluster, sorted (broker-internal ones left out)."""
        consumer = Consumer(self._reader_conf())
        try:
            meta = consumer.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            servers = self.conf.get("bootstrap.servers")
            raise BrokerError(f"listing topics on {servers} failed: {exc}", transient=True) from exc
        finally:
            consumer.close()
        return sorted(t for t in meta.topics if t not in _BROKER_INTERNAL)

    def heartbeat_topics(self) -> set[str]:
        """``heartbeats`` and its remote copies (``A.heartbeats``, ``B.A.heartbeats``, ...)."""
        return pol.heartbeat_topics(self.policy, self.topics())

    def checkpoint_topics(self) -> set[str]:
        """Every checkpoints topic (``A.checkpoints.internal``, ...)."""
        return pol.checkpoint_topics(self.policy, self.topics())

    def upstream_clusters(self) -> set[str]:
        """Aliases on the source chains of all heartbeat topics (``B.A.heartbeats`` -> {B, A})."""
        return pol.upstream_clusters(self.policy, self.topics())

    def replication_hops(self, alias: str) -> int:
        """Fewest hops from cluster ``alias`` to this one by heartbeat topics; -1 if unreachable."""
        return pol.replication_hops(self.policy, self.topics(), alias)

    def remote_topics(self, source: str | None = None) -> set[str]:
        """Non-internal replicated topics; only those whose immediate source is ``source``."""
        return pol.remote_topics(self.policy, self.topics(), source)

    # --- record-reading questions --------------------------------------------------------------

    def _records(self, topic: str, timeout_s: float | None) -> Iterator[Any]:
        """Committed records of ``topic`` from the beginning to the end; none if it is missing.

        Like MM2, polls until every partition reaches its end; unlike MM2, running out of
        ``timeout_s`` raises a transient :class:`BrokerError` instead of a partial answer.
        """
        timeout = self.timeout_s if timeout_s is None else timeout_s
        return read_topic(self._reader_conf(), topic, timeout)

    def _checkpoints(self, remote_alias: str, timeout_s: float | None) -> Iterator[Checkpoint]:
        """Decoded checkpoints of ``checkpointsTopic(remote_alias)`` in log order."""
        for msg in self._records(self.policy.checkpoints_topic(remote_alias), timeout_s):
            try:
                yield Checkpoint.decode(msg.key(), msg.value())
            except DecodeError:
                self.skipped_records += 1

    def remote_consumer_offsets(
        self, group: str, remote_alias: str, timeout_s: float | None = None
    ) -> dict[TopicPartition, int]:
        """Latest translated offset per local (topic, partition) of ``group`` from ``remote_alias``.

        Reads ``policy.checkpoints_topic(remote_alias)`` on this cluster to its end; a later
        checkpoint overwrites an earlier one. Empty if the topic does not exist.
        """
        checkpoints = self.remote_checkpoints(group, remote_alias, timeout_s)
        return {tp: cp.downstream_offset for tp, cp in checkpoints.items()}

    def remote_checkpoints(
        self, group: str, remote_alias: str, timeout_s: float | None = None
    ) -> dict[TopicPartition, Checkpoint]:
        """:meth:`remote_consumer_offsets` as whole checkpoints: with the upstream offset and
        the commit's metadata (MM2's ``remoteConsumerOffsets`` gives offset and metadata)."""
        return self._latest(remote_alias, timeout_s, {group}).get(group, {})

    def translate_offsets(
        self, remote_alias: str, group: str, timeout_s: float | None = None
    ) -> dict[TopicPartition, int]:
        """``RemoteClusterUtils.translateOffsets(props, remoteAlias, group, timeout)``."""
        return self.remote_consumer_offsets(group, remote_alias, timeout_s)

    def consumer_offsets_all_groups(
        self,
        remote_alias: str,
        timeout_s: float | None = None,
        groups: Iterable[str] | None = None,
    ) -> dict[str, dict[TopicPartition, int]]:
        """{group: {(topic, partition): offset}} for every (or each of ``groups``), one scan.

        Like KIP-1239's batch ``translateOffsets``: latest checkpoint per group and partition.
        """
        latest = self._latest(remote_alias, timeout_s, None if groups is None else set(groups))
        return {
            group: {tp: cp.downstream_offset for tp, cp in cps.items()}
            for group, cps in latest.items()
        }

    def _latest(
        self, remote_alias: str, timeout_s: float | None, groups: set[str] | None
    ) -> dict[str, dict[TopicPartition, Checkpoint]]:
        """The latest checkpoint per group (every one, or ``groups``) and partition."""
        out: dict[str, dict[TopicPartition, Checkpoint]] = {}
        for cp in self._checkpoints(remote_alias, timeout_s):
            if groups is None or cp.group in groups:
                out.setdefault(cp.group, {})[(cp.topic, cp.partition)] = cp
        return out

    def latest_heartbeats(
        self, topics: Iterable[str] | None = None, timeout_s: float | None = None
    ) -> dict[tuple[str, str], int]:
        """Newest heartbeat timestamp (epoch ms) per (source, target) over all heartbeat topics.

        ``topics`` limits the scan to those topics (default: :meth:`heartbeat_topics`). The age
        of a flow's heartbeat is ``now_ms - result[(source, target)]``.
        """
        names = self.heartbeat_topics() if topics is None else set(topics)
        latest: dict[tuple[str, str], int] = {}
        for topic in sorted(names):
            for msg in self._records(topic, timeout_s):
                try:
                    hb = Heartbeat.decode(msg.key(), msg.value())
                except DecodeError:
                    self.skipped_records += 1
                    continue
                key = (hb.source_cluster_alias, hb.target_cluster_alias)
                latest[key] = max(latest.get(key, hb.timestamp_ms), hb.timestamp_ms)
        return latest
