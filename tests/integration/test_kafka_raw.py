"""The raw reader computes the committed view itself. On Apache Kafka it agrees with the broker's
read_committed; the embedded broker's read_committed returns aborted records, which is why
exactly-once tests use the raw reader there."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mirror_lib.testing.kafka_io import consume_all, create_topic
from tests.helpers.kafka_raw import committed_records, read_batches


@pytest.mark.parametrize("broker", ["tansu", "kafka"])
def test_raw_reader_drops_an_aborted_transaction(request, broker, unique_name):
    clusters = request.getfixturevalue("brokers")
    if broker == "kafka" and not clusters.real_kafka:
        pytest.skip("needs Apache Kafka")
    target = clusters.target if broker == "kafka" else request.getfixturevalue("tansu")
    create_topic(target, unique_name, 1)
    producer = Producer({"bootstrap.servers": target, "transactional.id": f"raw-{unique_name}"})
    producer.init_transactions(30)
    for prefix, end in (("committed", "commit"), ("aborted", "abort"), ("open", None)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(unique_name, f"{prefix}{i}".encode(), partition=0)
        producer.flush(30)
        if end == "commit":
            producer.commit_transaction(30)
        elif end == "abort":
            producer.abort_transaction(30)
    # A plain record after the open transaction, from another producer.
    plain = Producer({"bootstrap.servers": target})
    plain.produce(unique_name, b"plain", partition=0)
    plain.flush(30)

    view = committed_records(target, unique_name, 1)[0]
    assert [r.value for r in view] == [b"committed0", b"committed1", b"committed2", b"plain"]
    markers = [m.kind for b in read_batches(target, unique_name, 0) for m in b.markers]
    assert markers == [1, 0]  # COMMIT, ABORT: the broker did write both markers
    seen = [r.value for r in consume_all(target, unique_name)]
    if broker == "tansu":  # the embedded broker's known limit (docs/testing.md#test-broker-limits)
        assert b"aborted0" in seen, "tansu now filters aborted records: update docs/testing.md"
    else:  # Apache Kafka's read_committed stops at the open transaction (the last stable offset)
        assert seen == [b"committed0", b"committed1", b"committed2"]
    producer.abort_transaction(30)
    if broker == "kafka":  # once it is aborted, read_committed is the raw committed view
        assert [r.value for r in consume_all(target, unique_name)] == [r.value for r in view]
