"""The test producer waits for a new topic's leaders, and refuses a partition whose records
landed out of the order given."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest

from mirror_lib.errors import BrokerError
from mirror_lib.testing import kafka_io
from mirror_lib.testing.kafka_io import Record, _check_order, _learn_leaders
from tests.helpers.fake_kafka import LeaderlessAtFirst, UnassignedUntilLearned


def rec(partition: int, offset: int) -> Record:
    return Record("t", partition, offset, None, b"v")


def test_records_that_landed_in_the_order_given_pass() -> None:
    # delivery reports may interleave partitions, and come in any order
    _check_order("t", "b", [(2, rec(0, 1)), (0, rec(0, 0)), (1, rec(1, 0))])


def test_a_record_that_landed_before_an_earlier_one_is_refused_with_both_offsets() -> None:
    # record 0 (a0) was queued behind record 1 (a1): the source already holds a1, a0
    with pytest.raises(BrokerError, match=r"record 1 landed at offset 0 .* record 0 \(offset 1\)"):
        _check_order("t", "b", [(1, rec(0, 0)), (0, rec(0, 1))])


def test_the_producer_waits_until_a_new_topics_partitions_have_a_leader() -> None:
    # a record sent while its partition has no leader is parked and may land behind the next
    producer = LeaderlessAtFirst("t", leaderless=3)
    _learn_leaders(producer, "t", time.monotonic() + 30)  # type: ignore[arg-type]
    assert producer.looks == 4


def test_a_topic_that_never_gets_a_leader_stops_the_wait_at_its_deadline() -> None:
    producer = LeaderlessAtFirst("t", leaderless=10**6)
    _learn_leaders(producer, "t", time.monotonic() + 0.5)  # type: ignore[arg-type]
    assert 1 < producer.looks < 100


def test_records_sent_before_the_producer_learns_the_partitions_keep_their_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # librdkafka's handle of the topic learns its partitions after the first produce; records
    # parked unassigned until then may be queued behind later ones: the CI's fan-out test got
    # record 7 at offset 0 of partition 3 and record 3 at offset 1
    producer = UnassignedUntilLearned("t", learn_after=5)
    monkeypatch.setattr(kafka_io.ck, "Producer", lambda conf: producer)
    given = [{"partition": i % 4, "value": b"v%d" % i} for i in range(12)]
    got = kafka_io.produce_exact("b", "t", given)
    assert [(r.partition, r.offset) for r in got] == [(p, o) for p in range(4) for o in range(3)]


class _CommitFailing:
    """A consumer whose commits fail with ``codes`` in turn, then succeed."""

    def __init__(self, *codes: int) -> None:
        self.codes = list(codes)
        self.commits = 0

    def commit(self, offsets: object, asynchronous: bool) -> None:
        self.commits += 1
        if self.codes:
            raise ck.KafkaException(ck.KafkaError(self.codes.pop(0)))

    def close(self) -> None:
        pass


def test_a_group_commit_is_asked_again_while_a_new_clusters_coordinator_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # librdkafka flags no failed commit retriable: the CI's three-broker cluster answered
    # COORDINATOR_LOAD_IN_PROGRESS once and the helper gave up
    codes = (ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS, ck.KafkaError.NOT_COORDINATOR)
    consumer = _CommitFailing(*codes)
    monkeypatch.setattr(kafka_io.ck, "Consumer", lambda conf: consumer)
    kafka_io.commit_group("b", "g", [ck.TopicPartition("t", 0, 0)], timeout_s=30)
    assert consumer.commits == 3


def test_a_group_commit_refused_for_good_is_not_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = _CommitFailing(ck.KafkaError.GROUP_AUTHORIZATION_FAILED)
    monkeypatch.setattr(kafka_io.ck, "Consumer", lambda conf: consumer)
    with pytest.raises(ck.KafkaException):
        kafka_io.commit_group("b", "g", [ck.TopicPartition("t", 0, 0)], timeout_s=30)
    assert consumer.commits == 1
