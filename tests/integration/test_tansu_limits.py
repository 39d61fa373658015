"""Pins a limit of the embedded broker beside Apache Kafka's behaviour.

See docs/testing.md#test-broker-limits.

tansu 0.6.0 applies the group offsets of a committed transaction only when no transaction of
another transactional.id is open on a partition both wrote; otherwise it keeps them with the
producer epoch and drops them if that epoch's next transaction is aborted (fencing after a kill).
Copy tasks of different slots share the metrics and offset-syncs partitions, so a kill with two
slots can lose a committed ledger entry there. Apache Kafka applies them at commit, which is why
the crash, outage and mid-slice-stop tests run with four slots on it. Should the tansu case fail
after a tansu upgrade, the limit is gone.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirror_lib.testing.kafka_io import create_topic


def _ledger(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        consumer.close()


@pytest.mark.parametrize("broker", ["tansu", "kafka"])
def test_offsets_committed_beside_another_open_transaction(request, broker, unique_name):
    """tansu drops the committed offset 10; Apache Kafka keeps it."""
    if broker == "kafka":
        clusters = request.getfixturevalue("brokers")
        if not clusters.real_kafka:
            pytest.skip("needs Apache Kafka")
        bootstrap = clusters.target
    else:
        bootstrap = request.getfixturevalue("tansu")
    data, shared = f"{unique_name}-data", f"{unique_name}-shared"
    group = f"{unique_name}-ledger"
    create_topic(bootstrap, data, 2)
    create_topic(bootstrap, shared, 1)
    ledger = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    ledger.commit(offsets=[TopicPartition(data, 0, 0)], asynchronous=False)  # planner's start

    def producer(slot: int) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{unique_name}-{slot}"})
        p.init_transactions(30)
        return p

    slot_a, slot_b = producer(0), producer(1)
    slot_b.begin_transaction()  # slot B's transaction stays open on the shared partition
    slot_b.produce(data, b"b", partition=1)
    slot_b.produce(shared, b"b", partition=0)
    slot_b.flush(10)
    for offsets in ([TopicPartition(data, 0, 10)], [TopicPartition(data, 0, 11)]):
        slot_a.begin_transaction()
        slot_a.produce(data, b"a", partition=0)
        slot_a.produce(shared, b"a", partition=0)
        slot_a.flush(10)
        slot_a.send_offsets_to_transaction(offsets, ledger.consumer_group_metadata(), 30)
        if offsets[0].offset == 10:
            slot_a.commit_transaction(30)  # tansu accepts it, but its ledger does not move
            assert _ledger(bootstrap, group, data) == (0 if broker == "tansu" else 10)
    producer(0)  # slot A restarts while its second transaction is open: fenced and aborted
    producer(1)
    expected = 0 if broker == "tansu" else 10  # tansu dropped the committed offset 10
    assert _ledger(bootstrap, group, data) == expected
    ledger.close()
