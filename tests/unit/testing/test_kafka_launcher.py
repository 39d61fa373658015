"""The Kafka launcher's pure parts: the jar fetch's failure and the broker settings it writes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mirror_lib.errors import EmbeddedBrokerError
from mirror_lib.spark import jvm
from mirror_lib.testing import kafka_broker, kafka_jars, kafka_jvm


def test_jar_fetch_failure_names_what_was_tried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(kafka_jars.CACHE_ENV, str(tmp_path / "cache"))
    fake = tmp_path / "mvn"
    fake.write_text(
        "#!/bin/sh\necho 'Could not transfer artifact: network is unreachable'\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv(kafka_jars.MAVEN_ENV, str(fake))
    with pytest.raises(EmbeddedBrokerError) as info:
        kafka_jars.jar_dir("kafka")
    text = str(info.value)
    assert f"org.apache.kafka:kafka_2.13:{kafka_jars.KAFKA_VERSION}" in text
    assert "Maven Central" in text and "dependency:copy-dependencies" in text
    assert "network is unreachable" in text
    assert not (tmp_path / "cache" / f"kafka-{kafka_jars.KAFKA_VERSION}").exists()


def _broker(options: kafka_broker.KafkaOptions) -> kafka_broker.KafkaBroker:
    secure = 9003 if options.secure else None
    return kafka_broker.KafkaBroker("x", Path("/w"), 9001, 9002, secure, "id", options)


def test_settings_of_a_plain_cluster() -> None:
    settings = kafka_broker._settings(_broker(kafka_broker.KafkaOptions()))
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9001,CONTROLLER://127.0.0.1:9002"
    assert settings["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9001"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9002"
    assert settings["log.dirs"] == "/w/data"
    assert "authorizer.class.name" not in settings


def test_settings_of_a_secured_cluster_with_an_authorizer_and_a_proxy() -> None:
    options = kafka_broker.KafkaOptions(
        secure=kafka_broker.SecureListener({"u": "p"}, tls_pem=Path("/w/broker.pem")),
        authorizer=True,
        proxied=(9004, 9005),
        settings={"log.retention.check.interval.ms": "500"},
    )
    settings = kafka_broker._settings(_broker(options))
    assert settings["listener.security.protocol.map"] == (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT,SECURE:SASL_SSL"
    )
    assert "PROXIED://127.0.0.1:9005" in settings["advertised.listeners"]
    assert "PROXIED://127.0.0.1:9004" in settings["listeners"]
    assert "SECURE://127.0.0.1:9003" in settings["advertised.listeners"]
    assert settings["listener.name.secure.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert settings["listener.name.secure.ssl.keystore.location"] == "/w/broker.pem"
    assert settings["super.users"] == "User:ANONYMOUS"
    assert settings["log.retention.check.interval.ms"] == "500"
    plain = kafka_broker.SecureListener({"u": "p"})
    assert plain.protocol == "SASL_PLAINTEXT"


def test_the_broker_runs_with_kafkas_own_jvm_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bin/kafka-run-class.sh's G1 options and a fixed heap: with G1's default pause target a
    broker paused for up to 240 ms under the bench's steady load."""
    monkeypatch.setattr(kafka_jars, "classpath", lambda *_names, **_release: "/jars/*")
    monkeypatch.setattr(kafka_jvm, "java_binary", lambda: "java")
    monkeypatch.delenv(kafka_jvm.HEAP_ENV, raising=False)
    monkeypatch.delenv(kafka_jvm.JVM_ENV, raising=False)
    command = kafka_broker._java_cmd(_broker(kafka_broker.KafkaOptions()), "kafka.Kafka", "c")
    assert command[1:3] == ["-Xms512m", "-Xmx512m"]
    assert "-XX:MaxGCPauseMillis=20" in command and "-XX:+UseG1GC" in command
    assert not [o for o in command if "Tiered" in o or "Archive" in o]  # as Kafka's scripts
    assert command[-2:] == ["kafka.Kafka", "c"]
    monkeypatch.setenv(kafka_jvm.HEAP_ENV, "1024")
    command = kafka_broker._java_cmd(_broker(kafka_broker.KafkaOptions()), "kafka.Kafka")
    assert command[1:3] == ["-Xms1024m", "-Xmx1024m"]


def _archive_options(command: list[str]) -> list[str]:
    return [o for o in command if "Archive" in o]


def test_lean_jvms_compile_with_c1_and_map_the_class_archive_once_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MIRROR_KAFKA_JVM=lean (the tests'): C1 only; the archive of this java and class path is
    mapped once it exists, and a JVM asked to write it writes it instead of mapping it."""
    monkeypatch.setattr(kafka_jars, "classpath", lambda *_names, **_release: "/jars/*")
    monkeypatch.setattr(kafka_jvm, "java_binary", lambda: "java")
    monkeypatch.setenv(jvm.CDS_ENV, str(tmp_path))
    monkeypatch.setenv(kafka_jvm.JVM_ENV, "lean")
    broker = _broker(kafka_broker.KafkaOptions())
    command = kafka_broker._java_cmd(broker, "kafka.Kafka")
    assert "-XX:TieredStopAtLevel=1" in command and not _archive_options(command)
    archive = kafka_jvm.class_archive("java", "/jars/*")
    assert archive is not None and archive.parent == tmp_path
    archive.write_bytes(b"classes")
    command = kafka_broker._java_cmd(broker, "kafka.Kafka")
    assert _archive_options(command) == [f"-XX:SharedArchiveFile={archive}"]
    dump = tmp_path / "new.jsa"
    command = kafka_broker._java_cmd(broker, "kafka.Kafka", dump_to=dump)
    assert _archive_options(command) == [f"-XX:ArchiveClassesAtExit={dump}"]
    monkeypatch.setenv(jvm.CDS_ENV, "off")
    assert kafka_jvm.class_archive("java", "/jars/*") is None
    assert not _archive_options(kafka_broker._java_cmd(broker, "kafka.Kafka"))
    monkeypatch.setenv(kafka_jvm.JVM_ENV, "fast")
    with pytest.raises(EmbeddedBrokerError) as info:
        kafka_broker._java_cmd(broker, "kafka.Kafka")
    assert all(w in str(info.value) for w in (kafka_jvm.JVM_ENV, "'fast'", "'kafka'", "'lean'"))


def test_a_class_archive_belongs_to_its_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A jar replaced (another release in the same folder) means another archive: the JVM would
    refuse the old one."""
    monkeypatch.setenv(jvm.CDS_ENV, str(tmp_path / "cds"))
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "kafka.jar").write_bytes(b"1")
    first = kafka_jvm.class_archive("java", f"{jars}/*")
    assert first == kafka_jvm.class_archive("java", f"{jars}/*")
    (jars / "kafka.jar").write_bytes(b"22")
    assert kafka_jvm.class_archive("java", f"{jars}/*") != first
    assert kafka_jvm.class_archive("java", f"{jars}/*:{tmp_path}/other.jar") != first


@pytest.mark.skipif(shutil.which("java") is None, reason="needs java")
def test_an_archive_left_by_a_killed_writer_is_checked_and_put_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test worker killed after its broker wrote the archive, before it could check it,
    leaves ``<archive>.<pid>.partial``: the next writer checks that one and puts it in place
    (a truncated one would be removed) instead of leaving it and starting a broker."""
    java = str(shutil.which("java"))
    monkeypatch.setattr(kafka_jars, "classpath", lambda *_names, **_release: "/jars/*")
    monkeypatch.setattr(kafka_jvm, "java_binary", lambda: java)
    monkeypatch.setenv(jvm.CDS_ENV, str(tmp_path))
    monkeypatch.setenv(kafka_jvm.JVM_ENV, "lean")
    monkeypatch.setattr(kafka_broker, "start_kafka", _no_broker)
    archive = kafka_jvm.class_archive(java, "/jars/*")
    assert archive is not None
    left = archive.with_name(f"{archive.name}.{2**31 - 1}.partial")  # no such process
    subprocess.run(
        [java, f"-XX:ArchiveClassesAtExit={left}", jvm.QUIET_CDS, "-version"],
        check=True,
        capture_output=True,
    )
    assert kafka_jvm.write_class_archive(tmp_path / "work") == archive
    assert archive.is_file() and not left.exists()


def _no_broker(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("a broker was started to write an archive already written")


def test_mm2_gets_the_heap_of_kafkas_own_start_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bin/connect-mirror-maker.sh: -Xms256M -Xmx2G (with 512 MB four tasks ran out of heap)."""
    from mirror_lib.testing import mm2

    monkeypatch.setattr(kafka_jars, "classpath", lambda _name: "/jars/*")
    monkeypatch.delenv(mm2.HEAP_ENV, raising=False)
    command = mm2.Mm2Process({"clusters": "A, B"}, tmp_path).command()
    assert command[1:3] == ["-Xms256m", "-Xmx2048m"]
    assert "-XX:+UseG1GC" in command and command[-2:] == [
        mm2.MAIN_CLASS,
        str(tmp_path / "mm2.properties"),
    ]
    monkeypatch.setenv(mm2.HEAP_ENV, "768")
    assert "-Xmx768m" in mm2.Mm2Process({}, tmp_path).command()
