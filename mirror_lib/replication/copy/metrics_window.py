"""A writer's ``batch`` metrics, summed per partition over about a second of transactions.

A ``batch`` event per partition per transaction made the metrics topic and the
``replication_metrics`` table grow with the commit rate, not with the records: at 5,000
records/s and a commit every 20 ms, 10.5 GB of metrics a day on the target
(docs/operations/state.md). The window sums what committed transactions copied, partition by
partition, and the first commit ``mirror.metrics.interval.ms`` after it opened tells the sums in
its own transaction: exactly once, as the records are. A slice's last commit tells what is left,
and a copy task whose records stopped tells it after two intervals, in a transaction of its
own. What a window holds when its task fails, or is killed by a run that stops, is not told: at
most an interval of counts, while the records, the ledger and the ``segments`` events stay
exact. A task's first window opens when the task starts, so that the lost interval is never its
start-up transaction, which may hold the whole backlog.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from mirror_lib.mm2.formats import TP
from mirror_lib.replication import events
from mirror_lib.replication.copy.copy_state import Millis, bucket_counts, summary

if TYPE_CHECKING:
    from mirror_lib.offsets.segments import Segment
    from mirror_lib.replication.copy.copy_state import PartState
    from mirror_lib.replication.copy.writer import TargetWriter


#: Latencies a window keeps per partition for its percentiles: past this, every other one, and so
#: on (a backlog copies hundreds of thousands of records a second). Count, min, max and mean stay
#: exact, and so do the buckets.
MAX_SAMPLES = 65_536


@dataclass
class Spread:
    """Values (ms) of a window's records: exact count, min, max and sum, and the values for the
    percentiles, every ``stride``-th once there are more than :data:`MAX_SAMPLES`."""

    count: int = 0
    low: float = float("inf")
    high: float = float("-inf")
    total: float = 0.0
    stride: int = 1
    samples: list[Millis] = field(default_factory=list)

    @classmethod
    def of(cls, values: Millis) -> Spread:
        out = cls()
        if values.size:
            out.count, out.total = int(values.size), float(values.sum())
            out.low, out.high = float(values.min()), float(values.max())
            out.samples = [values]
            out._thin()
        return out

    def __add__(self, later: Spread) -> Spread:
        stride = max(self.stride, later.stride)
        out = Spread(
            self.count + later.count, min(self.low, later.low), max(self.high, later.high),
            self.total + later.total, stride,
            [a[:: stride // self.stride] for a in self.samples]
            + [a[:: stride // later.stride] for a in later.samples],
        )  # fmt: skip
        out._thin()
        return out

    def _thin(self) -> None:
        while sum(a.size for a in self.samples) > MAX_SAMPLES:
            self.samples = [a[::2] for a in self.samples]
            self.stride *= 2

    def summary(self) -> dict[str, float]:
        """min/avg/max (exact) and p50/p99 (of the samples); {} without values."""
        if not self.count:
            return {}
        out = summary(np.concatenate(self.samples))
        out.update(min=self.low, avg=self.total / self.count, max=self.high)
        return out


@dataclass
class PartMetrics:
    """What one partition's transactions copied: records, bytes, the offsets they spanned, the
    source's lag after the last, and their records' latency and age."""

    remote: str
    records: int
    bytes: int
    transactions: int
    upstream: tuple[int, int]
    downstream: tuple[int, int]
    lag: int | None
    latency: Spread
    age: Spread
    buckets: npt.NDArray[np.int64]  # counts per latency bucket

    @classmethod
    def of(
        cls, part: PartState, segs: list[Segment], acked_ms: float, lag: int | None
    ) -> PartMetrics:
        """One transaction's metrics of ``part`` (whose ``segs`` were acknowledged at
        ``acked_ms``)."""
        latency, age = part.latency_and_age(acked_ms)
        return cls(
            part.remote, part.n, part.bytes, 1,
            (segs[0].upstream_start, segs[-1].upstream_end),
            (segs[0].downstream_start, segs[-1].downstream_end),
            lag, Spread.of(latency), Spread.of(age), np.asarray(bucket_counts(latency)),
        )  # fmt: skip

    def __add__(self, later: PartMetrics) -> PartMetrics:
        return PartMetrics(
            self.remote,
            self.records + later.records,
            self.bytes + later.bytes,
            self.transactions + later.transactions,
            (self.upstream[0], later.upstream[1]),
            (self.downstream[0], later.downstream[1]),
            later.lag,
            self.latency + later.latency,
            self.age + later.age,
            self.buckets + later.buckets,
        )


def merged(first: dict[TP, PartMetrics], later: dict[TP, PartMetrics]) -> dict[TP, PartMetrics]:
    """``first`` and ``later`` summed per partition (new objects: neither is changed)."""
    out = dict(first)
    for tp, m in later.items():
        out[tp] = out[tp] + m if tp in out else m
    return out


class MetricsWindow:
    """The sums a writer has not told yet, and when their window opened."""

    def __init__(self, interval_ms: int, started: float | None = None) -> None:
        self.interval_s = interval_ms / 1000.0
        self.parts: dict[TP, PartMetrics] = {}
        # Monotonic time the window opened: its first transaction, but the first window opens
        # when the writer starts (``started``): a task's first transaction, at start-up often
        # the whole backlog, is told by its own commit once the slice has run an interval, not
        # held for a second commit that a stop may not allow.
        self.opened: float | None = started
        self.closing = False  # the slice is ending: tell everything at the next commit

    def due(self, now: float) -> bool:
        """The window needs a transaction of its own: the slice is ending, or no commit carried
        it for two intervals (records stopped). A regular commit tells it after one, so at a
        steady rate the window never costs a transaction."""
        if not self.parts or self.opened is None:
            return False
        return self.closing or now - self.opened >= 2 * self.interval_s

    def tells(self, staged: dict[TP, PartMetrics], now: float) -> bool:
        """Whether a commit that adds ``staged`` tells the window."""
        if self.interval_s <= 0 or self.closing:
            return True
        opened = self.opened if self.opened is not None else (now if staged else None)
        return opened is not None and now - opened >= self.interval_s

    def settle(self, staged: dict[TP, PartMetrics], told: bool, now: float) -> None:
        """A commit landed: it told the window (and ``staged``), or ``staged`` joins it."""
        if told:
            self.parts, self.opened = {}, None
            return
        if staged and self.opened is None:
            self.opened = now
        self.parts = merged(self.parts, staged)


def batch_events(w: TargetWriter, parts: dict[TP, PartMetrics]) -> list[dict[str, Any]]:
    """A ``batch`` event (counts, latency, lag) per partition of ``parts``."""
    out: list[dict[str, Any]] = []
    for (topic, partition), m in parts.items():
        out.append(
            events.flow_event(
                w.ctx,
                "batch",
                topic=topic,
                remote_topic=m.remote,
                partition=partition,
                batch_id=w.batch_id,
                query_id=w.query_id,
                slot=w.slot,
                records=m.records,
                bytes=m.bytes,
                upstream_first=m.upstream[0],
                upstream_last=m.upstream[1],
                downstream_first=m.downstream[0],
                downstream_last=m.downstream[1],
                lag=m.lag,
                latency_ms=m.latency.summary(),
                age_ms=m.age.summary(),
                latency_ms_buckets=m.buckets.tolist(),
                txn=w.result.transactions,
                transactions=m.transactions,
                aborted=w.aborts_unreported,
            )
        )
    return out
