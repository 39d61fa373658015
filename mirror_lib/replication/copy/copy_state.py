"""The open transaction of one partition inside a copy task
(:mod:`mirror_lib.replication.copy.copier`).

Per partition: where it stands, the upstream runs of the transaction, the two delivery reports
that give its downstream range (or every report, in exact mode), and the record timestamps that
become the latency summary. Pure bookkeeping, no Kafka calls.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from confluent_kafka import KafkaError

from mirror_lib.errors import BrokerError
from mirror_lib.offsets.segments import Segment

#: Upper bounds (ms, inclusive) of the latency histogram in ``batch`` events; one more bucket
#: counts what is above the last (:mod:`mirror_lib.replication.metrics.prometheus` exposes it).
LATENCY_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000)
NO_END = 2**63 - 1  # the ``until`` end of a partition that has none (no ``--once``)
#: Milliseconds, one value a record: latencies and ages (numpy arrays).
Millis = npt.NDArray[np.float64]


def bucket_counts(values: npt.ArrayLike) -> list[int]:
    """Counts of ``values`` per bucket of :data:`LATENCY_BUCKETS_MS` (value <= bound), plus one
    for the values above the last bound."""
    a = np.asarray(values, dtype=np.float64)
    index = np.searchsorted(LATENCY_BUCKETS_MS, a, side="left")
    counts: list[int] = np.bincount(index, minlength=len(LATENCY_BUCKETS_MS) + 1).tolist()
    return counts


class Interleaved(Exception):
    """Another producer wrote into a remote partition inside our transaction."""


class Rewound(Exception):
    """A writer replaced its producer and went back to its ledger positions: its reader must
    read from there again."""


def summary(values: npt.ArrayLike) -> dict[str, float]:
    """min/avg/max/p50/p99 of a sequence of numbers (empty: {}).

    The percentiles are numpy's default (linear between the closest ranks), taken from one sort:
    ``np.percentile`` costs about 0.1 ms a call, and a commit summarizes every partition twice.
    """
    a = np.sort(np.asarray(values, dtype=np.float64))
    if not a.size:
        return {}
    return {
        "min": float(a[0]),
        "avg": float(a.mean()),
        "max": float(a[-1]),
        "p50": _rank(a, 0.50),
        "p99": _rank(a, 0.99),
    }


def _rank(ordered: Millis, q: float) -> float:
    """The ``q`` quantile of sorted ``ordered``, linear between the closest ranks."""
    pos = (ordered.size - 1) * q
    lo = int(pos)
    hi = min(lo + 1, ordered.size - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


class PartState:
    """One upstream partition of the slice: position and the open transaction's accumulators."""

    __slots__ = (
        "acked",
        "bytes",
        "committed",
        "consumed",
        "d_first",
        "d_last",
        "d_next",
        "done",
        "error",
        "expect",
        "n",
        "partition",
        "pending",
        "remote",
        "runs",
        "topic",
        "ts",
        "until",
        "us",
    )

    def __init__(self, topic: str, partition: int, remote: str, start: int, until: int) -> None:
        self.topic, self.partition, self.remote = topic, partition, remote
        self.expect = self.committed = start
        self.until = until
        self.done = start >= until
        self.d_next = -1  # the downstream offset after this slice's last committed record
        self.reset()

    def reset(self) -> None:
        self.n = self.bytes = 0
        self.runs: list[tuple[int, int]] = []  # (upstream start, index of its first record)
        self.ts = array("d")
        self.consumed: list[tuple[float, int]] = []  # (consume time, records of that batch)
        self.d_first = self.d_last = -1
        self.acked = array("q")  # exact mode: every downstream offset, in order
        self.us = array("q")  # exact mode: every upstream offset, in order
        self.error: tuple[KafkaError, int] | None = None
        self.pending = 0  # delivery reports asked for and not yet served

    def successor(self) -> PartState:
        """The partition's state for the records after this transaction's (which stays here,
        waiting for its acknowledgements): same position, nothing open; its ``committed`` moves
        once this one's commit lands."""
        nxt = PartState(self.topic, self.partition, self.remote, self.expect, self.until)
        nxt.committed, nxt.done, nxt.d_next = self.committed, self.done, self.d_next
        return nxt

    def ack_first(self, err: KafkaError | None, msg: Any) -> None:
        self.pending -= 1
        if err is not None:
            self.error = self.error or (err, -1)
        else:
            self.d_first = msg.offset()

    def ack_last(self, err: KafkaError | None, msg: Any) -> None:
        self.pending -= 1
        if err is not None:
            self.error = self.error or (err, -1)
        else:
            self.d_last = msg.offset()

    def ack_both(self, err: KafkaError | None, msg: Any) -> None:
        self.pending -= 1
        if err is not None:
            self.error = self.error or (err, -1)
        else:
            self.d_first = self.d_last = msg.offset()

    def ack_each(self, err: KafkaError | None, msg: Any) -> None:
        self.pending -= 1
        if err is not None:
            self.error = self.error or (err, -1)
        else:
            self.acked.append(msg.offset())

    def latency_and_age(self, acked_ms: float) -> tuple[Millis, Millis]:
        """Every record's acknowledgement time and consume time minus its CreateTime (consume
        time for records without one), in ms, as numpy arrays."""
        ts = np.frombuffer(self.ts, dtype=np.float64)
        consumed = np.repeat([c for c, _n in self.consumed], [n for _c, n in self.consumed]).astype(
            np.float64
        )
        created = np.where(ts > 0, ts, consumed)
        return acked_ms - created, consumed - created

    def unreported(self) -> int:
        """Downstream offsets of the open transaction's span (from the end of the slice's last
        commit, when known) that carry none of its acknowledged records, in exact mode: without
        transactions, what a retry wrote twice (or another producer's records)."""
        if not self.acked:
            return 0
        first = self.d_next if self.d_next >= 0 else self.acked[0]
        return self.acked[-1] + 1 - first - len(self.acked)

    def committed_downstream(self) -> None:
        """The open transaction committed: remember where its records end downstream."""
        last = self.acked[-1] if self.acked else self.d_last
        if last >= 0:
            self.d_next = last + 1

    def segments(self, exact: bool) -> list[Segment]:
        """Segments of the open transaction (after every record was acknowledged)."""
        if exact:
            return exact_segments(self.us, self.acked)
        if self.d_last - self.d_first + 1 != self.n:
            raise Interleaved(f"{self.remote}[{self.partition}]")
        out = []
        bounds = [*(i for _u, i in self.runs[1:]), self.n]
        for (u, i), j in zip(self.runs, bounds, strict=True):
            d = self.d_first + i
            out.append(Segment(u, u + j - i - 1, d, d + j - i - 1))
        return out


def exact_segments(us: Sequence[int], ds: Sequence[int]) -> list[Segment]:
    if len(us) != len(ds):
        raise BrokerError("delivery reports missing for some records", transient=True)
    out: list[Segment] = []
    start = 0
    for i in range(1, len(us) + 1):
        if i == len(us) or us[i] != us[i - 1] + 1 or ds[i] != ds[i - 1] + 1:
            out.append(Segment(us[start], us[i - 1], ds[start], ds[i - 1]))
            start = i
    return out
