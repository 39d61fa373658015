"""Prometheus metrics of a run: what the copy tasks reported, as the scrape-time collector sees it.

The copy tasks already report every committed transaction on the flow's metrics topic (``batch``
events: records, bytes, latency and age summaries and histogram, transaction number; ``gap`` and
``skip`` events), and the driver knows the lag from the delivery ledger and the companions' last
successful run. :class:`FlowMetrics` accumulates one flow's events (pure, no Kafka);
:class:`MirrorCollector` turns them into metric families when Prometheus scrapes
(:mod:`mirror_lib.replication.metrics.metrics_endpoint` feeds and serves them).

Names: MM2's metrics keep the names the Prometheus JMX exporter gives them for MM2 (as in
Strimzi's rules: ``kafka_connect_mirror_source_connector_<mm2 name with _>``, gauges), so MM2
dashboards and alerts keep working; what MM2 does not measure is ``mirror_*`` with Prometheus'
conventions (``_total`` counters, a histogram in seconds); see
docs/operations/prometheus.md.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from mirror_lib.mm2.formats import TP
from mirror_lib.replication.copy.copy_state import LATENCY_BUCKETS_MS

MM2 = "kafka_connect_mirror_source_connector_"
FLOW_LABELS = ("flow", "source", "target")
TOPIC_LABELS = (*FLOW_LABELS, "topic", "source_topic")  # topic: the remote topic, as MM2's tag
PARTITION_LABELS = (*TOPIC_LABELS, "partition")
STATS = ("min", "max", "avg")

#: MM2 metric -> our name and what we measure (also the table of docs/operations/prometheus.md).
MM2_NAMES = {
    "record-count": MM2 + "record_count",
    "byte-count": MM2 + "byte_count",
    "record-age-ms": MM2 + "record_age_ms",
    "replication-latency-ms": MM2 + "replication_latency_ms",
}


@dataclass
class PartitionMetrics:
    """What the events told about one upstream partition since the run started."""

    remote: str
    records: int = 0
    bytes: int = 0
    latency: dict[str, float] = field(default_factory=dict)  # the last transaction's summary
    age: dict[str, float] = field(default_factory=dict)
    skips: int = 0
    skipped_records: int = 0
    gaps: int = 0
    gap_offsets: int = 0
    lag: int | None = None


@dataclass
class TopicHistogram:
    """Replication latency of a topic's records: counts per bucket of LATENCY_BUCKETS_MS."""

    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))
    sum_ms: float = 0.0


class FlowMetrics:
    """One flow's metrics, fed by its metrics-topic events and lag measurements (thread-safe)."""

    def __init__(
        self, flow: str, source: str, target: str, remote_topic: Callable[[str], str]
    ) -> None:
        self.flow, self.source, self.target = flow, source, target
        self.remote_topic = remote_topic
        self.partitions: dict[TP, PartitionMetrics] = {}
        self.histograms: dict[str, TopicHistogram] = {}
        self.committed = 0
        self.aborted = 0
        self.undecodable = 0
        # error events by action; 0 for left_out from the start, so increase() sees the first
        self.errors: dict[str, int] = {"left_out": 0}
        self.resumed = 0  # resumed events: copies a fault held up (copy/txn_events.py)
        self.resumed_wait_s = 0.0  # the wait the last one told
        self._last_txn: dict[Any, tuple] = {}
        self._lock = threading.Lock()

    def _part(self, topic: str, partition: int) -> PartitionMetrics:
        key = (topic, partition)
        if key not in self.partitions:
            self.partitions[key] = PartitionMetrics(self.remote_topic(topic))
        return self.partitions[key]

    def apply_bytes(self, value: bytes | None) -> None:
        """Apply one metrics-topic record; one that is not a JSON object is only counted."""
        try:
            event = json.loads(value or b"")
        except ValueError:
            event = None
        if not isinstance(event, dict):
            self.undecodable += 1
            return
        self.apply(event)

    def apply(self, event: dict[str, Any]) -> None:
        """Account for one event of this flow (events of other flows are ignored).

        ``batch``: records, bytes, latency/age summaries, ``latency_ms_buckets``, ``txn`` and
        ``aborted``; ``gap``: ``expected_offset`` and ``available_start``; ``skip`` (the
        stale-data policy): ``records``. All name ``topic`` (upstream) and ``partition``.
        ``error``: counted by its ``action``; ``resumed``: counted, with its ``waited_s``.
        """
        if event.get("flow") != self.flow:
            return
        kind = event.get("type")
        if kind == "error":  # a target left out of a fan-out group, or a run that failed
            action = str(event.get("action") or "failed")
            with self._lock:
                self.errors[action] = self.errors.get(action, 0) + 1
            return
        if kind == "resumed":
            waited = event.get("waited_s")
            with self._lock:
                self.resumed += 1
                if isinstance(waited, int | float):
                    self.resumed_wait_s = float(waited)
            return
        topic, partition = event.get("topic"), event.get("partition")
        if kind not in ("batch", "gap", "skip") or not isinstance(topic, str):
            return
        if not isinstance(partition, int):
            return
        with self._lock:
            part = self._part(topic, partition)
            if kind == "batch":
                self._batch(topic, part, event)
            elif kind == "gap":
                part.gaps += 1
                start, expected = event.get("available_start"), event.get("expected_offset")
                if isinstance(start, int) and isinstance(expected, int) and start > expected:
                    part.gap_offsets += start - expected
            else:
                part.skips += 1
                part.skipped_records += int(event.get("records") or 0)

    def _batch(self, topic: str, part: PartitionMetrics, event: dict[str, Any]) -> None:
        records = int(event.get("records") or 0)
        part.records += records
        part.bytes += int(event.get("bytes") or 0)
        part.latency = dict(event.get("latency_ms") or {})
        part.age = dict(event.get("age_ms") or {})
        buckets = event.get("latency_ms_buckets")
        if isinstance(buckets, list) and len(buckets) == len(LATENCY_BUCKETS_MS) + 1:
            hist = self.histograms.setdefault(topic, TopicHistogram())
            hist.buckets = [a + int(b) for a, b in zip(hist.buckets, buckets, strict=True)]
            hist.sum_ms += float(part.latency.get("avg") or 0.0) * records
        # A transaction's events (one per partition) are consecutive for its slot.
        slot = (event.get("query_id"), event.get("slot"))
        txn = (event.get("batch_id"), event.get("txn"))
        if event.get("txn") is not None and self._last_txn.get(slot) != txn:
            self._last_txn[slot] = txn
            self.committed += 1
            self.aborted += int(event.get("aborted") or 0)

    def set_lag(self, lag: dict[TP, int]) -> None:
        """The lag per upstream partition just measured (source LSO - delivered)."""
        with self._lock:
            for (topic, partition), value in lag.items():
                self._part(topic, partition).lag = value

    def snapshot(self) -> tuple[dict[TP, PartitionMetrics], dict[str, TopicHistogram], int, int]:
        """Copies of the partitions, histograms and transaction counts, for one scrape."""
        with self._lock:
            parts = {tp: PartitionMetrics(**vars(m)) for tp, m in self.partitions.items()}
            hists = {
                t: TopicHistogram(list(h.buckets), h.sum_ms) for t, h in self.histograms.items()
            }
            return parts, hists, self.committed, self.aborted

    def error_counts(self) -> dict[str, int]:
        """Error events seen since the run started, by action."""
        with self._lock:
            return dict(self.errors)

    def resumed_counts(self) -> tuple[int, float]:
        """Resumed events seen since the run started, and the last one's wait (seconds)."""
        with self._lock:
            return self.resumed, self.resumed_wait_s


#: Per-partition families: key, counter (else gauge), name, help.
PARTITION_METRICS: tuple[tuple[str, bool, str, str], ...] = (
    ("records", False, MM2_NAMES["record-count"],
     "Records replicated since the run started (MM2 record-count)"),
    ("bytes", False, MM2_NAMES["byte-count"],
     "Bytes (keys + values) replicated since the run started (MM2 byte-count)"),
    ("lag", False, "mirror_lag_records",
     "Records on the source not yet delivered (last stable offset - delivery ledger)"),
    ("skips", True, "mirror_skips", "Source ranges skipped on purpose (stale-data policy)"),
    ("skipped_records", True, "mirror_skipped_records",
     "Records skipped on purpose (stale-data policy)"),
    ("gaps", True, "mirror_gaps", "Source ranges that vanished before they were copied"),
    ("gap_offsets", True, "mirror_gap_offsets", "Offsets of the vanished source ranges"),
)  # fmt: skip
for _mm2, _what, _text in (
    ("record-age-ms", "age", "consume time - CreateTime (ms)"),
    ("replication-latency-ms", "latency", "target acknowledgement time - CreateTime (ms)"),
):
    PARTITION_METRICS += (
        (_what, False, MM2_NAMES[_mm2], f"{_text}: average of the partition's last transaction"),
        *(
            (f"{_what}_{q}", False, f"{MM2_NAMES[_mm2]}_{q}", f"{_text}: {q} of the last one")
            for q in STATS
        ),
    )


class MirrorCollector(Collector):
    """Metric families of the run at scrape time: flows' events, lag and companions' ages.

    ``jobs``: objects with ``job`` and ``last_success_s``, and ``ctx.flow`` for heartbeats and
    checkpoints (:class:`~mirror_lib.replication.companions.threads.CompanionJob`) or ``name``,
    the cluster, for tables (:class:`~mirror_lib.replication.companions.threads.TablesJob`);
    ``queries``: (flow, job, is-active callable); ``outages``: the outages now, as
    :meth:`~mirror_lib.replication.companions.supervise.Supervisor.current` gives them.
    """

    def __init__(
        self,
        flows: Iterable[FlowMetrics],
        jobs: Iterable[Any] = (),
        queries: Iterable[tuple[str, str, Callable[[], bool]]] = (),
        started_s: float | None = None,
        clock: Callable[[], float] = time.time,
        outages: Callable[[], list[dict[str, Any]]] = list,
    ) -> None:
        self.flows = list(flows)
        self.jobs = list(jobs)
        self.queries = list(queries)
        self.outages = outages
        self.clock = clock
        self.started_s = clock() if started_s is None else started_s

    def collect(self) -> Iterator[Any]:
        fams = {
            key: (CounterMetricFamily if counter else GaugeMetricFamily)(
                name, text, labels=list(PARTITION_LABELS)
            )
            for key, counter, name, text in PARTITION_METRICS
        }
        hist = HistogramMetricFamily(
            "mirror_replication_latency_seconds",
            "Target acknowledgement time - CreateTime of every replicated record",
            labels=list(TOPIC_LABELS),
        )
        committed, aborted = (
            CounterMetricFamily(f"mirror_transactions_{what}", text, labels=list(FLOW_LABELS))
            for what, text in (
                ("committed", "Kafka transactions the copy tasks committed with records"),
                ("aborted", "Kafka transactions the copy tasks aborted and reported"),
            )
        )
        resumed = CounterMetricFamily(
            "mirror_resumed",
            "Times a fault held the copy of records up at least a second (resumed events)",
            labels=list(FLOW_LABELS),
        )
        resumed_wait = GaugeMetricFamily(
            "mirror_resumed_wait_seconds",
            "How long the last resumed event's records waited to be copied",
            labels=list(FLOW_LABELS),
        )
        errors = CounterMetricFamily(
            "mirror_errors",
            "Error events on the flow's metrics topic since the run started, by action "
            "(left_out: a fan-out target failed for good while the others go on)",
            labels=[*FLOW_LABELS, "action"],
        )
        for flow in self.flows:
            parts, hists, n_committed, n_aborted = flow.snapshot()
            fl = [flow.flow, flow.source, flow.target]
            committed.add_metric(fl, n_committed)
            aborted.add_metric(fl, n_aborted)
            for action, count in sorted(flow.error_counts().items()):
                errors.add_metric([*fl, action], count)
            n_resumed, last_wait = flow.resumed_counts()
            resumed.add_metric(fl, n_resumed)
            resumed_wait.add_metric(fl, last_wait)
            for (topic, partition), m in sorted(parts.items()):
                labels = [*fl, m.remote, topic, str(partition)]
                values: dict[str, float | None] = {
                    "records": m.records,
                    "bytes": m.bytes,
                    "lag": m.lag,
                    "skips": m.skips,
                    "skipped_records": m.skipped_records,
                    "gaps": m.gaps,
                    "gap_offsets": m.gap_offsets,
                    "age": m.age.get("avg"),
                    "latency": m.latency.get("avg"),
                }
                for q in STATS:
                    values[f"age_{q}"] = m.age.get(q)
                    values[f"latency_{q}"] = m.latency.get(q)
                for key, value in values.items():
                    if value is not None:
                        fams[key].add_metric(labels, value)
            for topic, h in sorted(hists.items()):
                remote = flow.remote_topic(topic)
                cumulative, buckets = 0, []
                for bound, count in zip((*LATENCY_BUCKETS_MS, None), h.buckets, strict=True):
                    cumulative += count
                    buckets.append(("+Inf" if bound is None else str(bound / 1000), cumulative))
                hist.add_metric([*fl, remote, topic], buckets, h.sum_ms / 1000)
        yield from fams.values()
        yield from (hist, committed, aborted, errors, resumed, resumed_wait)
        yield from self._companions()
        yield self._outages()

    def _outages(self) -> Any:
        waiting = GaugeMetricFamily(
            "mirror_outage_seconds",
            "Seconds a query of the flow has been waiting for a cluster (an outage: it is "
            "restarted with backoff); cause: unreachable, not_enough_replicas, no_leader, "
            "coordinator, timed_out or other",
            labels=["flow", "query", "cluster", "role", "cause"],
        )
        for o in self.outages():
            labels = [o["flow"], o["query"], o["cluster"], o["role"], o["cause"]]
            waiting.add_metric(labels, float(o["seconds"]))
        return waiting

    def _companions(self) -> Iterator[Any]:
        now = self.clock()
        ages = {
            job: GaugeMetricFamily(
                f"mirror_{job[:-1]}_age_seconds",
                f"Seconds since the {job} of the pair last succeeded (or since the run started)",
                labels=list(FLOW_LABELS),
            )
            for job in ("heartbeats", "checkpoints")
        }
        tables = GaugeMetricFamily(
            "mirror_tables_age_seconds",
            "Seconds since the cluster's Delta tables were last brought up to date (or since the "
            "run started)",
            labels=["cluster"],
        )
        for j in self.jobs:
            last = j.last_success_s if j.last_success_s is not None else self.started_s
            if j.job == "tables":
                tables.add_metric([j.name], max(now - last, 0.0))
                continue
            f = j.ctx.flow
            ages[j.job].add_metric([f.name, f.source, f.target], max(now - last, 0.0))
        active = GaugeMetricFamily(
            "mirror_query_active", "1 while the flow's query runs", labels=["flow", "job"]
        )
        for flow, job, is_active in self.queries:
            try:
                active.add_metric([flow, job], 1.0 if is_active() else 0.0)
            except Exception:  # a scrape must not fail because Spark is busy stopping
                active.add_metric([flow, job], 0.0)
        yield from (*ages.values(), tables, active)
