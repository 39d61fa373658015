"""The raw reader computes the committed view itself; the embedded broker's read_committed does
not (it returns aborted records), which is why exactly-once tests use the raw reader."""

from __future__ import annotations

from confluent_kafka import Producer

from mirror_lib.testing.kafka_io import consume_all, create_topic
from tests.helpers.kafka_raw import committed_records, read_batches


def test_raw_reader_drops_an_aborted_transaction_that_read_committed_shows(brokers, unique_name):
    create_topic(brokers.target, unique_name, 1)
    producer = Producer(
        {"bootstrap.servers": brokers.target, "transactional.id": f"raw-{unique_name}"}
    )
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
    plain = Producer({"bootstrap.servers": brokers.target})
    plain.produce(unique_name, b"plain", partition=0)
    plain.flush(30)

    view = committed_records(brokers.target, unique_name, 1)[0]
    assert [r.value for r in view] == [b"committed0", b"committed1", b"committed2", b"plain"]
    markers = [m.kind for b in read_batches(brokers.target, unique_name, 0) for m in b.markers]
    assert markers == [1, 0]  # COMMIT, ABORT: the broker did write both markers
    seen = [r.value for r in consume_all(brokers.target, unique_name)]
    # the embedded broker's known limit (docs/testing.md#test-broker-limits)
    if not brokers.real_kafka:
        assert b"aborted0" in seen, "tansu now filters aborted records: update docs/testing.md"
    else:
        assert b"aborted0" not in seen
    producer.abort_transaction(30)
