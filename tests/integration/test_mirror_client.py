"""MirrorClient against a broker: heartbeat/checkpoint topics written in MM2's exact formats.

Heartbeat and checkpoint topic names are fixed by the policy, so every test uses cluster aliases
made unique with a uuid (``S1a2b3c4d``): the shared brokers may hold other tests' topics.
"""

from __future__ import annotations

import uuid

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.kafka.mirror_client import MirrorClient
from mirror_lib.mm2.formats import Checkpoint, Heartbeat
from mirror_lib.mm2.policy import DefaultReplicationPolicy
from mirror_lib.testing.kafka_io import create_topic, produce_exact

pytestmark = pytest.mark.integration

CORRUPT = {"key": b"\x00\x05ab", "value": b"\x00\x00\x01"}  # truncated key and value


def _alias(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _hb(source: str, target: str, ts: int) -> dict[str, bytes]:
    hb = Heartbeat(source, target, ts)
    return {"key": hb.key(), "value": hb.value()}


def _cp(group: str, topic: str, partition: int, upstream: int, downstream: int) -> dict:
    cp = Checkpoint(group, topic, partition, upstream, downstream)
    return {"key": cp.key(), "value": cp.value()}


def _client(bootstrap: str) -> MirrorClient:
    return MirrorClient({"bootstrap.servers": bootstrap}, DefaultReplicationPolicy(), timeout_s=20)


def test_mirror_client_topics_checkpoints_and_heartbeats(brokers) -> None:
    s, t, u = _alias("S"), _alias("T"), _alias("U")
    tgt = brokers.target
    hb_direct, hb_two_hops = f"{s}.heartbeats", f"{t}.{u}.heartbeats"
    checkpoints, orders = f"{s}.checkpoints.internal", f"{s}.orders"
    for topic in (hb_direct, hb_two_hops, checkpoints):
        create_topic(tgt, topic)
    create_topic(tgt, orders, partitions=2)
    produce_exact(tgt, hb_direct, [_hb(u, s, 1000), _hb(u, s, 3000), CORRUPT, _hb(u, s, 2000)])
    produce_exact(tgt, hb_two_hops, [_hb(t, u, 500), _hb(s, u, 700)])
    produce_exact(
        tgt,
        checkpoints,
        [
            _cp("g1", orders, 0, 10, 8),
            _cp("g1", orders, 0, 20, 18),
            _cp("g1", orders, 1, 5, 5),
            _cp("g2", orders, 0, 7, 6),
            CORRUPT,
            _cp("g1", orders, 1, 9, 9),
        ],
    )
    client = _client(tgt)

    assert {hb_direct, hb_two_hops} <= client.heartbeat_topics()
    assert orders not in client.heartbeat_topics()
    assert checkpoints in client.checkpoint_topics()
    assert {s, t, u} <= client.upstream_clusters()
    assert client.replication_hops(s) == 1
    assert client.replication_hops(t) == 1
    assert client.replication_hops(u) == 2
    assert client.replication_hops(_alias("nobody")) == -1
    assert client.remote_topics(s) == {orders, hb_direct}  # checkpoints are internal
    assert client.remote_topics(t) == {hb_two_hops}
    assert {orders, hb_direct, hb_two_hops} <= client.remote_topics()
    assert checkpoints not in client.remote_topics()

    g1 = {(orders, 0): 18, (orders, 1): 9}
    assert client.remote_consumer_offsets("g1", s) == g1
    assert client.skipped_records == 1
    assert client.translate_offsets(s, "g2") == {(orders, 0): 6}
    assert client.remote_consumer_offsets("nobody", s) == {}
    assert client.remote_consumer_offsets("g1", _alias("missing")) == {}  # no such topic
    assert client.consumer_offsets_all_groups(s) == {"g1": g1, "g2": {(orders, 0): 6}}
    assert client.skipped_records == 4  # each scan meets the corrupt record again

    ours = {(u, s): 3000, (t, u): 500, (s, u): 700}
    assert client.latest_heartbeats([hb_direct, hb_two_hops]) == ours
    assert client.skipped_records == 5
    everything = client.latest_heartbeats()  # every heartbeat topic on the shared broker
    assert {k: v for k, v in everything.items() if k in ours} == ours
    assert client.skipped_records >= 6


def test_reads_records_written_by_real_mm2(brokers) -> None:
    """Raw bytes of docs/mm2-reference.md#wire-formats worked examples, as MM2 writes them."""
    primary = _alias("primary")
    checkpoints, heartbeats = f"{primary}.checkpoints.internal", f"{primary}.heartbeats"
    key = bytes.fromhex(
        "0010 636f6e73756d65722d67726f75702d310014 7072696d6172792e746573742d746f7069632d3100000003"
    )
    value = bytes.fromhex("0000 00000000000003e8 00000000000003e6 0000")
    small = (bytes.fromhex("000167 000174 00000000"), bytes.fromhex("0000" + "00" * 7 + "05"
             + "00" * 7 + "07" + "0000"))  # fmt: skip
    create_topic(brokers.target, checkpoints)
    create_topic(brokers.target, heartbeats)
    produce_exact(
        brokers.target,
        checkpoints,
        [{"key": key, "value": value}, {"key": small[0], "value": small[1]}],
    )
    hb = {"key": bytes.fromhex("000141 000142"), "value": bytes.fromhex("0000 0000018bcfe56800")}
    produce_exact(brokers.target, heartbeats, [hb])
    client = _client(brokers.target)

    assert client.remote_consumer_offsets("consumer-group-1", primary) == {
        ("primary.test-topic-1", 3): 998
    }
    assert client.consumer_offsets_all_groups(primary) == {
        "consumer-group-1": {("primary.test-topic-1", 3): 998},
        "g": {("t", 0): 7},
    }
    assert client.latest_heartbeats([heartbeats]) == {("A", "B"): 1_700_000_000_000}
    assert client.skipped_records == 0
    assert client.replication_hops(primary) == 1
    assert primary in client.upstream_clusters()


def test_from_config_uses_cluster_and_flow_policy(brokers) -> None:
    s = _alias("S")
    props = {
        "clusters": f"{s}, L",
        f"{s}.bootstrap.servers": brokers.source,
        "L.bootstrap.servers": brokers.target,
        f"{s}->L.enabled": "true",
        "replication.policy.separator": "__",
    }
    config = parse_config(props)
    client = MirrorClient.from_config(config, "L")
    assert client.conf["bootstrap.servers"] == brokers.target
    assert client.policy.separator == "__"
    checkpoints = client.policy.checkpoints_topic(s)
    assert checkpoints == f"{s}__checkpoints__internal"
    orders = f"{s}__orders"
    create_topic(brokers.target, checkpoints)
    create_topic(brokers.target, orders)
    produce_exact(brokers.target, checkpoints, [_cp("g", orders, 0, 4, 3)])

    assert client.remote_topics(s) == {orders}
    assert checkpoints in client.checkpoint_topics()
    assert client.translate_offsets(s, "g") == {(orders, 0): 3}
    dotted = MirrorClient.from_config(config, "L", DefaultReplicationPolicy())
    assert dotted.remote_consumer_offsets("g", s) == {}  # reads s.checkpoints.internal instead
