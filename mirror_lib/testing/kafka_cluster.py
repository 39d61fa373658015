"""Apache Kafka clusters as people run them: several brokers, replication factor 3,
``min.insync.replicas = 2``, and faults to inject (docs/testing.md#production-shapes).

A :class:`KafkaCluster` is N KRaft nodes, each its own JVM with its own log directory, on free
loopback ports: brokers, and either dedicated controllers or nodes that are both (``combined``).
Every topic the cluster creates gets replication factor 3 (fewer brokers: all of them) and
``min.insync.replicas = 2``, internal topics included. Any node can be stopped (SIGTERM, a
controlled shutdown), killed (SIGKILL, a crash) and started again on its data; the cluster
answers which broker leads a partition, hosts a transaction coordinator or is the active
controller, and waits until every replica is back in sync (what an operator waits for between
two brokers of a rolling restart).

With ``links=True`` every path between two nodes, and between clients and each broker, goes
through a :class:`~mirror_lib.testing.links.Link`, so :meth:`KafkaCluster.cut` isolates a broker
as a network partition would: its clients, the followers that fetch from it, the leaders it
fetches from and its controllers all lose it. Followers reach a leader on a listener named for
the follower (``REPL<id>``, each broker's ``inter.broker.listener.name``), which is what gives
each direction of each pair a link of its own. Tests' own clients use
:attr:`KafkaCluster.bootstrap_servers` (direct, never cut); the flow under test uses
:attr:`KafkaCluster.client_bootstrap` (through the links).

The jars come from :mod:`mirror_lib.testing.kafka_jars`; the JVMs run as
:mod:`mirror_lib.testing.kafka_broker` runs its single-node clusters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import struct
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, ClusterMetadata

from mirror_lib.errors import EmbeddedBrokerError
from mirror_lib.kafka.admin import admin_client
from mirror_lib.testing import kafka_jars, processes
from mirror_lib.testing.kafka_broker import new_cluster_id
from mirror_lib.testing.kafka_nodes import (
    COMBINED,
    PRODUCTION,
    TXN_PARTITIONS,
    ClusterShape,
    KafkaNode,
    format_node,
    layout,
    node_settings,
)
from mirror_lib.testing.links import BLACKHOLE, LinkHub

METADATA_TOPIC = "__cluster_metadata"


@dataclasses.dataclass
class KafkaCluster:
    """A multi-node KRaft cluster; see the module docstring."""

    alias: str
    workdir: Path
    cluster_id: str
    shape: ClusterShape
    nodes: list[KafkaNode]
    hub: LinkHub | None = None
    client_ports: dict[int, int] = dataclasses.field(default_factory=dict)  # broker -> link

    # -- addresses ----------------------------------------------------------------------------
    @property
    def brokers(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.is_broker]

    @property
    def controllers(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.is_controller]

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's PLAINTEXT listener: direct, for the tests' own clients."""
        return ",".join(f"127.0.0.1:{b.direct_port}" for b in self.brokers)

    @property
    def client_bootstrap(self) -> str:
        """The listener for the flow under test: through the links when the cluster has them
        (so :meth:`cut` reaches the flow), else :attr:`bootstrap_servers`."""
        if not self.client_ports:
            return self.bootstrap_servers
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports.values())

    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"cluster {self.alias!r} has no node {node_id}")

    # -- start and stop -----------------------------------------------------------------------
    def start(self, ready_timeout_s: float = 120) -> None:
        """Start every node that is not running; wait until every broker is registered."""
        for n in self.nodes:
            n.launch()
        self.wait_brokers(ready_timeout_s)

    def stop(self, timeout_s: float = 30) -> None:
        """Stop every node (brokers first, SIGTERM then SIGKILL) and close the links."""
        ordered = self.brokers + [n for n in self.nodes if not n.is_broker]
        live = [n.process for n in ordered if n.process is not None and n.owner_pid == os.getpid()]
        processes.stop(live, timeout_s)
        if self.hub is not None:
            self.hub.close()
            self.hub = None

    def start_node(self, node_id: int, ready_timeout_s: float = 120) -> None:
        """Start one node again on its data; a broker is ready once it is registered."""
        node = self.node(node_id)
        node.launch()
        if node.is_broker:
            self.wait_brokers(ready_timeout_s, (node_id,))
        else:
            self._wait_listening(node, "CONTROLLER", time.monotonic() + ready_timeout_s)

    def stop_node(self, node_id: int, timeout_s: float = 60) -> None:
        """SIGTERM: a broker's controlled shutdown moves its leaders away first."""
        self.node(node_id).stop(timeout_s)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL, as a crash (or a pulled power cord) would."""
        self.node(node_id).kill()

    def rolling_restart(
        self,
        *,
        down_s: float = 5.0,
        timeout_s: float = 180,
        on_stop: Callable[[KafkaNode], None] | None = None,
        on_start: Callable[[KafkaNode], None] | None = None,
    ) -> None:
        """Restart every broker in turn, as an operator patching the cluster does: stop it
        cleanly, keep it down at least ``down_s``, start it, and wait until every replica is in
        sync before the next one. ``on_stop(node)`` runs once the broker is down (its time
        counts as downtime), ``on_start(node)`` once it is back and in sync."""
        for node in self.brokers:
            self.stop_node(node.node_id)
            stopped = time.monotonic()
            if on_stop is not None:
                on_stop(node)
            time.sleep(max(0.0, down_s - (time.monotonic() - stopped)))  # the patch itself
            self.start_node(node.node_id, timeout_s)
            self.wait_in_sync(timeout_s)
            if on_start is not None:
                on_start(node)

    # -- faults on the network ----------------------------------------------------------------
    def cut(self, node_id: int, mode: str = BLACKHOLE) -> None:
        """Isolate a broker: every link to or from it stops (see the module docstring)."""
        if self.hub is None:
            raise EmbeddedBrokerError(f"cluster {self.alias!r} has no links: start it with links")
        self.hub.cut(self.node(node_id).name, mode)

    def mend(self, node_id: int) -> None:
        """End :meth:`cut`: the broker's links open again."""
        if self.hub is not None:
            self.hub.mend(self.node(node_id).name)

    def heal(self, timeout_s: float = 180) -> None:
        """Undo whatever a fault left: every link open, every node running, every broker
        registered and every replica in sync (a test after a fault starts on a whole cluster)."""
        for node in self.nodes:
            self.mend(node.node_id)
        for node in self.nodes:
            if not node.is_running():
                self.start_node(node.node_id, timeout_s)
        self.wait_brokers(timeout_s)
        self.wait_in_sync(timeout_s)

    # -- what the cluster says about itself ---------------------------------------------------
    def admin(self, links: bool = False, without: int | None = None) -> AdminClient:
        """An admin client on the direct listeners, or (``links``) on :attr:`client_bootstrap`;
        ``without``: not bootstrapped from that broker (one cut off still answers on its direct
        listener, with the metadata it had when it was cut)."""
        bootstrap = self.client_bootstrap if links else self.bootstrap_servers
        if without is not None:
            port = self.client_ports.get(without) if links else None
            cut = f"127.0.0.1:{port or self.node(without).direct_port}"
            bootstrap = ",".join(b for b in bootstrap.split(",") if b != cut)
        return admin_client({"bootstrap.servers": bootstrap, "log_level": 0})

    def metadata(
        self,
        topic: str | None = None,
        timeout_s: float = 10,
        links: bool = False,
        without: int | None = None,
    ) -> ClusterMetadata:
        """The cluster's metadata as a broker other than ``without`` answers it."""
        return self.admin(links, without).list_topics(topic, timeout=timeout_s)

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition -> the id of the broker that leads it (-1: none now)."""
        meta = self.metadata(topic).topics[topic]
        if meta.error is not None:
            raise EmbeddedBrokerError(f"{self.alias}: {topic}: {meta.error}")
        return {p: part.leader for p, part in meta.partitions.items()}

    def busiest_leader(self, topic: str) -> int:
        """The broker that leads most partitions of ``topic`` (the lowest id on a tie)."""
        counts: dict[int, int] = {}
        for leader in self.leaders(topic).values():
            if leader >= 0:
                counts[leader] = counts.get(leader, 0) + 1
        if not counts:
            raise EmbeddedBrokerError(f"{self.alias}: {topic} has no leader now")
        return min(counts, key=lambda b: (-counts[b], b))

    def coordinator_of(self, transactional_id: str) -> int:
        """The broker that hosts the transaction coordinator of ``transactional_id``: the leader
        of its ``__transaction_state`` partition (Kafka's hash of the id, modulo the topic's
        partition count)."""
        partition = _java_abs(_java_hash(transactional_id)) % TXN_PARTITIONS
        return self.leaders("__transaction_state")[partition]

    def out_of_sync(self, writable: bool = False) -> list[str]:
        """Partitions whose in-sync replicas are fewer than their replicas, or without a leader
        (empty: every replica caught up). ``writable``: only those without a leader or with
        fewer in-sync replicas than ``min.insync.replicas`` (empty: every partition takes
        writes), as the flow sees them through the links (a broker cut off answers with what
        it knew before the cut)."""
        behind = []
        for name, topic in self.metadata(timeout_s=20, links=writable).topics.items():
            for p, part in topic.partitions.items():
                needed = self.shape.min_insync if writable else len(part.replicas)
                if part.leader < 0 or len(set(part.isrs) & set(part.replicas)) < needed:
                    behind.append(f"{name}[{p}] leader {part.leader} isr {sorted(part.isrs)}")
        return sorted(behind)

    def wait_in_sync(self, timeout_s: float = 180) -> None:
        """Wait until every partition has a leader and every replica is in sync."""
        deadline = time.monotonic() + timeout_s
        behind: list[str] = []
        while time.monotonic() < deadline:
            with contextlib.suppress(ck.KafkaException):
                behind = self.out_of_sync()
                if not behind:
                    return
            time.sleep(0.5)
        raise EmbeddedBrokerError(
            f"cluster {self.alias!r}: replicas still out of sync after {timeout_s:.0f}s: "
            f"{', '.join(behind[:10])}"
        )

    def live_brokers(self) -> set[int]:
        """Ids of the brokers registered and not fenced now."""
        return {b.id for b in self.metadata(timeout_s=5).brokers.values()}

    def wait_brokers(self, timeout_s: float, ids: Sequence[int] | None = None) -> None:
        """Wait until the brokers ``ids`` (default: all) are registered and not fenced."""
        want = set(ids or [b.node_id for b in self.brokers])
        deadline = time.monotonic() + timeout_s
        seen: set[int] = set()
        while True:
            for n in self.nodes:
                if n.node_id in want or n.is_controller:
                    exited = n.exit_report(f"Kafka {self.alias} {n.name} exited during start")
                    if exited is not None:
                        raise EmbeddedBrokerError(exited)
            with contextlib.suppress(ck.KafkaException):
                seen = self.live_brokers()
                if want <= seen:
                    return
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {n.name} ({n.log_path}):\n{n.log_tail(15)}"
                    for n in self.nodes
                    if n.node_id in want or n.is_controller
                )
                raise EmbeddedBrokerError(
                    f"Kafka cluster {self.alias!r}: brokers {sorted(want - seen)} not registered "
                    f"after {timeout_s:.0f}s (live: {sorted(seen)})\n{tails}"
                )
            time.sleep(0.2)

    def active_controller(self, timeout_s: float = 30) -> int:
        """The id of the quorum's leader, the active controller (asked with DescribeQuorum)."""
        deadline = time.monotonic() + timeout_s
        while True:
            for node in self.controllers:
                if not node.is_running():
                    continue
                with contextlib.suppress(OSError, ValueError):
                    leader = describe_quorum_leader(node.ports["CONTROLLER"])
                    if leader >= 0:
                        return leader
            if time.monotonic() > deadline:
                raise EmbeddedBrokerError(f"cluster {self.alias!r}: no active controller")
            time.sleep(0.3)

    @staticmethod
    def _wait_listening(node: KafkaNode, listener: str, deadline: float) -> None:
        while True:
            exited = node.exit_report(f"Kafka {node.name} exited during start")
            if exited is not None:
                raise EmbeddedBrokerError(exited)
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", node.ports[listener]), timeout=0.5).close()
                return
            if time.monotonic() > deadline:
                raise EmbeddedBrokerError(f"{node.name} does not listen on {listener}")
            time.sleep(0.2)


def _port_lost(cluster: KafkaCluster) -> bool:
    return any("Address already in use" in n.log_tail(200) for n in cluster.nodes)


def start_cluster(
    alias: str,
    workdir: Path | None = None,
    shape: ClusterShape = COMBINED,
    ready_timeout_s: float = 180,
) -> KafkaCluster:
    """Start a cluster of ``shape`` and wait until every broker is registered.

    Its folders (data and ``server.log`` per node) go under ``workdir`` (a new temporary
    folder if None) and stay after it stops."""
    shape.check()
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="mirror-kafka-"))
    root.mkdir(parents=True, exist_ok=True)
    kafka_jars.jar_dir("kafka")
    used: set[int] = set()
    for _attempt in range(3):
        nodes, links = layout(root / f"kafka-{alias}", shape, used)
        cluster = KafkaCluster(alias, root / f"kafka-{alias}", new_cluster_id(), shape, nodes)
        hub = LinkHub(cluster.workdir) if links else None
        link_ports = {}
        if hub is not None:
            for name, (upstream, ends) in links.items():
                link_ports[name] = hub.add(name, upstream, ends).port
                used.add(link_ports[name])
            cluster.hub = hub
            cluster.client_ports = {
                b.node_id: link_ports[f"clients>{b.node_id}"] for b in cluster.brokers
            }
        for node in cluster.nodes:
            node_settings(node, cluster.nodes, shape, link_ports)
        with ThreadPoolExecutor(len(cluster.nodes)) as pool:
            list(pool.map(format_node, cluster.nodes, [cluster.cluster_id] * len(cluster.nodes)))
        try:
            cluster.start(ready_timeout_s)
            return cluster
        except EmbeddedBrokerError:
            lost = _port_lost(cluster)
            cluster.stop(timeout_s=5)
            if not lost:
                raise
    raise EmbeddedBrokerError(f"Kafka cluster {alias!r}: no free ports after 3 attempts")


def start_clusters(
    aliases: Sequence[str],
    workdir: Path | None = None,
    shape: ClusterShape | Mapping[str, ClusterShape] = COMBINED,
    ready_timeout_s: float = 180,
) -> list[KafkaCluster]:
    """One cluster per alias (``shape``: one for all, or per alias), started in parallel."""
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="mirror-kafka-"))
    shapes = shape if isinstance(shape, Mapping) else dict.fromkeys(aliases, shape)
    kafka_jars.jar_dir("kafka")
    with ThreadPoolExecutor(len(aliases)) as pool:
        futures = [pool.submit(start_cluster, a, root, shapes[a], ready_timeout_s) for a in aliases]
        started, errors = [], []
        for f in futures:
            try:
                started.append(f.result())
            except BaseException as e:
                errors.append(e)
    if errors:
        for c in started:
            c.stop(timeout_s=5)
        raise errors[0]
    return started


@contextlib.contextmanager
def kafka_cluster(
    alias: str, workdir: Path | None = None, shape: ClusterShape = COMBINED
) -> Iterator[KafkaCluster]:
    """A cluster for the ``with`` block, always stopped afterwards."""
    cluster = start_cluster(alias, workdir, shape)
    try:
        yield cluster
    finally:
        cluster.stop()


# -- small protocol pieces ------------------------------------------------------------------
def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit overflow)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: 0 for Integer.MIN_VALUE."""
    return 0 if n == -(1 << 31) else abs(n)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def describe_quorum_leader(port: int, timeout_s: float = 3.0) -> int:
    """The quorum leader's id, from a DescribeQuorum (v0) request to the node on ``port``
    (a controller answers it for its own quorum); -1 if it does not know one."""
    topic = METADATA_TOPIC.encode()
    body = (
        _uvarint(2)  # topics: one (compact array)
        + _uvarint(len(topic) + 1)
        + topic
        + _uvarint(2)  # partitions: one
        + struct.pack(">i", 0)
        + b"\x00"  # partition tagged fields
        + b"\x00"  # topic tagged fields
        + b"\x00"  # request tagged fields
    )
    client = b"mirror-tests"
    header = struct.pack(">hhih", 55, 0, 1, len(client)) + client + b"\x00"
    frame = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        data = _recv(sock, size)
    # correlation id, header tagged fields, error code, topics (one), its name, partitions (one)
    pos = 4
    pos += 1  # empty tagged fields
    (error,) = struct.unpack_from(">h", data, pos)
    pos += 2
    if error != 0:
        return -1
    pos += 1  # topics array length (one topic)
    name_len = data[pos] - 1
    pos += 1 + name_len
    pos += 1  # partitions array length
    _index, perr, leader = struct.unpack_from(">ihi", data, pos)
    return leader if perr == 0 else -1


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


__all__ = [
    "COMBINED",
    "PRODUCTION",
    "ClusterShape",
    "KafkaCluster",
    "KafkaNode",
    "describe_quorum_leader",
    "kafka_cluster",
    "start_cluster",
    "start_clusters",
]
