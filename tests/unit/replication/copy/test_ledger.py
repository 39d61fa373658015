"""The delivery ledger's reads and entries: an outage is retried, refused credentials or ACLs
are not, a partition answered with an error is asked again rather than taken as empty, and an
entry's stamp comes back as written (no Kafka: the consumer is a stand-in)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError
from mirror_lib.replication.copy.ledger import ledger_offsets, read_ledger
from tests.helpers.fake_kafka import OUTAGES_AND_REFUSALS


class _Failing:
    """A ledger consumer whose every call fails with ``code``."""

    def __init__(self, code: int) -> None:
        self.code = code

    def committed(self, tps: list, timeout: float = 0) -> None:
        raise KafkaException(KafkaError(self.code))


class _Answers:
    """A ledger consumer that answers ``answers`` in turn."""

    def __init__(self, *answers: list[TopicPartition]) -> None:
        self.answers = list(answers)

    def committed(self, tps: list, timeout: float = 0) -> list[TopicPartition]:
        return self.answers.pop(0)


@pytest.mark.parametrize(("code", "transient"), OUTAGES_AND_REFUSALS)
def test_reading_the_ledger_retries_only_outages(code, transient):
    with pytest.raises(BrokerError) as ledger:
        # a timed-out coordinator is asked again until the deadline: 60 s by default
        read_ledger(_Failing(code), [("A.T", 0)], timeout_s=0.5, where="B")  # type: ignore[arg-type]
    assert ledger.value.transient == transient
    assert "reading the delivery ledger on B failed" in str(ledger.value)


def test_an_entry_and_its_stamp_read_back_as_written_and_no_entry_is_left_out():
    written = ledger_offsets({("A.T", 1): 7, ("A.T", 0): 42}, {("A.T", 0): 1_700_000_000_123.0})
    assert [(tp.partition, tp.offset, tp.metadata) for tp in written] == [
        (0, 42, "t=1700000000123"),
        (1, 7, None),
    ]
    none = TopicPartition("A.T", 2, -1001)  # no entry: not in the answer
    stamps: dict = {}
    found = read_ledger(_Answers([*written, none]), [("A.T", 0), ("A.T", 1), ("A.T", 2)],  # type: ignore[arg-type]
                        stamps=stamps)  # fmt: skip
    assert found == {("A.T", 0): 42, ("A.T", 1): 7}
    assert stamps == {("A.T", 0): 1_700_000_000_123.0}


def test_a_partition_answered_with_an_error_is_asked_again_never_taken_as_empty():
    """UNSTABLE_OFFSET_COMMIT while a fenced transaction is aborted: taking it as "nothing
    delivered" would copy the partition again from its start."""
    error = KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT)
    unstable = SimpleNamespace(topic="A.T", partition=0, offset=-1001, error=error)
    ledger = _Answers([unstable], [TopicPartition("A.T", 0, 42)])
    assert read_ledger(ledger, [("A.T", 0)], timeout_s=5) == {("A.T", 0): 42}  # type: ignore[arg-type]
    stuck = _Answers(*[[unstable]] * 50)
    with pytest.raises(BrokerError, match=r"A\.T\[0\] did not become readable") as caught:
        read_ledger(stuck, [("A.T", 0)], timeout_s=0.3)  # type: ignore[arg-type]
    assert caught.value.transient and "nothing was copied" in str(caught.value)


class _CoordinatorLoading:
    """A ledger consumer whose first ``failures`` reads fail as a new cluster's do."""

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def committed(self, tps: list, timeout: float = 0) -> list:
        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))
        return [TopicPartition(tp.topic, tp.partition, 7) for tp in tps]


def test_the_ledger_is_read_again_while_the_group_coordinator_is_not_ready():
    """A new Apache Kafka cluster answers the first group's reads with NOT_COORDINATOR while it
    creates its offsets topic: the run failed at start instead of asking again."""
    ledger = read_ledger(_CoordinatorLoading(2), [("A.T", 0)], timeout_s=10)  # type: ignore[arg-type]
    assert ledger == {("A.T", 0): 7}
    with pytest.raises(BrokerError, match="NOT_COORDINATOR") as late:
        read_ledger(_CoordinatorLoading(100), [("A.T", 0)], timeout_s=0.5)  # type: ignore[arg-type]
    assert late.value.transient
