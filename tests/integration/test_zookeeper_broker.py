"""The ZooKeeper-mode launcher (Kafka 2.8): a broker killed comes back on its data while its
ZooKeeper server stays up, and both stop by PID. (Each release starting from its own jars,
taking topics and answering is part of the version tier, test_versions.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror_lib.testing import kafka_broker, processes
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact

pytestmark = pytest.mark.real_kafka


def test_a_zookeeper_release_runs_beside_its_zookeeper_and_comes_back(tmp_path: Path) -> None:
    (broker,) = kafka_broker.start_kafka(["zk"], tmp_path, kafka_broker.KafkaOptions(version="2.8"))
    keeper = broker.zookeeper
    assert keeper is not None
    try:
        assert keeper.is_running() and keeper.port == broker.controller_port
        assert keeper.data_dir.is_dir() and keeper.log_path.is_file()
        assert keeper.workdir.parent == broker.workdir
        text = (broker.workdir / "server.properties").read_text()
        assert f"zookeeper.connect=127.0.0.1:{keeper.port}" in text
        assert "process.roles" not in text
        assert "Kafka version: 2.8.2" in broker.log_path.read_text()
        create_topic(broker.bootstrap_servers, "kept", partitions=2)
        rows = [{"value": b"v%d" % i, "partition": i % 2} for i in range(6)]
        produce_exact(broker.bootstrap_servers, "kept", rows)
        keeper_pid = keeper.pid
        broker.kill()
        assert not broker.is_running() and keeper.is_running()
        broker.start()
        assert keeper.pid == keeper_pid
        got = consume_all(broker.bootstrap_servers, "kept")
        assert sorted(r.value or b"" for r in got) == sorted(r["value"] for r in rows)
    finally:
        kafka_broker.stop_kafka([broker])
    assert not broker.is_running() and not keeper.is_running()
    assert keeper.pid not in processes._LIVE and broker.pid not in processes._LIVE
