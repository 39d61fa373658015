"""Apache Kafka's own MirrorMaker 2 in dedicated mode, next to us in the tests and the bench.

:func:`start_mm2` writes an ``mm2.properties`` and a ``log4j2.properties`` into a work folder,
starts ``org.apache.kafka.connect.mirror.MirrorMaker`` from the ``mm2`` jar set of
:mod:`mirror_lib.testing.kafka_jars` (the same release as the test brokers) and waits until it
replicates: a probe record produced on the flow's source appears in its remote topic on the
target. MM2 only finds new topics every ``refresh.topics.interval.seconds`` (600 s by default),
so the probe topic is created before the JVM starts. It is stopped by PID (SIGTERM, which makes
Connect commit its source offsets; SIGKILL after a timeout) and its log stays in
:attr:`Mm2Process.log_path`.

On single-node test clusters MM2 4.x needs every replication factor at 1: the remote topics'
(``replication.factor``), its three internal topics' and Connect's three worker topics'
(``offset.storage``, ``status.storage``, ``config.storage``). :func:`single_node_settings` gives
them.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import confluent_kafka as ck

from mirror_lib.errors import BrokerError, ConfigError, EmbeddedBrokerError
from mirror_lib.testing import kafka_jars, processes
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from mirror_lib.testing.kafka_jvm import LOG4J2_CONSOLE, jvm_command

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
HEAP_ENV = "MIRROR_MM2_HEAP_MB"
# What Apache Kafka's bin/connect-mirror-maker.sh gives the JVM: a 2 GB heap (with 512 MB, four
# tasks of 200 B records ran out of it in the bench), with kafka-run-class.sh's JVM_OPTIONS.
PROBE_TOPIC = "mm2-launcher-probe"
# INFO, without the configuration dumps (thousands of lines per client) and client chatter.
_LOG4J = (
    LOG4J2_CONSOLE
    + """\
logger.config.name = org.apache.kafka.common.config
logger.config.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.utils.name = org.apache.kafka.common.utils
logger.utils.level = WARN
logger.metrics.name = org.apache.kafka.common.metrics
logger.metrics.level = WARN
logger.plugins.name = org.apache.kafka.connect.runtime.isolation
logger.plugins.level = WARN
"""
)


def single_node_settings() -> dict[str, str]:
    """The replication factors MM2 needs on single-node clusters (all default to 2 or 3)."""
    return {
        key: "1"
        for key in (
            "replication.factor",
            "checkpoints.topic.replication.factor",
            "heartbeats.topic.replication.factor",
            "offset-syncs.topic.replication.factor",
            "offset.storage.replication.factor",
            "status.storage.replication.factor",
            "config.storage.replication.factor",
        )
    }


def exactly_once_settings(rest_port: int, source: str = "A", target: str = "B") -> dict[str, str]:
    """Connect's exactly-once source support (KIP-618) for the flow ``source->target`` in
    dedicated mode: enabled on the target's worker, with the internal REST server (KIP-710) on
    ``127.0.0.1:rest_port``, and a ``read_committed`` source consumer."""
    return {
        "dedicated.mode.enable.internal.rest": "true",
        "listeners": f"http://127.0.0.1:{rest_port}",
        f"{target}.exactly.once.source.support": "enabled",
        f"{source}.consumer.isolation.level": "read_committed",
    }


@dataclasses.dataclass
class Mm2Process(processes.ChildProcess):
    """One MirrorMaker 2 JVM in dedicated mode: its settings, work folder and process.

    :meth:`stop` stops it (SIGTERM, SIGKILL after the timeout) and :meth:`kill` SIGKILLs it, as
    a crash would: Connect then commits no source offsets. Its log stays."""

    properties: dict[str, str]
    workdir: Path

    @property
    def config_path(self) -> Path:
        return self.workdir / "mm2.properties"

    @property
    def log_path(self) -> Path:
        return self.workdir / "mm2.log"

    def bootstrap(self, alias: str) -> str:
        """``<alias>.bootstrap.servers`` of the properties."""
        value = self.properties.get(f"{alias}.bootstrap.servers", "").strip()
        if not value:
            raise ConfigError(f"{alias}.bootstrap.servers", value, "the cluster's bootstrap")
        return value

    def log_count(self, text: str) -> int:
        """How many lines of the log contain ``text``."""
        try:
            return sum(
                text in line for line in self.log_path.read_text(errors="replace").split("\n")
            )
        except OSError:
            return 0

    def command(self) -> list[str]:
        """Write the properties and the log settings; the ``java`` command that runs MM2 on them
        (logging to stdout). The bench runs it under its own meter."""
        self.config_path.write_text("".join(f"{k} = {v}\n" for k, v in self.properties.items()))
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(_LOG4J)
        heap = int(os.environ.get(HEAP_ENV, "2048"))
        return jvm_command(
            (256, heap),
            f"-Dlog4j2.configurationFile={log4j}",
            kafka_jars.classpath("mm2"),
            MAIN_CLASS,
            str(self.config_path),
        )

    def start(self) -> None:
        """Write the properties and start the JVM (no wait; see :meth:`wait_replicating`)."""
        if self.is_running():
            return
        self.spawn(self.command(), "java for MirrorMaker 2")

    def wait_replicating(
        self, flow: str, topic: str = PROBE_TOPIC, timeout_s: float = 120
    ) -> float:
        """Produce a probe record to ``topic`` on the flow's source and wait until it is in the
        remote topic on the target; returns the seconds waited.

        ``topic`` must exist before MM2 started (:func:`start_mm2` creates it) and pass the
        flow's topic filter. The remote name is ``<source><separator><topic>``
        (``DefaultReplicationPolicy``).
        """
        source, target = _flow(flow)
        sep = self.properties.get("replication.policy.separator", ".")
        remote = f"{source}{sep}{topic}"
        marker = f"probe-{uuid.uuid4().hex}".encode()
        began = time.monotonic()
        deadline = began + timeout_s
        produce_exact(self.bootstrap(source), topic, [{"value": marker}])
        while True:
            exited = self.exit_report("MirrorMaker 2 exited before it replicated")
            if exited is not None:
                raise EmbeddedBrokerError(exited)
            try:
                if any(r.value == marker for r in consume_all(self.bootstrap(target), remote)):
                    return time.monotonic() - began
            except (BrokerError, ck.KafkaException):
                pass  # the remote topic is not there yet, or not readable yet
            if time.monotonic() > deadline:
                raise EmbeddedBrokerError(
                    f"MirrorMaker 2 did not replicate {topic} to {remote} on "
                    f"{self.bootstrap(target)} in {timeout_s:.0f}s; log {self.log_path}:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.5)


def _flow(flow: str) -> tuple[str, str]:
    source, sep, target = flow.partition("->")
    if not sep or not source.strip() or not target.strip():
        raise ConfigError("flow", flow, "source->target, e.g. A->B")
    return source.strip(), target.strip()


def start_mm2(
    properties: Mapping[str, str],
    workdir: Path,
    flow: str = "A->B",
    probe_topic: str | None = PROBE_TOPIC,
    timeout_s: float = 180,
) -> Mm2Process:
    """Start MirrorMaker 2 from ``properties`` (an ``mm2.properties`` as a dict) in ``workdir``.

    With ``probe_topic`` (the default), that topic is created on the source of ``flow`` first
    and the call returns once MM2 has replicated a probe record through it; with None it returns
    once the JVM runs. A failed start stops the JVM and raises with the end of its log.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    kafka_jars.jar_dir("mm2")  # fetch once, before anything starts
    mm2 = Mm2Process(dict(properties), workdir)
    source, _target = _flow(flow)
    if probe_topic is not None:
        _ensure_topic(mm2.bootstrap(source), probe_topic)
    mm2.start()
    if probe_topic is not None:
        try:
            mm2.wait_replicating(flow, probe_topic, timeout_s)
        except BaseException:
            mm2.stop()
            raise
    return mm2


def _ensure_topic(bootstrap: str, topic: str) -> None:
    try:
        create_topic(bootstrap, topic)
    except ck.KafkaException as exc:
        if exc.args[0].code() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
            raise
