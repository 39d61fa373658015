"""The multi-broker launcher on Apache Kafka: three brokers and three controllers with links
(docs/testing.md#production-shapes). Every topic has three replicas and ``min.insync.replicas =
2``, internal topics included; a broker cut off is fenced, its partitions' in-sync replicas shrink
and writes go on; two cut off leave too few in-sync replicas to write; the active controller's
loss elects another; a killed broker comes back with its data."""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import ConfigResource, OffsetSpec

from mirror_lib.kafka.admin import admin_client, left_cluster
from mirror_lib.testing.kafka_cluster import PRODUCTION, KafkaCluster, start_cluster
from mirror_lib.testing.kafka_io import commit_group, consume_all, create_topic, produce_exact
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.real_kafka, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    started = start_cluster("B", tmp_path_factory.mktemp("cluster"), PRODUCTION)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(autouse=True)
def whole(cluster: KafkaCluster) -> None:
    """Each test starts on a whole cluster, whatever the one before cut, stopped or killed."""
    cluster.heal()


def produce(bootstrap: str, topic: str, n: int, timeout_s: float = 20) -> list[str]:
    """Delivery results (error names, or "ok") of ``n`` records, acks=all."""
    results: list[str] = []
    producer = ck.Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": int(timeout_s * 1000),
        "enable.idempotence": True, "log_level": 0,
    })  # fmt: skip
    for i in range(n):
        producer.produce(
            topic, b"v%d" % i, partition=i % 3,
            on_delivery=lambda e, _m: results.append(e.name() if e else "ok"),
        )  # fmt: skip
    producer.flush(timeout_s + 10)
    return results


def isr(cluster: KafkaCluster, topic: str) -> dict[int, list[int]]:
    parts = cluster.metadata(topic).topics[topic].partitions
    return {p: sorted(x.isrs) for p, x in parts.items()}


def test_every_topic_internal_ones_included_has_three_replicas_and_min_isr_2(cluster) -> None:
    create_topic(cluster.client_bootstrap, "rf", 3)
    commit_group(cluster.bootstrap_servers, "g1", [ck.TopicPartition("rf", 0, 0)])
    admin = cluster.admin()
    for topic in ("rf", "__consumer_offsets"):
        parts = cluster.metadata(topic).topics[topic].partitions.values()
        assert {len(p.replicas) for p in parts} == {3}, topic
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        assert admin.describe_configs([res])[res].result(30)["min.insync.replicas"].value == "2"


def test_one_broker_cut_off_is_fenced_and_writes_go_on_two_cannot_write(cluster) -> None:
    create_topic(cluster.client_bootstrap, "cut", 3)
    first, second = 2, 3
    cluster.cut(first)
    try:
        wait_for(lambda: first not in cluster.live_brokers(), 60, f"broker {first} fenced")
        wait_for(lambda: all(len(i) == 2 for i in isr(cluster, "cut").values()), 60, "ISR of 2")
        assert set(produce(cluster.client_bootstrap, "cut", 30)) == {"ok"}
        cluster.cut(second)
        wait_for(lambda: second not in cluster.live_brokers(), 60, f"broker {second} fenced")
        assert "ok" not in produce(cluster.client_bootstrap, "cut", 3, timeout_s=10)
    finally:
        cluster.mend(first)
        cluster.mend(second)
    cluster.wait_in_sync()
    assert set(produce(cluster.client_bootstrap, "cut", 30)) == {"ok"}


def test_a_stopped_broker_is_named_as_gone_from_a_clients_metadata(cluster) -> None:
    """What a hung transactional call, and a wait the source held, are told by
    (``left_cluster``): Kafka's own metadata, as a producer and a consumer get it, keeps a
    stopped broker among the replicas and not among the brokers, and names nothing once it is
    back."""
    create_topic(cluster.client_bootstrap, "left", 3)
    producer = ck.Producer({"bootstrap.servers": cluster.client_bootstrap, "log_level": 0})
    consumer = ck.Consumer(
        {"bootstrap.servers": cluster.client_bootstrap, "group.id": "left", "log_level": 0}
    )
    assert left_cluster(producer, 5) is None and left_cluster(consumer, 5) is None
    victim = cluster.busiest_leader("left")
    led = [("left", p) for p in range(3)]
    cluster.stop_node(victim)
    try:
        said = f"broker {victim} had left the cluster"
        wait_for(lambda: left_cluster(producer, 5) == said, 60, said)
        assert left_cluster(consumer, 5, led) == said
    finally:
        cluster.start_node(victim)
        consumer.close()
    cluster.wait_in_sync()
    wait_for(lambda: left_cluster(producer, 5) is None, 60, "no broker gone")


def test_the_active_controllers_loss_elects_another(cluster) -> None:
    before = cluster.active_controller()
    cluster.kill_node(before)
    try:
        after = wait_for(
            lambda: (c := cluster.active_controller()) != before and c, 60, "a new controller"
        )
        assert after in {c.node_id for c in cluster.controllers}

        def created() -> bool:  # a request forwarded to the lost controller times out first
            try:
                create_topic(cluster.client_bootstrap, "after-controller", 1, timeout_s=10)
            except Exception as exc:
                return "TOPIC_ALREADY_EXISTS" in str(exc)
            return True

        wait_for(created, 120, "a topic created through the new controller")
    finally:
        cluster.start_node(before)


def test_a_killed_broker_comes_back_with_its_data(cluster, tmp_path: Path) -> None:
    create_topic(cluster.bootstrap_servers, "kept", 3)
    rows = [{"value": b"v%d" % i, "partition": i % 3} for i in range(30)]
    produce_exact(cluster.bootstrap_servers, "kept", rows)
    victim = cluster.busiest_leader("kept")
    node = cluster.node(victim)
    pid = node.pid
    starts = node.log_path.read_text().count("==== start")  # an earlier test may restart it too
    cluster.kill_node(victim)
    started = time.monotonic()
    cluster.start_node(victim)
    cluster.wait_in_sync()
    assert node.pid != pid and time.monotonic() - started < 600
    assert node.log_path.read_text().count("==== start") == starts + 1
    expected = sorted(r["value"] for r in rows)

    def read() -> list[bytes]:
        return sorted(r.value or b"" for r in consume_all(cluster.bootstrap_servers, "kept"))

    # a full run of the suite once read all but the last record of a partition (v29) here:
    # likely the read to the end stopping at a high watermark that lags for a moment after
    # leadership moved back. Read until every record is back, with a deadline; a record lost
    # for good still fails the test
    wait_for(lambda: read() == expected, 60, "every record read back", detail=lambda: str(read()))


def test_admin_requests_for_a_killed_leaders_partitions_do_not_spin(cluster) -> None:
    """librdkafka 2.16's admin client, connecting to brokers only on demand, retried a killed
    leader without a backoff: about 1,800 connect() calls and a core of CPU a second, until its
    request timed out. On 2 cores that starved the source's controllers, which then took minutes
    to move the leaders (issue 51). The product's admin clients connect to every broker."""
    create_topic(cluster.bootstrap_servers, "leader-killed", 3)
    produce_exact(
        cluster.bootstrap_servers,
        "leader-killed",
        [{"value": b"v", "partition": p} for p in range(3)],
    )
    admin = admin_client({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.list_topics(timeout=10)
    victim = cluster.busiest_leader("leader-killed")
    led = [p for p, leader in cluster.leaders("leader-killed").items() if leader == victim]
    cluster.kill_node(victim)
    try:
        before = _cpu_s()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            futures = admin.list_offsets(
                {ck.TopicPartition("leader-killed", p): OffsetSpec.latest() for p in led},
                request_timeout=2,
            )
            for fut in futures.values():
                with contextlib.suppress(ck.KafkaException):
                    fut.result()
        spent = _cpu_s() - before
    finally:
        cluster.start_node(victim)
    assert spent < 1.0, f"{spent:.1f} CPU-s in 5 s of admin requests toward a killed leader"


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
