"""At least once to a target without idempotent producers (OCI Streaming, for one), with the
target's producers set as its users set them: ``B.producer.enable.idempotence = false``.

The copy writes without transactions and without idempotence (the records' batches carry no
producer id); and a librdkafka producer without idempotence writes a request twice when it
retries it after the acknowledgement was lost, reporting the second copy, which is what the
copy's count of such records relies on (tests/unit/replication/copy/test_writer.py counts them).
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from mirror_lib.spark.runner import run_flows
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.helpers.kafka_raw import RawKafkaError, committed_records, read_batches
from tests.helpers.proxy import LostAckProxy, bootstrap, proxied_broker

NO_IDEMPOTENCE = {"mirror.delivery": "at_least_once", "B.producer.enable.idempotence": "false"}


def test_at_least_once_copies_with_neither_transactions_nor_idempotence(
    spark, brokers, make_config, unique_name
):
    create_topic(brokers.source, unique_name, 2)
    sent = [{"key": f"k{i}", "value": f"v{i}", "partition": i % 2} for i in range(300)]
    produce_exact(brokers.source, unique_name, sent)
    config = make_config(topics=unique_name, **NO_IDEMPOTENCE)
    metrics_from = _end(brokers.target, "mm2-metrics.A.internal")  # earlier tests' flows wrote
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)

    remote = f"A.{unique_name}"
    copied = committed_records(brokers.target, remote, 2)
    for partition in (0, 1):
        source = [(r.key, r.value) for r in consume_all(brokers.source, unique_name, [partition])]
        assert [(r.key, r.value) for r in copied[partition]] == source  # once each, in order
        batches = [b for b in read_batches(brokers.target, remote, partition) if not b.control]
        assert batches and all(b.producer_id == -1 and not b.transactional for b in batches)
    metrics = [
        b
        for b in read_batches(brokers.target, "mm2-metrics.A.internal", 0)
        if b.base_offset >= metrics_from
    ]
    assert metrics and not any(b.transactional or b.control for b in metrics)


def _end(bootstrap: str, topic: str) -> int:
    """The offset after the last batch of ``topic``'s partition 0 (0 when it does not exist)."""
    try:
        return max((b.last_offset + 1 for b in read_batches(bootstrap, topic, 0)), default=0)
    except RawKafkaError:
        return 0


def test_a_retry_after_a_lost_acknowledgement_writes_a_request_twice(tmp_path, unique_name):
    with proxied_broker("B", tmp_path / "b", LostAckProxy) as (broker, proxy):
        create_topic(bootstrap(proxy), unique_name, 1)
        producer = Producer({
            "bootstrap.servers": bootstrap(proxy),
            "enable.idempotence": False,
            "acks": "all",
            "max.in.flight.requests.per.connection": 1,
            "linger.ms": 50,
        })  # fmt: skip
        producer.produce(unique_name, b"first", partition=0)
        assert producer.flush(30) == 0  # connected, metadata known
        reports: list[int] = []
        proxy.losing = True
        for i in range(3):
            producer.produce(unique_name, b"r%d" % i, partition=0,
                             on_delivery=lambda err, msg: reports.append(msg.offset()))  # fmt: skip
        producer.poll(0.2)
        deadline = time.monotonic() + 30
        while len(committed_records(broker.bootstrap_servers, unique_name, 1)[0]) < 4:
            assert time.monotonic() < deadline, "the request never reached the broker"
            time.sleep(0.1)
        assert reports == [] and proxy.lost == 1  # written, its acknowledgement lost
        proxy.cut()  # librdkafka sends the request again on a new connection
        assert producer.flush(30) == 0
        log = [r.value for r in committed_records(broker.bootstrap_servers, unique_name, 1)[0]]
        assert log == [b"first", b"r0", b"r1", b"r2", b"r0", b"r1", b"r2"]
        assert reports == [4, 5, 6]  # the second copy is the one reported
