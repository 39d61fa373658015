"""Which failures of a commit or a record the run retries."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from mirror_lib.replication.target_producer import commit_error, record_error


@pytest.mark.parametrize(
    "code", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._TRANSPORT]
)
def test_a_topic_deleted_on_the_target_is_retried_so_the_planner_creates_it_again(code):
    """The metrics topic deleted by hand stopped the run for good, although a restarted
    query's planner creates it again."""
    assert commit_error(KafkaError(code), [], "B").transient
    assert record_error(KafkaError(code), "T[0] offset 5", "B").transient  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "code", [KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.INVALID_PRODUCER_EPOCH]
)
def test_refused_or_fenced_is_not_retried(code):
    assert not commit_error(KafkaError(code), [], "B").transient
