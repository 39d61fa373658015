"""Lookups that fail: an outage is retried, refused credentials or ACLs are not."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.lookups import list_topic_partitions, partition_bounds, partition_ends
from tests.helpers.fake_kafka import OUTAGES_AND_REFUSALS


class _Failing:
    """An admin client whose every call fails with ``code``."""

    def __init__(self, code: int) -> None:
        self.code = code

    def list_topics(self, timeout: float = 0) -> None:
        raise KafkaException(KafkaError(self.code))


@pytest.mark.parametrize(("code", "transient"), OUTAGES_AND_REFUSALS)
def test_listing_topics_retries_only_outages(code, transient):
    with pytest.raises(BrokerError) as listing:
        list_topic_partitions(_Failing(code))  # type: ignore[arg-type]
    assert listing.value.transient == transient


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


def test_ends_are_one_listing_of_the_latest_offsets():
    """A run measures its lag every 30 s over every partition: only the ends are needed."""
    admin = _LeaderMoving(0)
    assert partition_ends(admin, [("T", 0), ("T", 1)]) == {("T", 0): 3, ("T", 1): 3}  # type: ignore[arg-type]
    assert admin.asked == [[0, 1]]
    assert admin.specs == ["LatestSpec"]


class _LeaderMoving:
    """An admin client whose first ``moves`` ListOffsets answer ``code`` for partition 1, as a
    broker does for a topic created a moment ago."""

    def __init__(self, moves: int, code: int = KafkaError.NOT_LEADER_FOR_PARTITION) -> None:
        self.moves, self.code, self.asked, self.specs = moves, code, [], []

    def list_offsets(self, specs: dict, **_kw: object) -> dict:
        self.asked.append(sorted(tp.partition for tp in specs))
        self.specs += sorted({type(spec).__name__ for spec in specs.values()})
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
