"""The Kafka releases the tests run: which jars each is fetched with, the settings each broker
gets (KRaft 4.x and 3.x, ZooKeeper-mode 2.8), the JVM command, and its ZooKeeper server's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mirror_lib.errors import ConfigError
from mirror_lib.testing import clusters, kafka_broker, kafka_jars, kafka_jvm, zookeeper


def test_a_release_is_named_by_its_version_or_its_major_minor() -> None:
    assert kafka_jars.release("2.8").version == "2.8.2"
    assert kafka_jars.release("2.8.2") is kafka_jars.release("2.8")
    assert kafka_jars.release().version == kafka_jars.KAFKA_VERSION
    assert kafka_jars.release("2.8").zookeeper and not kafka_jars.release("3.9").zookeeper
    with pytest.raises(ConfigError) as info:
        kafka_jars.release("2.7")
    assert "'2.7'" in str(info.value) and "2.8.2, 3.9.1, 4.3.1, 4.4.0" in str(info.value)


def test_each_release_is_fetched_with_the_logging_it_was_built_for() -> None:
    assert kafka_jars.coordinates("kafka") == (
        "org.apache.kafka:kafka_2.13:4.3.1",
        "org.apache.logging.log4j:log4j-slf4j-impl:2.25.3",
    )
    assert kafka_jars.coordinates("kafka", "4.4")[0] == "org.apache.kafka:kafka_2.13:4.4.0"
    assert kafka_jars.release("4.4").log4j2
    old = kafka_jars.coordinates("kafka", "2.8")
    assert old[0] == "org.apache.kafka:kafka_2.13:2.8.2"
    assert "ch.qos.reload4j:reload4j:1.2.25" in old and not kafka_jars.release("2.8").log4j2
    assert not kafka_jars.release("3.9").log4j2


def test_mirrormaker_2_comes_only_at_the_release_maven_central_serves() -> None:
    assert kafka_jars.coordinates("mm2")[0] == "org.apache.kafka:connect-mirror:4.3.1"
    with pytest.raises(ConfigError) as info:
        kafka_jars.coordinates("mm2", "4.4")
    assert "4.3.1" in str(info.value)


def test_an_old_release_is_fetched_into_its_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake mvn that writes one jar: the set lands in ``kafka-2.8.2``, the POM names 2.8.2."""
    monkeypatch.setenv(kafka_jars.CACHE_ENV, str(tmp_path / "cache"))
    fake = tmp_path / "mvn"
    fake.write_text(
        '#!/bin/sh\nfor a; do case "$a" in -f) next=pom;; -DoutputDirectory=*) '
        'out="${a#-DoutputDirectory=}";; *) [ "$next" = pom ] && pom="$a"; next=;; esac; done\n'
        'mkdir -p "$out" && cp "$pom" "$out/pom.jar"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv(kafka_jars.MAVEN_ENV, str(fake))
    folder = kafka_jars.jar_dir("kafka", "2.8")
    assert folder == tmp_path / "cache" / "kafka-2.8.2"
    pom = (folder / "pom.jar").read_text()
    assert "<artifactId>kafka_2.13</artifactId><version>2.8.2</version>" in pom
    assert "reload4j" in pom
    assert kafka_jars.classpath("kafka", version="2.8.2") == f"{folder}/*"


def _broker(version: str, options: kafka_broker.KafkaOptions) -> kafka_broker.KafkaBroker:
    opts = dataclasses.replace(options, version=version)
    keeper = zookeeper.ZooKeeperServer(Path("/w/zookeeper"), 9002, version)
    return kafka_broker.KafkaBroker(
        "x", Path("/w"), 9001, 9002, None, "id", opts, keeper if opts.release.zookeeper else None
    )


def test_a_4x_node_is_broker_and_controller_with_the_standard_authorizer() -> None:
    settings = kafka_broker._settings(_broker("4.4", kafka_broker.OPEN_ACLS))
    assert settings["process.roles"] == "broker,controller"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9002"
    assert settings["authorizer.class.name"] == kafka_broker.STANDARD_AUTHORIZER
    assert settings["share.coordinator.state.topic.replication.factor"] == "1"
    assert "zookeeper.connect" not in settings


def test_a_3x_node_is_kraft_without_the_settings_new_in_4() -> None:
    settings = kafka_broker._settings(_broker("3.9", kafka_broker.OPEN_ACLS))
    assert settings["process.roles"] == "broker,controller"
    assert settings["listeners"].endswith(",CONTROLLER://127.0.0.1:9002")
    assert settings["authorizer.class.name"] == kafka_broker.STANDARD_AUTHORIZER
    assert settings["allow.everyone.if.no.acl.found"] == "true"
    assert not kafka_broker.SINCE_4 & set(settings)


def test_a_28_broker_keeps_its_metadata_in_its_zookeeper() -> None:
    """No KRaft setting, ``broker.id`` and ``zookeeper.connect`` instead, ACLs in ZooKeeper."""
    settings = kafka_broker._settings(_broker("2.8", kafka_broker.OPEN_ACLS))
    assert not (kafka_broker.KRAFT_ONLY | kafka_broker.SINCE_4) & set(settings)
    assert settings["broker.id"] == "1"
    assert settings["zookeeper.connect"] == "127.0.0.1:9002"
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9001"
    assert settings["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT"
    assert settings["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert settings["allow.everyone.if.no.acl.found"] == "true"
    assert settings["transaction.state.log.replication.factor"] == "1"


def test_a_28_broker_has_no_secure_listener() -> None:
    """Its SCRAM users would live in ZooKeeper, which the launcher does not write."""
    secure = kafka_broker.KafkaOptions(secure=kafka_broker.SecureListener({"u": "p"}))
    with pytest.raises(ConfigError) as info:
        kafka_broker._settings(_broker("2.8", secure))
    assert "ZooKeeper-mode Kafka 2.8.2" in str(info.value)


@pytest.mark.parametrize(
    ("version", "option", "config"),
    [
        ("4.4", "-Dlog4j2.configurationFile=/w/log4j2.properties", "log4j2.properties"),
        ("3.9", "-Dlog4j.configuration=file:/w/log4j.properties", "log4j.properties"),
        ("2.8", "-Dlog4j.configuration=file:/w/log4j.properties", "log4j.properties"),
    ],
)
def test_each_release_runs_from_its_jars_with_its_logging(
    version: str, option: str, config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka_jars, "jar_dir", lambda name, v: Path(f"/jars/{name}-{v}"))
    monkeypatch.setattr(kafka_jvm, "java_binary", lambda: "java")
    command = kafka_broker._java_cmd(_broker(version, kafka_broker.KafkaOptions()), "kafka.Kafka")
    assert option in command
    assert command[command.index("-cp") + 1] == f"/jars/kafka-{version}/*"
    assert "-XX:MaxGCPauseMillis=20" in command and command[-1] == "kafka.Kafka"
    kafka_jvm.write_logging(tmp_path, version)
    assert [p.name for p in tmp_path.iterdir()] == [config]
    assert "kafka.request.logger" in (tmp_path / config).read_text()


def test_zookeeper_runs_on_loopback_from_the_brokers_jars(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_jars, "jar_dir", lambda name, v: Path(f"/jars/{name}-{v}"))
    monkeypatch.setattr(kafka_jvm, "java_binary", lambda: "java")
    keeper = zookeeper.ZooKeeperServer(Path("/w/zk"), 9002, "2.8.2")
    assert keeper.connect == "127.0.0.1:9002"
    cfg = keeper.settings()
    assert cfg["clientPort"] == "9002" and cfg["clientPortAddress"] == "127.0.0.1"
    assert cfg["dataDir"] == "/w/zk/data" and cfg["admin.enableServer"] == "false"
    assert cfg["4lw.commands.whitelist"] == "ruok"
    command = keeper.command()
    assert command[1:3] == ["-Xms128m", "-Xmx128m"]
    assert command[command.index("-cp") + 1] == "/jars/kafka-2.8.2/*"
    assert command[-2:] == [zookeeper.MAIN_CLASS, "/w/zk/zoo.cfg"]


def test_a_zookeeper_broker_waits_for_the_topics_of_its_log_directory(tmp_path: Path) -> None:
    for name in ("kept-0", "kept-1", "__consumer_offsets-3", "gone-0.9f2c-delete", "a-b-c-12"):
        (tmp_path / name).mkdir()
    (tmp_path / "meta.properties").write_text("")
    assert kafka_broker._topics_on_disk(tmp_path) == {"kept", "__consumer_offsets", "a-b-c"}
    assert kafka_broker._topics_on_disk(tmp_path / "missing") == set()


def test_the_test_clusters_release_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(clusters.VERSION_ENV, raising=False)
    assert clusters.kafka_version() == kafka_jars.KAFKA_VERSION
    monkeypatch.setenv(clusters.VERSION_ENV, "4.4")
    assert clusters.kafka_version() == "4.4.0"
    monkeypatch.setenv(clusters.VERSION_ENV, "5.0")
    with pytest.raises(ConfigError) as info:
        clusters.kafka_version()
    assert clusters.VERSION_ENV in str(info.value) and "'5.0'" in str(info.value)
    assert "environment" in str(info.value)
