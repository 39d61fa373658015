"""`mirror run --metrics-port`: a real flow scraped while it runs (issue 17, part 3)."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mirror_lib.spark.runner import run_flows
from mirror_lib.testing.kafka_io import create_topic, produce_exact

MM2 = "kafka_connect_mirror_source_connector_"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(url: str, topic: str) -> dict[str, dict[tuple, float]]:
    """Sample name -> {(partition or le, ...): value} of ``topic``'s samples."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("source_topic", topic) != topic:
                continue  # e.g. the replicated heartbeats topic
            key = tuple(s.labels.get(k) for k in ("partition", "le"))
            out.setdefault(s.name, {})[key] = s.value
    return out


def scrape_until(spark, config, port: int, topic: str, done, report=lambda *_: None) -> dict:
    """Run the flows, scraping the endpoint every second, until ``done(scrape)``; the last
    scrape (the run's duration is only a deadline)."""
    url = f"http://127.0.0.1:{port}/metrics"
    scrapes: list[dict] = []

    class Done(Exception):
        """Ends the run."""

    def on_progress(_rows: list[dict]) -> None:
        scrapes.append(scrape(url, topic))
        if done(scrapes[-1]):
            raise Done

    with pytest.raises(Done):
        run_flows(
            spark, config, duration_s=240, on_progress=on_progress, progress_interval_s=1,
            report=report,
        )  # fmt: skip
    return scrapes[-1]


def test_a_run_serves_records_lag_and_latency_per_partition_while_it_copies(
    spark, make_config, brokers, unique_name
):
    topic = f"{unique_name}-t"
    create_topic(brokers.source, topic, 3)
    produce_exact(
        brokers.source, topic, [{"value": f"v{i}", "partition": i % 3} for i in range(300)]
    )
    port = free_port()
    config = make_config(
        topics=topic,
        groups="none",
        **{"mirror.metrics.port": str(port), "mirror.tables.enabled": "true"},
    )
    url = f"http://127.0.0.1:{port}/metrics"
    lines: list[str] = []

    def every_record(seen: dict) -> bool:
        counts = seen.get(MM2 + "record_count", {})
        lag = seen.get("mirror_lag_records", {})
        return sum(counts.values()) >= 300 and len(lag) == 3 and not any(lag.values())

    last = scrape_until(spark, config, port, topic, every_record, lines.append)
    assert f"serving Prometheus metrics at {url}" in lines
    assert last[MM2 + "record_count"] == {(p, None): 100.0 for p in ("0", "1", "2")}
    assert all(v > 0 for v in last[MM2 + "byte_count"].values())
    assert last["mirror_lag_records"] == {(p, None): 0.0 for p in ("0", "1", "2")}
    assert set(last[MM2 + "replication_latency_ms_max"]) == {(p, None) for p in "012"}
    assert last["mirror_replication_latency_seconds_count"] == {(None, None): 300.0}
    assert last["mirror_replication_latency_seconds_bucket"][(None, "+Inf")] == 300.0
    assert last["mirror_skips_total"] == {(p, None): 0.0 for p in "012"}
    assert last["mirror_gaps_total"] == {(p, None): 0.0 for p in "012"}
    assert sum(last["mirror_transactions_committed_total"].values()) >= 1
    assert last["mirror_query_active"] == {(None, None): 1.0}
    assert set(last["mirror_heartbeat_age_seconds"].values()) and set(
        last["mirror_checkpoint_age_seconds"].values()
    )
    assert [v >= 0 for v in last["mirror_tables_age_seconds"].values()] == [True]  # cluster B
    with pytest.raises(urllib.error.URLError):  # stopped when run_flows returned
        urllib.request.urlopen(url, timeout=5)


def test_skipped_stale_records_are_counted_on_the_endpoint(
    spark, make_config, brokers, unique_name
):
    """An outage's stale records (an hour-old CreateTime, as a paused flow finds them) are
    skipped, and the endpoint counts the skipped range and its records next to the copied ones."""
    topic = f"{unique_name}-t"
    create_topic(brokers.source, topic, 1)
    now = int(time.time() * 1000)
    ages = [0] * 5 + [3_600_000] * 20 + [0] * 5
    produce_exact(
        brokers.source,
        topic,
        [{"value": f"v{i}", "partition": 0, "timestamp": now - age} for i, age in enumerate(ages)],
    )
    port = free_port()
    config = make_config(
        topics=topic,
        groups="none",
        **{
            "mirror.metrics.port": str(port),
            "A->B.mirror.on.gap": "skip",
            "A->B.mirror.skip.older.than.ms": str(10 * 60_000),
        },
    )

    def copied_or_skipped(seen: dict) -> bool:
        copied = sum(seen.get(MM2 + "record_count", {}).values())
        return copied + sum(seen.get("mirror_skipped_records_total", {}).values()) >= 30

    last = scrape_until(spark, config, port, topic, copied_or_skipped)
    assert last[MM2 + "record_count"] == {("0", None): 10.0}
    assert last["mirror_skipped_records_total"] == {("0", None): 20.0}
    assert last["mirror_skips_total"][("0", None)] >= 1.0  # one per transaction it spans
