"""What a copy task does with its source consumer's error events."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.copier import SliceCopy
from mirror_lib.replication.copy.source_reader import Reader
from tests.helpers.fake_kafka import FakeErrorEvent

PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true"}  # fmt: skip


def _copy(**props: str) -> tuple[SliceCopy, Reader]:
    copy = SliceCopy.__new__(SliceCopy)  # only the event handling, no Kafka
    copy.ctx = FlowContext.create(parse_config({**PROPS, **props}), "A->B")
    copy.end_early = False
    reader = Reader.__new__(Reader)
    reader.writers = []
    return copy, reader


@pytest.mark.parametrize("on_gap", ["fail", "skip"])
@pytest.mark.parametrize("code", [KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE])
def test_records_gone_from_the_source_end_the_slice_whatever_mirror_on_gap_says(code, on_gap):
    """The planner records the gap event and then fails or skips it. Before, with ``fail`` the
    task raised at once and no gap event was written (Apache Kafka's DeleteRecords under a
    running slice); the run's error came from a worker and a restart recorded the gap."""
    copy, reader = _copy(**{"A->B.mirror.on.gap": on_gap})
    copy._event(reader, FakeErrorEvent("T", 0, code))
    assert copy.end_early


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    ],
)
def test_credentials_or_acls_refused_in_the_middle_of_a_slice_are_terminal(code):
    """Retried as an outage before, so a revoked ACL or rotated password looped for ever."""
    copy, reader = _copy()
    with pytest.raises(BrokerError) as caught:
        copy._event(reader, FakeErrorEvent("T", 0, code))
    assert not caught.value.transient


def test_a_transport_error_is_retried():
    copy, reader = _copy()
    copy._event(reader, FakeErrorEvent("T", 0, KafkaError._TRANSPORT))
    assert not copy.end_early
