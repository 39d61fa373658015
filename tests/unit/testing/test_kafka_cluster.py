"""The multi-broker launcher's pure parts: each node's settings, and the coordinator hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror_lib.errors import ConfigError
from mirror_lib.testing import kafka_cluster as kc
from mirror_lib.testing import kafka_nodes as kn


def _layout(shape: kc.ClusterShape, root: Path) -> kc.KafkaCluster:
    """The nodes of a cluster of ``shape`` with their settings, links on made-up ports."""
    nodes, links = kn.layout(root / "kafka-B", shape, set())
    cluster = kc.KafkaCluster("B", root / "kafka-B", "id", shape, nodes)
    ports = {name: 40000 + i for i, name in enumerate(sorted(links))}
    for node in cluster.nodes:
        kn.node_settings(node, cluster.nodes, shape, ports)
    if links:
        cluster.client_ports = {b.node_id: ports[f"clients>{b.node_id}"] for b in cluster.brokers}
    return cluster


def test_combined_nodes_are_brokers_and_voters_with_rf_3_and_min_isr_2_everywhere(
    tmp_path: Path,
) -> None:
    cluster = _layout(kn.COMBINED, tmp_path)
    assert [n.roles for n in cluster.nodes] == [("broker", "controller")] * 3
    for node in cluster.nodes:
        s = node.settings
        assert s["default.replication.factor"] == "3" and s["min.insync.replicas"] == "2"
        assert s["offsets.topic.replication.factor"] == "3"
        assert s["transaction.state.log.replication.factor"] == "3"
        assert s["transaction.state.log.min.isr"] == "2"
        assert s["inter.broker.listener.name"] == "PLAINTEXT"
        voters = s["controller.quorum.voters"].split(",")
        assert [v.split("@")[0] for v in voters] == ["1", "2", "3"]
    assert cluster.client_bootstrap == cluster.bootstrap_servers  # no links


def test_with_links_each_direction_of_each_pair_has_its_own_path(tmp_path: Path) -> None:
    cluster = _layout(kn.PRODUCTION, tmp_path)
    brokers, controllers = cluster.brokers, cluster.controllers
    assert [b.node_id for b in brokers] == [1, 2, 3]
    assert [c.node_id for c in controllers] == [101, 102, 103]
    one = cluster.node(1).settings
    assert one["process.roles"] == "broker" and one["inter.broker.listener.name"] == "REPL1"
    advertised = dict(x.split("://", 1) for x in one["advertised.listeners"].split(","))
    # follower 2 reaches leader 1 through the link 2>1, and leader 1's own listener is direct
    assert advertised["REPL2"] != advertised["REPL3"]
    assert advertised["REPL1"] == f"127.0.0.1:{cluster.node(1).ports['REPL1']}"
    assert advertised["PLAINTEXT"] == f"127.0.0.1:{cluster.node(1).direct_port}"
    assert advertised["CLIENT"] != f"127.0.0.1:{cluster.node(1).ports['CLIENT']}"  # a link
    # brokers reach the controllers through links; controllers reach each other directly
    ctrl = cluster.node(101)
    direct = f"127.0.0.1:{ctrl.ports['CONTROLLER']}"
    assert f"101@{direct}" not in one["controller.quorum.voters"]
    assert f"101@{direct}" in cluster.node(102).settings["controller.quorum.voters"]
    assert "advertised.listeners" not in ctrl.settings
    assert ctrl.settings["default.replication.factor"] == "3"  # KRaft applies topic defaults there
    assert cluster.client_bootstrap != cluster.bootstrap_servers


def test_a_shape_that_cannot_hold_its_min_isr_is_refused() -> None:
    with pytest.raises(ConfigError, match="min_insync"):
        kn.ClusterShape(brokers=1, min_insync=2).check()


def test_the_coordinator_partition_uses_javas_string_hash() -> None:
    """Kafka picks a transactional id's __transaction_state partition with String.hashCode and
    Utils.abs (0 for Integer.MIN_VALUE)."""
    assert kc._java_hash("hello") == 99162322
    assert kc._java_hash("polygenelubricants") == -(2**31)
    assert kc._java_abs(kc._java_hash("polygenelubricants")) == 0
    assert kc._java_abs(-5) == 5


@pytest.mark.parametrize(("kind", "brokers"), [("kafka", 2), ("tansu", 3)])
def test_start_clusters_refuses_a_broker_count_it_cannot_start(tmp_path, kind, brokers):
    from mirror_lib.testing.clusters import start_clusters

    with pytest.raises(ConfigError, match=f"brokers = {brokers}"):
        start_clusters(["A"], tmp_path, kind, brokers)
    assert not list(tmp_path.iterdir())  # refused before anything started
