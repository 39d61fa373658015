"""The demo's workload consumer commits like an application, whatever a fresh broker answers."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, KafkaError

from mirror_lib.app.demo import Workload, format_report
from tests.helpers.fake_kafka import CommittingConsumer, FakeErrorEvent, FakeMessage


def test_error_events_alone_commit_nothing_and_end_nothing():
    # librdkafka's commit() raises _NO_OFFSET for a batch with no record: it ended the thread,
    # and the demo on Apache Kafka had no group to translate (issue 40)
    workload, consumer = Workload("unused:9092"), CommittingConsumer()
    workload.commit_read(consumer, [FakeErrorEvent("orders", 0, KafkaError.UNKNOWN_TOPIC_OR_PART)])
    workload.commit_read(consumer, [])
    assert consumer.commits == 0 and workload.errors == []
    workload.commit_read(consumer, [FakeMessage(topic="orders", partition=0, offset=0)])
    assert consumer.commits == 1


def test_a_failed_commit_is_noted_once_and_retried():
    workload, consumer = Workload("unused:9092"), CommittingConsumer(fail=2)
    record = FakeMessage(topic="orders", partition=0, offset=0)
    for _ in range(3):
        workload.commit_read(consumer, [record])
    assert consumer.commits == 1
    assert len(workload.errors) == 1 and "commit failed" in workload.errors[0]


def test_the_group_starts_where_it_committed_once_the_coordinator_answers():
    # an assignment whose own committed-offset fetch met "not coordinator" never fetched: the
    # group committed nothing and the demo on Apache Kafka translated nothing (issue 40)
    workload = Workload("unused:9092")
    consumer = CommittingConsumer(unready=2, offsets={1: 17})
    starts = workload.start_positions(consumer)
    assert consumer.unready == 0
    assert [(tp.topic, tp.partition, tp.offset) for tp in starts] == [
        ("orders", 0, OFFSET_BEGINNING),
        ("orders", 1, 17),
        ("orders", 2, OFFSET_BEGINNING),
        ("orders", 3, OFFSET_BEGINNING),
    ]


def test_a_stopped_workload_stops_asking():
    workload = Workload("unused:9092")
    workload.stop.set()
    assert workload.start_positions(CommittingConsumer(unready=1)) == []


def test_the_report_says_why_no_offset_was_translated():
    report = {
        "produced": {"orders": 3},
        "replicated": {"orders": 3},
        "lag": 0,
        "latency_ms_p50": 10.0,
        "latency_ms_p99": 20.0,
        "live_latency_ms_p50": None,
        "live_latency_ms_p99": None,
        "translation": [],
        "workload_errors": ["the consumer's commit failed: x; retried"],
    }
    text = format_report(report, Path("/tmp/demo"))
    assert "  none: the group has no checkpoints on B" in text.splitlines()
    assert "workload: the consumer's commit failed: x; retried" in text.splitlines()


def test_the_report_leads_with_the_latency_while_the_flow_ran():
    """The start-up's slow first records are named as such, under the live figures, so that
    the first latency line a newcomer reads is not contradicted by the next (issue 55)."""
    report = {
        "produced": {"orders": 3},
        "replicated": {"orders": 3},
        "lag": 0,
        "latency_ms_p50": 1631.4,
        "latency_ms_p99": 11234.0,
        "live_latency_ms_p50": 71.2,
        "live_latency_ms_p99": 760.0,
        "translation": [],
    }
    lines = format_report(report, Path("/tmp/demo")).splitlines()
    first = next(i for i, line in enumerate(lines) if "latency" in line)
    assert lines[first - 1] == "replication lag: 0 records"
    assert lines[first] == "latency while the flow ran: p50 71 ms, p99 760 ms"
    assert lines[first + 1] == (
        "  with start-up and catch-up: p50 1,631 ms, p99 11,234 ms "
        "(the first records waited for Spark to start)"
    )
    assert sum("latency" in line for line in lines) == 1
