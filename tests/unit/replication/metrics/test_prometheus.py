"""The Prometheus collector over fake events and companions, and its names."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mirror_lib.replication.metrics.prometheus import FlowMetrics, MirrorCollector
from tests.helpers.fake_metrics import FakeCompanion, FakeTables, batch_event


def scrape(collector: MirrorCollector) -> dict[str, dict[tuple, float]]:
    """Sample name -> {sorted label items: value}, through the real text format and parser."""
    registry = CollectorRegistry()
    registry.register(collector)
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def labels(topic: str, partition: int | None = None, **extra: str) -> tuple:
    base = {"flow": "A->B", "source": "A", "target": "B", "topic": f"A.{topic}"}
    base["source_topic"] = topic
    if partition is not None:
        base["partition"] = str(partition)
    return tuple(sorted({**base, **extra}.items()))


def flow_metrics() -> FlowMetrics:
    return FlowMetrics("A->B", "A", "B", lambda t: f"A.{t}")


def test_records_bytes_and_mm2_latency_names_per_partition():
    m = flow_metrics()
    m.apply(batch_event("orders", 0, [10, 20, 30], nbytes=300, txn=0))
    m.apply(batch_event("orders", 1, [40], nbytes=7, txn=0))  # same transaction, other partition
    m.apply(batch_event("orders", 0, [100, 200], nbytes=50, txn=1))
    m.apply(batch_event("orders", 0, [1], flow="A->C"))  # another flow's event: not ours
    out = scrape(MirrorCollector([m]))
    mm2 = "kafka_connect_mirror_source_connector_"
    assert out[mm2 + "record_count"] == {labels("orders", 0): 5.0, labels("orders", 1): 1.0}
    assert out[mm2 + "byte_count"][labels("orders", 0)] == 350.0
    # latency and age: the partition's last transaction, as MM2's min/max/avg
    assert out[mm2 + "replication_latency_ms"][labels("orders", 0)] == 150.0
    assert out[mm2 + "replication_latency_ms_max"][labels("orders", 0)] == 200.0
    assert out[mm2 + "replication_latency_ms_min"][labels("orders", 1)] == 40.0
    assert out[mm2 + "record_age_ms_avg"][labels("orders", 0)] == 2.0
    flow = (("flow", "A->B"), ("source", "A"), ("target", "B"))
    assert out["mirror_transactions_committed_total"] == {flow: 2.0}
    assert out["mirror_transactions_aborted_total"] == {flow: 0.0}


def test_latency_histogram_per_topic_in_seconds():
    m = flow_metrics()
    m.apply(batch_event("orders", 0, [3, 40, 40, 2_000], txn=0))
    m.apply(batch_event("orders", 1, [400_000], txn=1))
    out = scrape(MirrorCollector([m]))
    buckets = out["mirror_replication_latency_seconds_bucket"]
    assert buckets[labels("orders", le="0.005")] == 1.0
    assert buckets[labels("orders", le="0.05")] == 3.0
    assert buckets[labels("orders", le="2.5")] == 4.0
    assert buckets[labels("orders", le="300.0")] == 4.0
    assert buckets[labels("orders", le="+Inf")] == 5.0
    assert out["mirror_replication_latency_seconds_count"] == {labels("orders"): 5.0}
    assert out["mirror_replication_latency_seconds_sum"][labels("orders")] == pytest.approx(
        (3 + 40 + 40 + 2_000 + 400_000) / 1000
    )


def test_transactions_count_once_per_slot_transaction_and_add_reported_aborts():
    m = flow_metrics()
    for txn, aborted in ((0, 0), (1, 2), (2, 0)):
        for p in (0, 1, 2):  # one event per partition of the transaction
            m.apply(batch_event("t", p, [1], txn=txn, aborted=aborted))
    m.apply(batch_event("t", 0, [1], slot=1, txn=0))  # slot 1's first transaction
    m.apply(batch_event("t", 0, [1], txn=0, batch_id=1))  # the next slice of slot 0
    m.apply(batch_event("t", 0, [1], txn=None))  # written by a version without txn
    out = scrape(MirrorCollector([m]))
    assert list(out["mirror_transactions_committed_total"].values()) == [5.0]
    assert list(out["mirror_transactions_aborted_total"].values()) == [2.0]


def test_lag_skips_and_gaps_per_partition_with_zeros_for_every_measured_partition():
    m = flow_metrics()
    m.set_lag({("t", 0): 12, ("t", 1): 0})
    out = scrape(MirrorCollector([m]))
    assert out["mirror_lag_records"] == {labels("t", 0): 12.0, labels("t", 1): 0.0}
    for name in ("mirror_skips_total", "mirror_skipped_records_total", "mirror_gaps_total"):
        assert out[name] == {labels("t", 0): 0.0, labels("t", 1): 0.0}, name
    common = {"flow": "A->B", "topic": "t", "partition": 1}
    m.apply({**common, "type": "skip", "records": 40})
    m.apply({**common, "type": "skip", "records": 2})
    m.apply({**common, "type": "gap", "expected_offset": 100, "available_start": 250})
    m.apply({**common, "type": "outage_started"})  # not counted here
    m.apply_bytes(b"not json")
    out = scrape(MirrorCollector([m]))
    assert out["mirror_skips_total"][labels("t", 1)] == 2.0
    assert out["mirror_skipped_records_total"][labels("t", 1)] == 42.0
    assert out["mirror_gaps_total"][labels("t", 1)] == 1.0
    assert out["mirror_gap_offsets_total"][labels("t", 1)] == 150.0
    assert m.undecodable == 1


def test_error_events_count_by_action_with_left_out_at_zero_from_the_start():
    """An alert on increase(mirror_errors_total{action="left_out"}[...]) sees the first one."""
    m = flow_metrics()
    flow = {"flow": "A->B", "source": "A", "target": "B"}
    key = lambda action: tuple(sorted({**flow, "action": action}.items()))  # noqa: E731
    assert scrape(MirrorCollector([m]))["mirror_errors_total"] == {key("left_out"): 0.0}
    m.apply({"flow": "A->B", "type": "error", "action": "left_out", "reason": "too large"})
    m.apply({"flow": "A->B", "type": "error", "action": "failed", "reason": "the run"})
    m.apply({"flow": "A->C", "type": "error", "action": "left_out"})  # another flow's
    out = scrape(MirrorCollector([m]))["mirror_errors_total"]
    assert out == {key("left_out"): 1.0, key("failed"): 1.0}


def test_resumed_events_count_and_the_last_wait_is_served():
    m = flow_metrics()
    flow = tuple(sorted({"flow": "A->B", "source": "A", "target": "B"}.items()))
    m.apply({"flow": "A->B", "type": "resumed", "waited_s": 9.9, "slot": 1})
    m.apply({"flow": "A->B", "type": "resumed", "waited_s": 2.5, "slot": 0})
    out = scrape(MirrorCollector([m]))
    assert out["mirror_resumed_total"] == {flow: 2.0}
    assert out["mirror_resumed_wait_seconds"] == {flow: 2.5}


def test_outages_the_run_waits_through_are_served_with_their_cause():
    waits = [{"flow": "A->B", "query": "replication of A->B", "cluster": "B", "role": "target",
              "cause": "not_enough_replicas", "seconds": 41.5}]  # fmt: skip
    out = scrape(MirrorCollector([flow_metrics()], outages=lambda: waits))
    key = tuple(sorted({k: v for k, v in waits[0].items() if k != "seconds"}.items()))
    assert out["mirror_outage_seconds"] == {key: 41.5}
    assert "mirror_outage_seconds" not in scrape(MirrorCollector([flow_metrics()]))


def test_heartbeat_checkpoint_and_tables_age_and_query_state():
    jobs = [
        FakeCompanion("heartbeats", "A->B", last_success_s=990.0),
        FakeCompanion("heartbeats", "B->A", last_success_s=None),  # not yet: since the start
        FakeCompanion("checkpoints", "A->B", last_success_s=940.0),
        FakeTables("B", last_success_s=970.0),
        FakeTables("A", last_success_s=None),
    ]
    queries = [("A->B", "replication", lambda: True), ("A->C", "replication", lambda: 1 / 0)]
    collector = MirrorCollector([], jobs, queries, started_s=900.0, clock=lambda: 1000.0)
    out = scrape(collector)
    ab = (("flow", "A->B"), ("source", "A"), ("target", "B"))
    ba = (("flow", "B->A"), ("source", "B"), ("target", "A"))
    assert out["mirror_heartbeat_age_seconds"] == {ab: 10.0, ba: 100.0}
    assert out["mirror_checkpoint_age_seconds"] == {ab: 60.0}
    assert out["mirror_tables_age_seconds"] == {
        (("cluster", "B"),): 30.0,
        (("cluster", "A"),): 100.0,
    }
    assert out["mirror_query_active"] == {
        (("flow", "A->B"), ("job", "replication")): 1.0,
        (("flow", "A->C"), ("job", "replication")): 0.0,
    }
