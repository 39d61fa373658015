"""A take-over from MirrorMaker 2 whose source MM2 names otherwise (a top-level
`source.cluster.alias`): the Connect offsets it reads carry MM2's name, as MM2's own connectors
write them (their topic names are held to MM2's in tests/integration/test_mm2_names.py)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from mirror_lib.errors import BrokerError
from mirror_lib.mm2.connect_offsets import source_offset_record
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.migration import mm2_takeover
from tests.helpers.fake_groups import topic_reader
from tests.helpers.fake_kafka import FakeConsumer, FakeErrorEvent, FakeMessage, FakeProducer


def test_a_take_over_reads_mm2s_offsets_under_that_name(aliased_ctx, monkeypatch):
    """MM2 keys its Connect source offsets by the alias its connector has: `primary` here."""
    log = FakeProducer()
    for cluster, partition, offset in (("primary", 0, 41), ("A", 1, 99)):
        key, value = source_offset_record(cluster, "orders", partition, offset)
        log.produce("mm2-offsets.A.internal", value, key, partition=0)
    log.flush()
    monkeypatch.setattr(mm2_takeover, "read_topic", topic_reader(log))
    monkeypatch.setattr(
        mm2_takeover,
        "list_topic_partitions",
        lambda admin, timeout_s: {"mm2-offsets.A.internal": 1},
    )
    monkeypatch.setattr(FlowContext, "admin", lambda self, side: None)
    assert mm2_takeover.mm2_committed(aliased_ctx) == {("orders", 0): 41}


@pytest.mark.parametrize(
    ("code", "transient"),
    [(KafkaError.NOT_LEADER_FOR_PARTITION, True), (KafkaError.TOPIC_AUTHORIZATION_FAILED, False)],
)
def test_a_read_of_mm2s_offsets_failing_on_a_moving_leader_is_transient(code, transient):
    # librdkafka flags no consumed error event retriable: the code decides
    consumer = FakeConsumer([FakeMessage("t", 0, 0), FakeErrorEvent("t", 0, code)])
    records = mm2_takeover._records(consumer, "t", 0, 0, timeout_s=5)  # type: ignore[arg-type]
    assert next(records).offset() == 0
    with pytest.raises(BrokerError) as err:
        next(records)
    assert err.value.transient is transient
