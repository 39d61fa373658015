"""Apache Kafka test clusters: one single-node KRaft cluster (broker and controller in one JVM) per
alias, on free loopback ports, with its own log directory and cluster id. On a ZooKeeper-mode
release (Kafka 2.8) the cluster is a broker and its ZooKeeper server
(:mod:`mirror_lib.testing.zookeeper`), each its own JVM.

A cluster is ready only when a real Metadata request answers. It is stopped by PID, and it can be
killed (SIGKILL, as a crash) and restarted on the same ports and log directory, so it comes back
with its data. Its log is kept in a file (:attr:`KafkaBroker.log_path`) that a failing test can
print. Options: a ``SASL_SSL`` (or ``SASL_PLAINTEXT``) listener with SCRAM users, Kafka's
``StandardAuthorizer`` with super users, and any broker setting (short retention, for one).

The jars come from :mod:`mirror_lib.testing.kafka_jars` (fetched once from Maven Central), of
the release ``KafkaOptions.version`` names (default 4.3.1; see ``kafka_jars.RELEASES``).
Each JVM starts as :mod:`mirror_lib.testing.kafka_jvm` says (``MIRROR_KAFKA_JAVA``,
``MIRROR_KAFKA_HEAP_MB``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from mirror_lib.errors import ConfigError, EmbeddedBrokerError
from mirror_lib.testing import kafka_jars, processes
from mirror_lib.testing.embedded import free_port
from mirror_lib.testing.kafka_jvm import java_command, write_logging
from mirror_lib.testing.zookeeper import ZooKeeperServer

SCRAM = "SCRAM-SHA-512"
#: Broker settings every test cluster gets: one node, small internal topics, no waiting.
#: :data:`KRAFT_ONLY` and :data:`SINCE_4` say which of them an older release does not take.
BASE_SETTINGS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # A hung transaction is aborted within a second of its timeout, not ten.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    # A killed broker re-registers with its controller within seconds of its restart.
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "2500",
}

#: What only a KRaft node takes: a ZooKeeper-mode broker (2.x) gets ``broker.id`` and
#: ``zookeeper.connect`` instead.
KRAFT_ONLY = frozenset(
    {
        "process.roles",
        "node.id",
        "controller.listener.names",
        "controller.quorum.voters",
        "broker.heartbeat.interval.ms",
        "broker.session.timeout.ms",
    }
)
#: Settings new in Kafka 4.0 (the share groups of KIP-932): left out for older releases.
SINCE_4 = frozenset(
    {
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
    }
)
#: The authorizer with ZooKeeper (2.x): ACLs in ZooKeeper; with KRaft, in the metadata log.
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
#: A ZooKeeper-mode broker's session: a killed broker's registration lapses within seconds.
ZK_SESSION_MS = "6000"
#: What a ZooKeeper-mode broker logs, then exits, when the session of its killed predecessor
#: still holds its registration.
STILL_REGISTERED = "node already exists and owner"

#: Broker settings for tests of retention: segments roll and old ones are deleted within seconds.
SHORT_RETENTION: dict[str, str] = {
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "0",
    "file.delete.delay.ms": "0",
}


@dataclasses.dataclass(frozen=True)
class SecureListener:
    """A second listener that authenticates SCRAM-SHA-512 users.

    ``users``: name -> password, created when the storage is formatted. ``tls``: the broker's
    certificate chain and key as one PEM file (unencrypted key); with it the listener is
    ``SASL_SSL``, without it ``SASL_PLAINTEXT``.
    """

    users: Mapping[str, str]
    tls_pem: Path | None = None

    @property
    def protocol(self) -> str:
        return "SASL_SSL" if self.tls_pem else "SASL_PLAINTEXT"


@dataclasses.dataclass(frozen=True)
class KafkaOptions:
    """What a test cluster offers beyond plain PLAINTEXT on loopback.

    ``authorizer``: Kafka's ``StandardAuthorizer``; ``super_users`` are principals it lets do
    anything (the PLAINTEXT listener's ``User:ANONYMOUS`` is one unless left out, so tests keep
    an administrator's door). ``proxied``: ``(listen port, advertised port)`` of a second
    PLAINTEXT listener that clients reach through a test proxy: Metadata asked there names the
    proxy, so every connection of such a client goes through it, while the first listener stays
    direct. ``settings``: any other broker setting. ``version``: the Apache Kafka release to run
    (``kafka_jars.RELEASES``; ``"2.8"`` runs in ZooKeeper mode, without a secure listener).
    ``dump_classes``: the broker's JVM writes the classes it loaded to this file at exit
    (:func:`~mirror_lib.testing.kafka_jvm.write_class_archive`).
    """

    secure: SecureListener | None = None
    proxied: tuple[int, int] | None = None
    authorizer: bool = False
    super_users: tuple[str, ...] = ("User:ANONYMOUS",)
    settings: Mapping[str, str] = dataclasses.field(default_factory=dict)
    heap_mb: int | None = None
    version: str = kafka_jars.KAFKA_VERSION
    dump_classes: Path | None = None

    @property
    def release(self) -> kafka_jars.Release:
        return kafka_jars.release(self.version)


#: An authorizer that allows whatever no ACL names, as on a cluster that has just turned ACLs on:
#: the test clusters' default. The ACL APIs work, and a test that needs a refusal (a topic the
#: flow may not grow, say) adds ACLs to its own resource only.
OPEN_ACLS = KafkaOptions(
    authorizer=True, super_users=(), settings={"allow.everyone.if.no.acl.found": "true"}
)


@dataclasses.dataclass
class KafkaBroker(processes.ChildProcess):
    """One single-node Apache Kafka cluster: its ports, folders and (while running) process.

    :meth:`stop` stops it cleanly and :meth:`kill` SIGKILLs it, as a crash would; its data stays,
    and :meth:`start` brings it back on the same ports. On a ZooKeeper-mode release
    ``controller_port`` is its ZooKeeper server's (:attr:`zookeeper`), which holds what a KRaft
    controller would; the server keeps running while the broker stops or dies, as in a real
    cluster, and :func:`stop_kafka` stops it after the broker."""

    alias: str
    workdir: Path
    port: int
    controller_port: int
    secure_port: int | None
    cluster_id: str
    options: KafkaOptions
    zookeeper: ZooKeeperServer | None = None

    @property
    def bootstrap_servers(self) -> str:
        """The PLAINTEXT listener (a super user's when an authorizer runs)."""
        return f"127.0.0.1:{self.port}"

    @property
    def secure_bootstrap_servers(self) -> str:
        if self.secure_port is None:
            raise EmbeddedBrokerError(f"Kafka cluster {self.alias!r} has no secure listener")
        return f"127.0.0.1:{self.secure_port}"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "broker.log"

    def start(self, ready_timeout_s: float = 60) -> None:
        """Start the JVM on this cluster's ports and log directory; wait until it answers."""
        if self.is_running():
            return
        deadline = time.monotonic() + ready_timeout_s
        if self.zookeeper is not None:
            self.zookeeper.start(ready_timeout_s)
        while True:
            _launch(self)
            try:
                _wait_ready(self, deadline)
                return
            except EmbeddedBrokerError:
                # A ZooKeeper-mode broker started again before the session of the one killed
                # lapsed (ZK_SESSION_MS) finds its registration taken and exits, as a real one
                # would; its supervisor starts it again, and so do we.
                this_start = self.log_tail(400).rpartition("==== start")[2]
                if STILL_REGISTERED not in this_start or time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def restart(self, ready_timeout_s: float = 60) -> None:
        """Stop the broker cleanly and start it again on the same ports and data."""
        self.stop()
        self.start(ready_timeout_s)


def _settings(broker: KafkaBroker) -> dict[str, str]:
    opts = broker.options
    release = opts.release
    if release.zookeeper and opts.secure is not None:
        raise ConfigError("secure", opts.secure, f"None on ZooKeeper-mode Kafka {release.version}")
    listeners = [f"PLAINTEXT://127.0.0.1:{broker.port}"]
    advertised = list(listeners)
    protocols = [] if release.zookeeper else ["CONTROLLER:PLAINTEXT"]
    protocols.append("PLAINTEXT:PLAINTEXT")
    extra: dict[str, str] = {}
    if opts.proxied is not None:
        listeners.append(f"PROXIED://127.0.0.1:{opts.proxied[0]}")
        advertised.append(f"PROXIED://127.0.0.1:{opts.proxied[1]}")
        protocols.append("PROXIED:PLAINTEXT")
    if opts.secure is not None:
        listeners.append(f"SECURE://127.0.0.1:{broker.secure_port}")
        advertised.append(f"SECURE://127.0.0.1:{broker.secure_port}")
        protocols.append(f"SECURE:{opts.secure.protocol}")
        prefix = "listener.name.secure."
        extra |= {
            f"{prefix}sasl.enabled.mechanisms": SCRAM,
            f"{prefix}{SCRAM.lower()}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
        }
        if opts.secure.tls_pem is not None:
            extra |= {
                f"{prefix}ssl.keystore.type": "PEM",
                f"{prefix}ssl.keystore.location": str(opts.secure.tls_pem),
            }
    if opts.authorizer:
        extra["authorizer.class.name"] = (
            ACL_AUTHORIZER if release.zookeeper else STANDARD_AUTHORIZER
        )
        if opts.super_users:
            extra["super.users"] = ";".join(opts.super_users)
    return {
        **_metadata_settings(broker, listeners),
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(protocols),
        "log.dirs": str(broker.log_dir),
        **extra,
        **opts.settings,
    }


def _metadata_settings(broker: KafkaBroker, listeners: list[str]) -> dict[str, str]:
    """The base settings as ``broker``'s release takes them: a KRaft node (the CONTROLLER
    listener added to ``listeners``) or a ZooKeeper-mode broker."""
    release = broker.options.release
    base = {k: v for k, v in BASE_SETTINGS.items() if release.major >= 4 or k not in SINCE_4}
    if release.zookeeper:
        base = {k: v for k, v in base.items() if k not in KRAFT_ONLY}
        return {
            **base,
            "broker.id": "1",
            "zookeeper.connect": f"127.0.0.1:{broker.controller_port}",
            "zookeeper.session.timeout.ms": ZK_SESSION_MS,
        }
    listeners.append(f"CONTROLLER://127.0.0.1:{broker.controller_port}")
    return {**base, "controller.quorum.voters": f"1@127.0.0.1:{broker.controller_port}"}


def _write_settings(broker: KafkaBroker) -> Path:
    path = broker.workdir / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in _settings(broker).items()))
    write_logging(broker.workdir, broker.options.version)
    return path


def _java_cmd(broker: KafkaBroker, main: str, *args: str, dump_to: Path | None = None) -> list[str]:
    opts = broker.options
    return java_command(
        broker.workdir, opts.heap_mb, main, *args, version=opts.version, dump_to=dump_to
    )


def _format(broker: KafkaBroker) -> None:
    """Format the log directory for this cluster's id, with its SCRAM users (KRaft only: a
    ZooKeeper-mode broker creates its log directory itself)."""
    if broker.options.release.zookeeper:
        return
    config = _write_settings(broker)
    args = ["format", "-t", broker.cluster_id, "-c", str(config)]
    for name, password in (broker.options.secure.users if broker.options.secure else {}).items():
        args += ["--add-scram", f"{SCRAM}=[name={name},password={password}]"]
    done = subprocess.run(
        _java_cmd(broker, "kafka.tools.StorageTool", *args),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise EmbeddedBrokerError(
            f"formatting Kafka cluster {broker.alias!r} in {broker.log_dir} failed "
            f"(exit {done.returncode}):\n{(done.stdout + done.stderr).strip()[-2000:]}"
        )


def _launch(broker: KafkaBroker) -> None:
    config = _write_settings(broker)
    command = _java_cmd(broker, "kafka.Kafka", str(config), dump_to=broker.options.dump_classes)
    broker.spawn(command, f"java for Kafka {broker.alias!r}")


def _port_lost(broker: KafkaBroker) -> bool:
    servers: list[processes.ChildProcess] = [broker]
    if broker.zookeeper is not None:
        servers.append(broker.zookeeper)
    return any("Address already in use" in s.log_tail(200) for s in servers)


def _wait_ready(broker: KafkaBroker, deadline: float) -> None:
    """Wait until a Metadata request on the PLAINTEXT listener names the broker (and, in
    ZooKeeper mode, every topic in its log directory: its controller sends them a moment after
    the broker registers, while a KRaft broker answers only once it has caught up)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    on_disk = _topics_on_disk(broker.log_dir) if broker.zookeeper is not None else set()
    while True:
        exited = broker.exit_report(f"Kafka cluster {broker.alias!r} exited during start")
        if exited is not None:
            raise EmbeddedBrokerError(exited)
        with contextlib.suppress(OSError, ck.KafkaException):  # not listening yet
            socket.create_connection(("127.0.0.1", broker.port), timeout=0.5).close()
            wait = max(0.2, min(2.0, deadline - time.monotonic()))
            metadata = admin.list_topics(timeout=wait)
            if metadata.brokers and on_disk <= set(metadata.topics):
                return
        if time.monotonic() > deadline:
            raise EmbeddedBrokerError(
                f"Kafka cluster {broker.alias!r} did not answer Metadata on "
                f"{broker.bootstrap_servers} in time; log {broker.log_path}:\n{broker.log_tail()}"
            )
        time.sleep(0.1)


def _topics_on_disk(log_dir: Path) -> set[str]:
    """The topics whose partitions a log directory holds (folders ``<topic>-<partition>``)."""
    if not log_dir.is_dir():
        return set()
    found = (d.name.rpartition("-") for d in log_dir.iterdir() if d.is_dir())
    return {topic for topic, _, number in found if topic and number.isdigit()}


def _new_broker(alias: str, root: Path, options: KafkaOptions, used: set[int]) -> KafkaBroker:
    ports = []
    for _ in range(3 if options.secure else 2):
        ports.append(free_port(used))
        used.add(ports[-1])
    workdir = root / f"kafka-{alias}"
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    cluster_id = new_cluster_id()
    secure = ports[2] if options.secure else None
    zookeeper = None
    if options.release.zookeeper:
        zookeeper = ZooKeeperServer(workdir / "zookeeper", ports[1], options.version)
    return KafkaBroker(alias, workdir, ports[0], ports[1], secure, cluster_id, options, zookeeper)


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form (base64 of 16 bytes, URL-safe, unpadded). Like
    Kafka's own ``Uuid.randomUuid``, never one that starts with ``-``: the storage tool would
    read it as an option."""
    import base64

    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


def _start_one(
    alias: str, root: Path, options: KafkaOptions, ready_timeout_s: float
) -> KafkaBroker:
    used: set[int] = set()
    for _attempt in range(3):
        broker = _new_broker(alias, root, options, used)
        _format(broker)
        try:
            broker.start(ready_timeout_s)
            return broker
        except EmbeddedBrokerError:
            lost = _port_lost(broker)
            broker.kill()
            if broker.zookeeper is not None:
                broker.zookeeper.kill()
            if not lost:
                raise
    raise EmbeddedBrokerError(f"Kafka cluster {alias!r}: no free ports after 3 attempts")


def start_kafka(
    aliases: Sequence[str] = ("source", "target"),
    workdir: Path | None = None,
    options: KafkaOptions | Mapping[str, KafkaOptions] | None = None,
    ready_timeout_s: float = 90,
) -> list[KafkaBroker]:
    """Start one Kafka cluster per alias, in parallel, and wait until each answers Metadata.

    ``options``: one :class:`KafkaOptions` for all, or per alias. Logs and data go under
    ``workdir`` (a new temporary folder if None) and stay after the clusters stop.
    """
    names = list(aliases)
    if not names or len(set(names)) != len(names):
        raise ConfigError("aliases", names, "one or more distinct names")
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="mirror-kafka-"))
    root.mkdir(parents=True, exist_ok=True)
    per_alias = options if isinstance(options, Mapping) else dict.fromkeys(names, options)
    for version in {(per_alias.get(n) or KafkaOptions()).version for n in names}:
        kafka_jars.jar_dir("kafka", version)  # fetch once, before the threads
    with ThreadPoolExecutor(len(names)) as pool:
        futures = [
            pool.submit(_start_one, n, root, per_alias.get(n) or KafkaOptions(), ready_timeout_s)
            for n in names
        ]
        started, errors = [], []
        for f in futures:
            try:
                started.append(f.result())
            except BaseException as e:  # stop the others, then raise
                errors.append(e)
    if errors:
        stop_kafka(started)
        raise errors[0]
    return started


def stop_kafka(brokers: Sequence[KafkaBroker], timeout_s: float = 20) -> None:
    """Stop the clusters (SIGTERM, then SIGKILL after ``timeout_s``), a ZooKeeper-mode broker
    before its ZooKeeper server. Their folders stay."""
    processes.stop(_own_processes(brokers), timeout_s)
    processes.stop(_own_processes([b.zookeeper for b in brokers if b.zookeeper]), timeout_s)


def _own_processes(servers: Sequence[processes.ChildProcess]) -> list[subprocess.Popen[bytes]]:
    return [s.process for s in servers if s.process is not None and s.owner_pid == os.getpid()]


@contextlib.contextmanager
def kafka_clusters(
    aliases: Sequence[str] = ("source", "target"),
    workdir: Path | None = None,
    options: KafkaOptions | Mapping[str, KafkaOptions] | None = None,
) -> Iterator[list[KafkaBroker]]:
    """Start Kafka clusters for the ``with`` block and always stop them afterwards."""
    brokers = start_kafka(aliases, workdir, options)
    try:
        yield brokers
    finally:
        stop_kafka(brokers)
