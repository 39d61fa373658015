"""``mirror demo``: the embedded default end to end, bounded in time, leaving nothing running.

Two local brokers A and B (the embedded tansu by default, or Apache Kafka with
``--broker kafka``), sample topics with a keyed, header-carrying producer workload and a
consumer group on A, the full flow A->B (replication, checkpoints, group sync, heartbeats,
materialization) on local Spark, then a report from the Delta tables and a static HTML
dashboard (``<workdir>/dashboard.html``).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)

from mirror_lib.config.model import MirrorConfig
from mirror_lib.config.parse import parse_config
from mirror_lib.config.properties import format_properties
from mirror_lib.errors import MirrorError
from mirror_lib.replication.migration.failover import translate_group
from mirror_lib.testing.clusters import FLOW_SETTINGS, start_clusters
from mirror_lib.testing.kafka_io import create_topic
from mirror_lib.testing.processes import stop_all

TOPICS = {"orders": 4, "payments": 2, "clicks": 3}
GROUP = "demo-orders-app"
#: The logger of librdkafka's own lines (mirror_lib.kafka.reach's too): the workload's clients
#: log there, not to the terminal (a fresh broker's "Failed to acquire idempotence PID", say).
LIBRDKAFKA = logging.getLogger("mirror_lib.librdkafka")
LIBRDKAFKA.addHandler(logging.NullHandler())


def demo_properties(
    source: str, target: str, state_dir: Path, broker: str = "tansu"
) -> dict[str, str]:
    """The demo's mm2.properties (written next to the state so mirror status/translate work),
    with what a flow over ``broker`` needs (:data:`FLOW_SETTINGS`)."""
    return {
        "clusters": "A, B",
        "A.bootstrap.servers": source,
        "B.bootstrap.servers": target,
        "A->B.enabled": "true",
        "A->B.topics": ", ".join(TOPICS),
        "A->B.groups": "demo-.*",
        "B->A.emit.heartbeats.enabled": "false",
        "emit.checkpoints.interval.seconds": "2",
        "emit.heartbeats.interval.seconds": "2",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "2",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "tasks.max": "2",
        "mirror.trigger.interval.seconds": "0.5",
        # the demo's brokers have no authorizer: no ACLs to sync, no remote topic to protect
        "sync.topic.acls.enabled": "false",
        "mirror.protect.remote.topics": "false",
        "mirror.state.dir": str(state_dir),
        **FLOW_SETTINGS[broker],
    }


@dataclass
class Workload:
    """A bounded producer (keys, headers, timestamps) and a consumer group that lags behind."""

    source: str
    rate: float = 400.0
    stop: threading.Event = field(default_factory=threading.Event)
    produced: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def produce(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.source,
                "batch.num.messages": 1,
                "linger.ms": 0,
                "enable.idempotence": True,
                "logger": LIBRDKAFKA,
            }
        )
        i = 0
        started = time.monotonic()
        while not self.stop.is_set():
            topic = list(TOPICS)[i % len(TOPICS)]
            producer.produce(
                topic,
                f'{{"n": {i}, "amount": {i % 97}}}'.encode(),
                f"customer-{i % 50}".encode(),
                headers=[("source", b"demo"), ("seq", str(i).encode())],
            )
            self.produced[topic] = self.produced.get(topic, 0) + 1
            i += 1
            producer.poll(0)
            ahead = i / self.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        if producer.flush(30) > 0:
            self.errors.append("the demo producer could not deliver everything")

    def consume(self) -> None:
        """Read about half of orders as GROUP and commit, like a real application on A."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.source,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "logger": LIBRDKAFKA,
            }
        )
        consumer.assign(self.start_positions(consumer))
        while not self.stop.is_set():
            self.commit_read(consumer, consumer.consume(50, timeout=0.5))
            time.sleep(0.25)
        consumer.close()

    def start_positions(self, consumer: Any) -> list[TopicPartition]:
        """Where the group continues in orders (its committed offsets, else the start), asked
        until the group's coordinator answers. An assignment whose own fetch of the committed
        offsets met a fresh Apache Kafka's "not coordinator" never started fetching."""
        parts = [TopicPartition("orders", p) for p in range(TOPICS["orders"])]
        while not self.stop.is_set():
            try:
                committed = consumer.committed(parts, timeout=5)
            except KafkaException:
                self.stop.wait(0.5)
                continue
            return [
                TopicPartition(tp.topic, tp.partition, max(tp.offset, OFFSET_BEGINNING))
                for tp in committed
            ]
        return []

    def commit_read(self, consumer: Any, msgs: list[Any]) -> None:
        """Commit what ``msgs`` read, as an application would. Error events alone (a fresh
        Apache Kafka's first answers for a new topic) store no offset, so there is nothing to
        commit; a failed commit is noted in :attr:`errors` and retried with the next records."""
        if not any(msg.error() is None for msg in msgs):
            return
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as exc:
            note = f"the consumer's commit failed: {exc.args[0].str()}; retried"
            if note not in self.errors:
                self.errors.append(note)


LATENCY = (
    "SELECT sum(latency_ms_p50 * records) / sum(records) AS p50, max(latency_ms_p99) AS p99 FROM {}"
)
# the records of a partition's first transaction waited for the copy tasks to start, and those
# copied after the live run ended waited for it to stop: without them, the latency while it ran
LIVE = (
    "(SELECT *, row_number() OVER (PARTITION BY topic, partition ORDER BY ts) AS n "
    "FROM t_replication_metrics WHERE ts < timestamp_millis({ended_ms})) WHERE n > 1"
)


def _report(
    spark: Any, config: MirrorConfig, workload: Workload, live_ended_ms: int
) -> dict[str, Any]:
    from mirror_lib.spark.views import create_views  # lazy: pyspark

    create_views(spark, config)
    # the source offsets the exact segments cover, per partition: they are written in the
    # transactions of the records, while the metrics of a copy task killed at the end of the live
    # run are not told; spans, not sums, as the test broker's read_committed also returns the
    # segments of aborted transactions (docs/testing.md#test-broker-limits)
    per_topic = {
        r["topic"]: r["records"]
        for r in spark.sql(
            "SELECT topic, sum(n) AS records FROM (SELECT topic, partition, "
            "max(upstream_end) - min(upstream_start) + 1 AS n FROM t_offset_syncs "
            "WHERE flow = 'A->B' AND kind = 'segment' GROUP BY topic, partition) GROUP BY topic"
        ).collect()
    }
    lat = spark.sql(LATENCY.format("t_replication_metrics")).collect()[0]
    live = spark.sql(LATENCY.format(LIVE.format(ended_ms=live_ended_ms))).collect()[0]
    lag = spark.sql("SELECT coalesce(sum(lag), 0) AS lag FROM replication_lag").collect()[0]
    sql_offsets = {
        (r["topic"], r["partition"]): r["offset"]
        for r in spark.sql(
            f"SELECT topic, partition, offset FROM offset_translation WHERE group_id = '{GROUP}'"
        ).collect()
    }
    consumer = Consumer(
        {
            "bootstrap.servers": config.cluster("A").bootstrap_servers,
            "group.id": GROUP,
            "logger": LIBRDKAFKA,
        }
    )
    committed = {
        tp.partition: tp.offset
        for tp in consumer.committed(
            [TopicPartition("orders", p) for p in range(TOPICS["orders"])], timeout=10
        )
    }
    consumer.close()
    return {
        "produced": dict(workload.produced),
        "workload_errors": list(workload.errors),
        "replicated": per_topic,
        "lag": lag["lag"],
        "latency_ms_p50": lat["p50"],
        "latency_ms_p99": lat["p99"],
        "live_latency_ms_p50": live["p50"],
        "live_latency_ms_p99": live["p99"],
        "translation": [
            {
                "partition": p,
                "committed_on_A": committed.get(p),
                "sql_offset_on_B": sql_offsets.get(("A.orders", p)),
                "translate_offset_on_B": o.offset,
            }
            for p, o in sorted((o.partition, o) for o in translate_group(config, GROUP, "A", "B"))
        ],
    }


def _dashboard(spark: Any, config: MirrorConfig, out: Path, report: Any) -> str | None:
    """Write the static HTML dashboard while the session is up; a failure is reported, not fatal."""
    from mirror_lib.app.dashboard import write_dashboard  # lazy: plotly is an extra

    try:
        return str(write_dashboard(spark, config, out))
    except MirrorError as exc:  # e.g. plotly not installed
        report(f"dashboard not written: {exc}")
        return None


def format_report(report: dict[str, Any], workdir: Path) -> str:
    """What the demo prints at the end."""
    lines = ["", "mirror demo: A -> B", f"{'topic':<10} {'produced':>9} {'replicated':>11}"]
    for topic in TOPICS:
        lines.append(
            f"{topic:<10} {report['produced'].get(topic, 0):>9} "
            f"{report['replicated'].get(topic, 0):>11}"
        )
    lines.append(f"replication lag: {report['lag']} records")
    live = report["live_latency_ms_p50"], report["live_latency_ms_p99"]
    lines.append(
        "latency while the flow ran: "
        + ("no transaction" if live[0] is None else f"p50 {live[0]:,.0f} ms, p99 {live[1]:,.0f} ms")
    )
    every = report["latency_ms_p50"] or 0, report["latency_ms_p99"] or 0
    lines.append(
        f"  with start-up and catch-up: p50 {every[0]:,.0f} ms, p99 {every[1]:,.0f} ms "
        "(the first records waited for Spark to start)"
    )
    lines.append(f"consumer group {GROUP} (orders): committed on A -> translated offset on B")
    lines.append(f"  {'partition':>9} {'on A':>8} {'SQL on B':>9} {'translate on B':>15}")
    for row in report["translation"]:
        lines.append(
            f"  {row['partition']:>9} {row['committed_on_A']:>8} "
            f"{row['sql_offset_on_B']!s:>9} {row['translate_offset_on_B']:>15}"
        )
    if not report["translation"]:
        lines.append("  none: the group has no checkpoints on B")
    lines += [f"workload: {error}" for error in report.get("workload_errors", [])]
    if "dashboard" in report:
        lines.append(f"dashboard: {report['dashboard'] or 'not written (see above)'}")
    lines.append(f"state, Delta tables and mm2.properties: {workdir}")
    lines.append(f"try: mirror status {workdir / 'mm2.properties'}")
    return "\n".join(lines)


def run_demo(
    duration_s: float = 45,
    workdir: Path | None = None,
    report: Any = print,
    broker: str = "tansu",
) -> dict:
    """Run the demo for ``duration_s`` seconds of live replication; everything is stopped after.

    ``broker``: ``tansu`` (embedded, starts in milliseconds) or ``kafka`` (Apache Kafka, fetched
    once from Maven Central)."""
    from mirror_lib.spark.runner import run_flows  # lazy: pyspark
    from mirror_lib.spark.session import local_spark_session

    workdir = (workdir or Path("mirror-demo")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        brokers = start_clusters(["A", "B"], workdir / "brokers", broker)
        try:
            a, b = brokers.bootstraps["A"], brokers.bootstraps["B"]
            props = demo_properties(a, b, workdir / f"state-{int(time.time())}", brokers.kind)
            (workdir / "mm2.properties").write_text(format_properties(props))
            config = parse_config(props, origin=str(workdir / "mm2.properties"))
            for topic, partitions in TOPICS.items():
                create_topic(a, topic, partitions)
            report(f"started {brokers.kind} brokers A={a} B={b}; starting Spark")
            workload = Workload(a)
            spark = local_spark_session("mirror-demo")
            try:
                threads = [
                    threading.Thread(target=workload.produce, daemon=True),
                    threading.Thread(target=workload.consume, daemon=True),
                ]
                for t in threads:
                    t.start()
                run_flows(spark, config, duration_s=duration_s, report=report)
                live_ended_ms = int(time.time() * 1000)
                workload.stop.set()
                for t in threads:
                    t.join(30)
                report("workload stopped; catching up")
                run_flows(spark, config, once=True, timeout_s=120, report=report)
                result = _report(spark, config, workload, live_ended_ms)
                result["dashboard"] = _dashboard(spark, config, workdir / "dashboard.html", report)
            finally:  # Spark (and its workers' Kafka clients) stop before the brokers do
                workload.stop.set()
                spark.stop()
            report(format_report(result, workdir))
            return result
        finally:
            brokers.stop()
    finally:
        stop_all()
