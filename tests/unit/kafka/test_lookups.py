"""Lookups that fail: an outage is retried, refused credentials or ACLs are not."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.lookups import list_topic_partitions, partition_bounds
from mirror_lib.replication.copy.ledger import read_ledger


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
        # a timed-out coordinator is asked again until the deadline: 60 s by default
        read_ledger(_Failing(code), [("A.T", 0)], timeout_s=0.5, where="B")  # type: ignore[arg-type]
    assert (listing.value.transient, ledger.value.transient) == (transient, transient)
    assert "reading the delivery ledger on B failed" in str(ledger.value)


class _Offsets:
    """An admin client whose ListOffsets answers ``earliest`` and ``latest`` for every
    partition."""

    def __init__(self, earliest: int, latest: int) -> None:
        self.answers = iter((earliest, latest))

    def list_offsets(self, specs: dict, **_kw: object) -> dict:
        offset = next(self.answers)
        done = {}
        for tp in specs:
            fut: concurrent.futures.Future = concurrent.futures.Future()
            fut.set_result(SimpleNamespace(offset=offset))
            done[tp] = fut
        return done


def test_an_end_below_the_start_is_the_start():
    """Kafka lists a last stable offset of 30 and a log start of 45 once DeleteRecords removed
    the start of a transaction still open: the planner read that as a partition ending before
    the flow's position and recorded a second, false, truncation gap."""
    assert partition_bounds(_Offsets(45, 30), [("T", 0)]) == {("T", 0): (45, 45)}  # type: ignore[arg-type]
    assert partition_bounds(_Offsets(5, 30), [("T", 0)]) == {("T", 0): (5, 30)}  # type: ignore[arg-type]


class _LeaderMoving:
    """An admin client whose first ``moves`` ListOffsets answer ``code`` for partition 1, as a
    broker does for a topic created a moment ago."""

    def __init__(self, moves: int, code: int = KafkaError.NOT_LEADER_FOR_PARTITION) -> None:
        self.moves, self.code, self.asked = moves, code, []

    def list_offsets(self, specs: dict, **_kw: object) -> dict:
        self.asked.append(sorted(tp.partition for tp in specs))
        done = {}
        for tp in specs:
            fut: concurrent.futures.Future = concurrent.futures.Future()
            if tp.partition == 1 and self.moves:
                self.moves -= 1
                fut.set_exception(KafkaException(KafkaError(self.code)))
            else:
                fut.set_result(SimpleNamespace(offset=3))
            done[tp] = fut
        return done


def test_a_partition_whose_leader_moves_is_asked_again_alone():
    """`mirror verify` failed at once on NOT_LEADER_FOR_PARTITION for a remote topic the flow
    had just created; Kafka's own admin client looks the leader up and asks again."""
    admin = _LeaderMoving(2)
    bounds = partition_bounds(admin, [("T", 0), ("T", 1)])  # type: ignore[arg-type]
    assert bounds == {("T", 0): (3, 3), ("T", 1): (3, 3)}
    assert admin.asked[:3] == [[0, 1], [1], [1]]


def test_a_leader_that_never_comes_or_another_error_still_fails():
    with pytest.raises(BrokerError, match="NOT_LEADER") as late:
        partition_bounds(_LeaderMoving(10**6), [("T", 1)], timeout_s=0.3)  # type: ignore[arg-type]
    assert late.value.transient
    refused = _LeaderMoving(1, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(BrokerError, match="AUTHORIZATION"):
        partition_bounds(refused, [("T", 1)])  # type: ignore[arg-type]
    assert refused.asked == [[1]]


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
