"""Lookups that fail: an outage is retried, refused credentials or ACLs are not."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.lookups import list_topic_partitions
from mirror_lib.replication.ledger import read_ledger


class _Failing:
    """An admin client and a ledger consumer whose every call fails with ``code``."""

    def __init__(self, code: int) -> None:
        self.code = code

    def list_topics(self, timeout: float = 0) -> None:
        raise KafkaException(KafkaError(self.code))

    def committed(self, tps: list, timeout: float = 0) -> None:
        raise KafkaException(KafkaError(self.code))


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        (KafkaError._TRANSPORT, True),
        (KafkaError._TIMED_OUT, True),
        (KafkaError._AUTHENTICATION, False),
        (KafkaError.SASL_AUTHENTICATION_FAILED, False),
        (KafkaError.GROUP_AUTHORIZATION_FAILED, False),
    ],
)
def test_listing_topics_and_reading_the_ledger_retry_only_outages(code, transient):
    with pytest.raises(BrokerError) as listing:
        list_topic_partitions(_Failing(code))  # type: ignore[arg-type]
    with pytest.raises(BrokerError) as ledger:
        read_ledger(_Failing(code), [("A.T", 0)], where="B")  # type: ignore[arg-type]
    assert (listing.value.transient, ledger.value.transient) == (transient, transient)
    assert "reading the delivery ledger on B failed" in str(ledger.value)


def test_the_ledger_is_read_again_while_its_coordinator_is_not_ready():
    """A new cluster's first group read answers NOT_COORDINATOR (real Kafka creates
    __consumer_offsets then): asked again, not a failed run."""

    class Moving(_Failing):
        calls = 0

        def committed(self, tps: list, timeout: float = 0) -> list:
            self.calls += 1
            if self.calls < 3:
                raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))
            return [TopicPartition("A.T", 0, 7)]

    consumer = Moving(KafkaError.NOT_COORDINATOR)
    assert read_ledger(consumer, [("A.T", 0)], timeout_s=10) == {("A.T", 0): 7}  # type: ignore[arg-type]
    assert consumer.calls == 3
