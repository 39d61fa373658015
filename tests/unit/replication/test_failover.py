"""`mirror failover`: a group's checkpoints committed on the target, with their metadata."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.kafka import mirror_client
from mirror_lib.mm2.formats import Checkpoint
from mirror_lib.replication import failover
from mirror_lib.replication.failover import failover_group
from tests.helpers.fake_groups import FakeGroupAdmin, topic_reader
from tests.helpers.fake_kafka import FakeProducer

PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "127.0.0.1:1",
    "B.bootstrap.servers": "127.0.0.1:2",
    "A->B.enabled": "true",
}


@pytest.fixture
def target(monkeypatch: pytest.MonkeyPatch) -> FakeGroupAdmin:
    """B: the group's checkpoints (A.orders-0 at 400, A.orders-1 at 50) and its offsets there
    (900: consumers ran on B after an earlier failover; 10: behind)."""
    log = FakeProducer()
    for cp in (
        Checkpoint("app", "A.orders", 0, 380, 400, "v0"),
        Checkpoint("app", "A.orders", 1, 45, 50, "v1"),
    ):
        log.produce("A.checkpoints.internal", cp.value(), cp.key(), partition=0)
    log.flush()
    admin = FakeGroupAdmin({"app": {("A.orders", 0): (900, ""), ("A.orders", 1): (10, "")}})
    monkeypatch.setattr(mirror_client, "read_topic", topic_reader(log))
    monkeypatch.setattr(failover, "_admin", lambda config, alias: admin)
    return admin


def test_apply_commits_each_checkpoints_metadata(target) -> None:
    """MirrorClient gives MM2's offset and metadata; a failover commits both."""
    target.offsets["app"] = {}  # nothing committed on B yet
    failover_group(parse_config(PROPS), "app", "A", "B", apply=True)
    assert target.altered == [("app", "A.orders", 0, 400, "v0"), ("app", "A.orders", 1, 50, "v1")]
