"""The Apache Kafka launcher: ready when Metadata answers, stopped by PID, and a killed broker
restarted on the same ports and log directory comes back with its data."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from mirror_lib.errors import EmbeddedBrokerError
from mirror_lib.spark import jvm
from mirror_lib.testing import kafka_broker, kafka_jvm, processes
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact

pytestmark = pytest.mark.real_kafka


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_killed_broker_comes_back_with_its_data(tmp_path: Path) -> None:
    (broker,) = kafka_broker.start_kafka(["solo"], tmp_path)
    try:
        assert broker.is_running() and _listening(broker.port)
        assert broker.log_dir.is_dir() and broker.log_path.is_file()
        create_topic(broker.bootstrap_servers, "kept", partitions=2)
        rows = [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2} for i in range(10)]
        produce_exact(broker.bootstrap_servers, "kept", rows)
        pid, port = broker.pid, broker.port
        broker.kill()
        assert not broker.is_running()
        with pytest.raises(ProcessLookupError):
            os.kill(pid or 0, 0)
        broker.start()
        assert broker.pid != pid and broker.port == port
        values = sorted(r.value or b"" for r in consume_all(broker.bootstrap_servers, "kept"))
        assert values == sorted(r["value"] for r in rows)
        assert broker.log_path.read_text().count("==== start") == 2  # one log, both runs
    finally:
        kafka_broker.stop_kafka([broker])
    assert not broker.is_running() and broker.pid not in processes._LIVE
    deadline = time.monotonic() + 10
    while _listening(broker.port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _listening(broker.port)


def test_two_clusters_have_their_own_ids_ports_and_folders(tmp_path: Path) -> None:
    with kafka_broker.kafka_clusters(["a", "b"], tmp_path) as (a, b):
        assert a.cluster_id != b.cluster_id
        assert {a.port, a.controller_port}.isdisjoint({b.port, b.controller_port})
        assert a.log_dir != b.log_dir
        text = (a.workdir / "server.properties").read_text()
        assert f"listeners=PLAINTEXT://127.0.0.1:{a.port}," in text
    assert not a.is_running() and not b.is_running()


def test_a_broker_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    bad = kafka_broker.KafkaOptions(settings={"num.partitions": "not-a-number"})
    live = set(processes._LIVE)
    with pytest.raises(EmbeddedBrokerError) as info:
        kafka_broker.start_kafka(["bad"], tmp_path, bad)
    assert "bad" in str(info.value) and "num.partitions" in str(info.value)
    assert set(processes._LIVE) == live


def test_a_lean_broker_maps_the_class_archive_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive is written by one broker's exit, checked, then mapped by the next lean JVM,
    which serves records; a second writer finds it and starts nothing."""
    monkeypatch.setenv(jvm.CDS_ENV, str(tmp_path / "cds"))
    monkeypatch.setenv(kafka_jvm.JVM_ENV, "lean")
    archive = kafka_jvm.write_class_archive(tmp_path / "write")
    assert archive is not None and archive.is_file() and archive.parent == tmp_path / "cds"
    assert sorted(p.name for p in archive.parent.iterdir()) == [archive.name]  # no marker left
    live = set(processes._LIVE)
    assert kafka_jvm.write_class_archive(tmp_path / "again") == archive
    assert set(processes._LIVE) == live and not (tmp_path / "again").exists()
    (broker,) = kafka_broker.start_kafka(["lean"], tmp_path / "run")
    try:
        with open(f"/proc/{broker.pid}/cmdline") as f:
            options = f.read().split("\0")
        assert f"-XX:SharedArchiveFile={archive}" in options
        assert "-XX:TieredStopAtLevel=1" in options
        with open(f"/proc/{broker.pid}/maps") as f:
            assert str(archive) in f.read()  # mapped, not skipped as unusable
        create_topic(broker.bootstrap_servers, "lean", partitions=1)
        produce_exact(broker.bootstrap_servers, "lean", [{"value": b"v", "partition": 0}])
        assert [r.value for r in consume_all(broker.bootstrap_servers, "lean")] == [b"v"]
    finally:
        kafka_broker.stop_kafka([broker])
