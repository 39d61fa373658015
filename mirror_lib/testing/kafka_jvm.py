"""How a JVM of an Apache Kafka release is started for the tests, the bench and the demo: which
``java``, its heap, Kafka's own JVM options and its logging settings (log4j2 for Kafka 4.x, log4j
1.2 for older releases and their ZooKeeper). Brokers (:mod:`mirror_lib.testing.kafka_broker`,
:mod:`mirror_lib.testing.kafka_nodes`), ZooKeeper servers and MirrorMaker 2 all start this way.

Environment: ``MIRROR_KAFKA_JAVA`` names the ``java`` to run (default: ``$JAVA_HOME/bin/java``,
else ``java`` on PATH); ``MIRROR_KAFKA_HEAP_MB`` the maximum heap (default 512);
``MIRROR_KAFKA_JVM`` how the JVMs compile and load their classes: ``kafka`` (the default: as
Kafka's scripts start them; the bench keeps it) or ``lean`` (the tests set it), C1 only and, where
one was written for their release (:func:`class_archive`), the classes mapped from a
class-data-sharing archive, as a local Spark driver starts (:mod:`mirror_lib.spark.jvm`). A lean
three-node cluster starts on a third of the CPU, and no record's path changes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mirror_lib.errors import EmbeddedBrokerError
from mirror_lib.spark import jvm
from mirror_lib.testing import kafka_jars

JAVA_ENV = "MIRROR_KAFKA_JAVA"
HEAP_ENV = "MIRROR_KAFKA_HEAP_MB"
JVM_ENV = "MIRROR_KAFKA_JVM"
JVM_KINDS = ("kafka", "lean")
# What Apache Kafka's bin/kafka-run-class.sh gives every JVM it starts (its default
# KAFKA_JVM_PERFORMANCE_OPTS). With G1's own 200 ms pause target a broker under the bench's
# steady load paused for up to 240 ms, and every record in flight waited
# (bench/journal/2026-11-28-brokers-collector-starved.md).
JVM_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
#: log4j2 to stdout, a line per event: the start of every Kafka 4.x JVM's logging settings.
LOG4J2_CONSOLE = """\
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
"""
BROKER_LOG4J = (
    LOG4J2_CONSOLE
    + """\
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = WARN
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""
)
#: The same for the releases that log through log4j 1.2's API (Kafka 2.8 and 3.x, ZooKeeper).
BROKER_LOG4J_1 = """\
log4j.rootLogger = INFO, OUT
log4j.appender.OUT = org.apache.log4j.ConsoleAppender
log4j.appender.OUT.layout = org.apache.log4j.PatternLayout
log4j.appender.OUT.layout.ConversionPattern = [%d] %p %m (%c)%n
log4j.logger.kafka = INFO
log4j.logger.state.change.logger = WARN
log4j.logger.org.apache.kafka.controller = WARN
log4j.logger.org.apache.kafka.raft = WARN
log4j.logger.kafka.request.logger = WARN
log4j.logger.org.apache.zookeeper = WARN
"""


def java_binary() -> str:
    """The ``java`` that runs the brokers (Kafka 4.x needs Java 17 or newer)."""
    override = os.environ.get(JAVA_ENV, "").strip()
    home = os.environ.get("JAVA_HOME", "").strip()
    found = override or (str(Path(home) / "bin" / "java") if home else shutil.which("java"))
    if not found or not os.access(found, os.X_OK):
        raise EmbeddedBrokerError(
            f"no java to run Apache Kafka: set {JAVA_ENV} or JAVA_HOME to a Java 17+ install "
            f"(tried {override or home or 'java on PATH'!r})"
        )
    return found


def _logging_file(workdir: Path, version: str) -> Path:
    if kafka_jars.release(version).log4j2:
        return workdir / "log4j2.properties"
    return workdir / "log4j.properties"


def write_logging(workdir: Path, version: str = kafka_jars.KAFKA_VERSION) -> None:
    """Write the logging settings of a JVM of release ``version`` into ``workdir``: log4j2's
    (Kafka 4.x) or log4j 1.2's (older releases and their ZooKeeper)."""
    log4j2 = kafka_jars.release(version).log4j2
    _logging_file(workdir, version).write_text(BROKER_LOG4J if log4j2 else BROKER_LOG4J_1)


def java_command(
    workdir: Path,
    heap_mb: int | None,
    main: str,
    *args: str,
    version: str = kafka_jars.KAFKA_VERSION,
    dump_to: Path | None = None,
) -> list[str]:
    """The command of a Kafka JVM (broker, controller or tool) of release ``version`` that logs
    by the settings :func:`write_logging` writes into ``workdir``: a fixed heap (default
    ``$MIRROR_KAFKA_HEAP_MB``, else 512 MB), as bin/kafka-server-start.sh gives the broker, and
    Kafka's own JVM options."""
    heap = heap_mb or int(os.environ.get(HEAP_ENV, "512"))
    logging = _logging_file(workdir, version)
    if kafka_jars.release(version).log4j2:
        log_option = f"-Dlog4j2.configurationFile={logging}"
    else:
        log_option = f"-Dlog4j.configuration=file:{logging}"
    classpath = kafka_jars.classpath("kafka", version=version)
    return jvm_command((heap, heap), log_option, classpath, main, *args, dump_to=dump_to)


def lean_jvms() -> bool:
    """``MIRROR_KAFKA_JVM`` is ``lean``; any value but the two it takes is refused."""
    kind = os.environ.get(JVM_ENV, "").strip().lower() or "kafka"
    if kind not in JVM_KINDS:
        raise EmbeddedBrokerError(
            f"{JVM_ENV} = {kind!r}: 'kafka' (Kafka's own JVM options, the default) or 'lean' "
            "(C1 only and a class archive: quicker starts, for the tests)"
        )
    return kind == "lean"


def _jars(classpath: str) -> list[Path]:
    """The files of a ``-cp`` value, a ``folder/*`` entry as the launcher expands it."""
    files: list[Path] = []
    for entry in classpath.split(os.pathsep):
        if entry.endswith("*"):
            files += sorted(Path(entry[:-1]).glob("*.jar"))
        elif entry:
            files.append(Path(entry))
    return files


def class_archive(java: str, classpath: str) -> Path | None:
    """The class archive of lean Kafka JVMs of this ``java`` and ``classpath``, beside the local
    Spark driver's (None when ``MIRROR_SPARK_CDS=off``). A broker writes it when it is asked to
    (:func:`write_class_archive`); until then JVMs start without one."""
    folder = jvm.cache_folder()
    if folder is None:
        return None
    return folder / f"kafka-{jvm.files_key(java, classpath, _jars(classpath))}.jsa"


def write_class_archive(
    workdir: Path | None = None,
    version: str = kafka_jars.KAFKA_VERSION,
    timeout_s: float = 120,
) -> Path | None:
    """Write the class archive that lean JVMs of release ``version`` map (:func:`class_archive`),
    unless it exists or another process is writing it: a broker is started, given a topic and a
    record, and stopped, and its JVM writes the classes it loaded as it exits (about 10 s). The
    archive is put in place only once a JVM maps it (a truncated one would crash every JVM).
    The archive, or None."""
    from mirror_lib.testing.kafka_broker import KafkaOptions, start_kafka, stop_kafka
    from mirror_lib.testing.kafka_io import create_topic, produce_exact

    java = java_binary()
    archive = class_archive(java, kafka_jars.classpath("kafka", version=version))
    if archive is None or archive.exists() or not lean_jvms():
        return archive if archive is not None and archive.exists() else None
    archive.parent.mkdir(parents=True, exist_ok=True)
    jvm.promote_partial(java, archive)  # one whose writer was killed before it could check it
    if archive.exists():
        return archive
    marker = jvm.dump_marker(archive)
    if not jvm.may_dump(marker):
        return None
    partial = jvm.partial_archive(archive)
    try:
        options = KafkaOptions(version=version, dump_classes=partial)
        brokers = start_kafka(["classes"], workdir, options)
        try:
            bootstrap = brokers[0].bootstrap_servers
            create_topic(bootstrap, "classes", 1)
            produce_exact(bootstrap, "classes", [{"value": b"a record", "partition": 0}])
        finally:
            stop_kafka(brokers, timeout_s)
        if partial.exists() and jvm.archive_usable(java, partial):
            os.replace(partial, archive)
    finally:
        partial.unlink(missing_ok=True)
        marker.unlink(missing_ok=True)
    return archive if archive.exists() else None


def jvm_command(
    heap_mb: tuple[int, int],
    log_option: str,
    classpath: str,
    main: str,
    *args: str,
    dump_to: Path | None = None,
) -> list[str]:
    """``java`` with a heap (initial, maximum MB), Kafka's own JVM options and one logging
    option, running ``main`` from ``classpath``: how every Kafka JVM here starts. Lean
    (``MIRROR_KAFKA_JVM=lean``), it compiles with C1 only and maps its class archive if there
    is one. ``dump_to`` has it write the classes it loaded there at exit instead."""
    java, lean = java_binary(), lean_jvms()
    options = ["-XX:TieredStopAtLevel=1"] if lean else []
    if dump_to is not None:
        options += [f"-XX:ArchiveClassesAtExit={dump_to}", jvm.QUIET_CDS]
    elif lean and (archive := class_archive(java, classpath)) is not None and archive.exists():
        options += [f"-XX:SharedArchiveFile={archive}", jvm.QUIET_CDS]
    return [
        java,
        f"-Xms{heap_mb[0]}m",
        f"-Xmx{heap_mb[1]}m",
        *JVM_OPTIONS,
        *options,
        log_option,
        "-cp",
        classpath,
        main,
        *args,
    ]
