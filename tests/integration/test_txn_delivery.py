"""What librdkafka does when records of a transaction fail delivery while it commits.

The writer's classification of a failed commit (``TargetWriter._commit_error``) relies on it: an
outage that begins after the data was acknowledged expires the commit's own metrics and offset
sync records, each is reported to its delivery callback, and the commit ends with an abortable
``_INCONSISTENT`` error. Pinned here against a real broker behind a proxy that refuses.
"""

from __future__ import annotations

import time

import confluent_kafka as ck

from mirror_lib.testing.kafka_io import create_topic
from tests.helpers.proxy import OPEN, REFUSE, bootstrap, proxied_broker


def test_records_expired_in_a_commit_reach_their_callbacks_then_the_commit_must_abort(
    tmp_path, unique_name
):
    with proxied_broker("B", tmp_path / "b") as (_broker, proxy):
        target = bootstrap(proxy)
        create_topic(target, unique_name, 1)
        producer = ck.Producer({
            "bootstrap.servers": target,
            "transactional.id": unique_name,
            "transaction.timeout.ms": 10_000,
            "message.timeout.ms": 3_000,
        })  # fmt: skip
        producer.init_transactions(30)
        producer.begin_transaction()
        reports: list[str | None] = []

        def report(err: ck.KafkaError | None, _msg: object) -> None:
            reports.append(None if err is None else err.name())

        producer.produce(unique_name, b"data", on_delivery=report)
        assert producer.flush(30) == 0 and reports == [None]
        proxy.set_mode(REFUSE)
        for i in range(3):
            producer.produce(unique_name, b"metrics %d" % i, on_delivery=report)
        started = time.monotonic()
        try:
            producer.commit_transaction(60)
            raise AssertionError("the commit succeeded although the target refused")
        except ck.KafkaException as exc:
            err = exc.args[0]
        assert time.monotonic() - started < 30  # the records' timeout, not the commit's
        assert err.code() == ck.KafkaError._INCONSISTENT and err.txn_requires_abort()
        assert not err.retriable() and not err.fatal()
        assert reports == [None, *["_MSG_TIMED_OUT"] * 3]
        proxy.set_mode(OPEN)
        producer.abort_transaction(30)  # and the producer goes on with a new transaction
