"""Stand-ins for the metrics collector's inputs: metrics-topic events and companion jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mirror_lib.replication.copy.copy_state import bucket_counts


def batch_event(
    topic: str,
    partition: int,
    latencies_ms: list[float],
    *,
    flow: str = "A->B",
    slot: int = 0,
    batch_id: int = 0,
    txn: int | None = 0,
    aborted: int = 0,
    nbytes: int = 0,
) -> dict[str, Any]:
    """A ``batch`` event as a copy task writes it for ``latencies_ms`` (one per record)."""
    n = len(latencies_ms)
    event: dict[str, Any] = {
        "type": "batch",
        "flow": flow,
        "source": "A",
        "target": "B",
        "topic": topic,
        "remote_topic": f"A.{topic}",
        "partition": partition,
        "query_id": "q",
        "batch_id": batch_id,
        "slot": slot,
        "records": n,
        "bytes": nbytes,
        "latency_ms": {
            "min": min(latencies_ms),
            "avg": sum(latencies_ms) / n,
            "max": max(latencies_ms),
        },
        "age_ms": {"min": 1.0, "avg": 2.0, "max": 3.0},
        "latency_ms_buckets": bucket_counts(latencies_ms),
        "aborted": aborted,
    }
    if txn is not None:
        event["txn"] = txn
    return event


@dataclass
class FakeFlow:
    name: str
    source: str
    target: str


@dataclass
class FakeCtx:
    flow: FakeFlow


@dataclass
class FakeCompanion:
    """What the collector reads of a CompanionJob."""

    job: str
    flow: str
    last_success_s: float | None
    ctx: FakeCtx = field(init=False)

    def __post_init__(self) -> None:
        source, target = self.flow.split("->")
        self.ctx = FakeCtx(FakeFlow(self.flow, source, target))


@dataclass
class FakeTables:
    """What the collector reads of a TablesJob: the cluster and its last success."""

    name: str
    last_success_s: float | None
    job: str = "tables"
