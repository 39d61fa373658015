"""The nodes of a multi-broker test cluster: its shape, each node's ports and settings, and the
links between them (:mod:`mirror_lib.testing.kafka_cluster` starts and drives the cluster)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from mirror_lib.errors import ConfigError, EmbeddedBrokerError
from mirror_lib.testing import processes
from mirror_lib.testing.embedded import free_port
from mirror_lib.testing.kafka_jvm import java_command, write_logging

CONTROLLER_HEAP_ENV = "MIRROR_KAFKA_CONTROLLER_HEAP_MB"
#: A dedicated controller holds only the metadata log: a quarter of a broker's heap is plenty.
CONTROLLER_HEAP_MB = 256
TXN_PARTITIONS = 4  # transaction.state.log.num.partitions of every test cluster


@dataclasses.dataclass(frozen=True)
class ClusterShape:
    """How many nodes of which kind, and what every topic gets.

    ``controllers = 0``: each broker is a controller too (combined nodes, a quorum of
    ``brokers``); otherwise that many dedicated controllers. ``links``: route every path
    through a link that can be cut (:meth:`~mirror_lib.testing.kafka_cluster.KafkaCluster.cut`).
    ``settings``: any other broker setting, for every broker.
    """

    brokers: int = 3
    controllers: int = 0
    min_insync: int = 2
    links: bool = False
    settings: Mapping[str, str] = dataclasses.field(default_factory=dict)
    heap_mb: int | None = None

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

    def check(self) -> None:
        if self.brokers < 1:
            raise ConfigError("brokers", self.brokers, "at least 1")
        if self.controllers < 0:
            raise ConfigError("controllers", self.controllers, "0 (combined nodes) or more")
        if not 1 <= self.min_insync <= self.replication_factor:
            raise ConfigError(
                "min_insync", self.min_insync, f"1 to {self.replication_factor} (the RF)"
            )


#: Three brokers and three dedicated controllers, each path through a link: every fault of the
#: fault matrix, two brokers cut at once included (the quorum is never cut).
PRODUCTION = ClusterShape(brokers=3, controllers=3, links=True)
#: Three combined nodes: the leanest three-broker cluster (a rolling restart, a leader killed).
COMBINED = ClusterShape(brokers=3, controllers=0)


def cluster_settings(shape: ClusterShape) -> dict[str, str]:
    """What every node of a ``shape`` cluster gets: replication factor and min ISR for every
    topic, internal ones included, and no waiting that a test would pay for."""
    rf, isr = str(shape.replication_factor), str(shape.min_insync)
    return {
        "num.partitions": "1",
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        "group.initial.rebalance.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    }


@dataclasses.dataclass
class KafkaNode(processes.ChildProcess):
    """One node (one JVM) of a :class:`~mirror_lib.testing.kafka_cluster.KafkaCluster`: a broker, a
    controller, or both."""

    node_id: int
    roles: tuple[str, ...]
    workdir: Path
    ports: dict[str, int]  # listener name -> the port it binds
    heap_mb: int | None
    settings: dict[str, str] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def name(self) -> str:
        """What its links call it (:meth:`~mirror_lib.testing.kafka_cluster.KafkaCluster.cut`
        takes the id)."""
        return f"node {self.node_id}"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    @property
    def direct_port(self) -> int | None:
        """The broker's PLAINTEXT port (None for a controller): never behind a link."""
        return self.ports.get("PLAINTEXT")

    def command(self, main: str, *args: str) -> list[str]:
        return java_command(self.workdir, self.heap_mb, main, *args)

    def write_settings(self) -> Path:
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        write_logging(self.workdir)
        return path

    def launch(self) -> None:
        """Start the JVM (not waiting for it: see
        :meth:`~mirror_lib.testing.kafka_cluster.KafkaCluster.start_node`)."""
        if self.is_running():
            return
        config = self.write_settings()
        self.spawn(self.command("kafka.Kafka", str(config)), f"java for Kafka node {self.name}")


def layout(
    workdir: Path, shape: ClusterShape, used: set[int]
) -> tuple[list[KafkaNode], dict[str, tuple[int, frozenset[str]]]]:
    """A cluster's nodes in ``workdir`` (emptied), with their ports (free ones, not in ``used``,
    which gets them), and the links the shape needs: name -> (upstream port, ends)."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    broker_ids = list(range(1, shape.brokers + 1))
    if shape.controllers:
        controller_ids = list(range(101, 101 + shape.controllers))
    else:
        controller_ids = list(broker_ids)
    nodes: list[KafkaNode] = []
    for node_id in sorted(set(broker_ids) | set(controller_ids)):
        roles = tuple(
            r
            for r, ids in (("broker", broker_ids), ("controller", controller_ids))
            if node_id in ids
        )
        heap = shape.heap_mb
        if roles == ("controller",):
            heap = int(os.environ.get(CONTROLLER_HEAP_ENV, CONTROLLER_HEAP_MB))
        node_dir = workdir / f"node-{node_id}"
        node_dir.mkdir()
        ports = {}
        if "broker" in roles:
            ports["PLAINTEXT"] = _take(used)
            if shape.links:
                ports["CLIENT"] = _take(used)
                for follower_id in broker_ids:
                    ports[f"REPL{follower_id}"] = _take(used)
        if "controller" in roles:
            ports["CONTROLLER"] = _take(used)
        nodes.append(KafkaNode(node_id, roles, node_dir, ports, heap))
    brokers = [n for n in nodes if n.is_broker]
    controllers = [n for n in nodes if n.is_controller]
    links: dict[str, tuple[int, frozenset[str]]] = {}
    if shape.links:
        for b in brokers:
            links[f"clients>{b.node_id}"] = (b.ports["CLIENT"], frozenset({"clients", b.name}))
            for m in brokers:
                if m.node_id != b.node_id:  # follower m fetching from leader b
                    links[f"{m.node_id}>{b.node_id} repl"] = (
                        b.ports[f"REPL{m.node_id}"],
                        frozenset({m.name, b.name}),
                    )
        for n in nodes:
            for c in controllers:
                if n.node_id != c.node_id and n.is_broker:  # controllers talk to each other direct
                    links[f"{n.node_id}>{c.node_id} ctrl"] = (
                        c.ports["CONTROLLER"],
                        frozenset({n.name, c.name}),
                    )
    return nodes, links


def _take(used: set[int]) -> int:
    found = free_port(used)
    used.add(found)
    return found


def node_settings(
    node: KafkaNode, nodes: list[KafkaNode], shape: ClusterShape, link_ports: dict[str, int]
) -> None:
    """Fill ``node.settings``: its roles, listeners, quorum (``nodes``' controllers, reached
    through the links of ``link_ports``) and the shape's settings."""
    listeners, advertised = [], []
    for name, port in node.ports.items():
        listeners.append(f"{name}://127.0.0.1:{port}")
        if name == "CONTROLLER":
            continue
        shown = port
        if name == "CLIENT":
            shown = link_ports[f"clients>{node.node_id}"]
        elif name.startswith("REPL") and int(name[4:]) != node.node_id:
            shown = link_ports[f"{name[4:]}>{node.node_id} repl"]
        advertised.append(f"{name}://127.0.0.1:{shown}")
    voters = []
    for c in (n for n in nodes if n.is_controller):
        via = link_ports.get(f"{node.node_id}>{c.node_id} ctrl", c.ports["CONTROLLER"])
        voters.append(f"{c.node_id}@127.0.0.1:{via}")
    protocols = ",".join(f"{name}:PLAINTEXT" for name in node.ports)
    settings = {
        "process.roles": ",".join(node.roles),
        "node.id": str(node.node_id),
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": ",".join(voters),
        "listeners": ",".join(listeners),
        "listener.security.protocol.map": protocols
        + ("" if "CONTROLLER" in node.ports else ",CONTROLLER:PLAINTEXT"),
        "log.dirs": str(node.log_dir),
    }
    if node.is_broker:
        settings["advertised.listeners"] = ",".join(advertised)
        settings["inter.broker.listener.name"] = (
            f"REPL{node.node_id}" if shape.links else "PLAINTEXT"
        )
    # controllers too: in KRaft the controller applies the topic defaults of CreateTopics
    settings |= cluster_settings(shape)
    settings |= dict(shape.settings)
    node.settings = settings


def format_node(node: KafkaNode, cluster_id: str) -> None:
    """Format the node's log directory for ``cluster_id`` (Kafka's storage tool)."""
    config = node.write_settings()
    done = subprocess.run(
        node.command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if done.returncode != 0:
        raise EmbeddedBrokerError(
            f"formatting {node.name} in {node.log_dir} failed (exit {done.returncode}):\n"
            f"{(done.stdout + done.stderr).strip()[-2000:]}"
        )
