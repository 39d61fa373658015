"""``mirror verify``: prove per partition that the target holds exactly what the source holds.

The flow's own segments (D4: every contiguous run ``upstream -> downstream`` the sink committed)
say where each source record must be on the target, so gaps on either side (transaction markers,
aborted records, compaction at copy time) are accounted for. Per partition the source records of
``[verified point, replicated end)`` are walked in lockstep with the target records of the mapped
range and compared field by field (key, value, headers, timestamp); the first mismatch is
reported with both offsets. A sha256 chained over every verified record (count and checksum are
stored with the verified point in the ``verifications`` table), so the next run resumes there.
Partitions run in parallel: Spark tasks when a session is given, threads otherwise.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import BrokerError, ConfigError
from mirror_lib.kafka.admin import admin_client
from mirror_lib.kafka.lookups import list_topic_partitions, partition_bounds
from mirror_lib.offsets.record_compare import OffsetMap, Rec, compare_ranges
from mirror_lib.offsets.segments import Segment
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.translate import load_segments

#: A tail longer than this is not counted record by record: "behind by" is then the offset gap.
BEHIND_SCAN_MAX = 100_000


# --- Reading partitions -------------------------------------------------------------------------


def read_partition(
    conf: dict[str, Any], topic: str, partition: int, start: int, stop: int, timeout_s: float = 60
) -> Iterator[Rec]:
    """Committed records of ``topic[partition]`` with ``start <= offset < stop``, in order.

    Ends early at the end of the partition; no record within ``timeout_s`` raises a transient
    :class:`BrokerError` rather than answering with a partial range.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition  # lazy: optional extra "kafka"

    if stop <= start:
        return
    consumer = Consumer({
        "group.id": f"__mirror_verify.{uuid.uuid4().hex}",
        "isolation.level": "read_committed",
        "fetch.wait.max.ms": 100,
        **conf,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout_s
        while True:
            msgs = consumer.consume(2000, timeout=0.2)
            if msgs:
                deadline = time.monotonic() + timeout_s
            elif time.monotonic() > deadline:
                raise BrokerError(
                    f"reading {topic}[{partition}] from {start}: nothing for {timeout_s}s",
                    transient=True,
                )
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return
                    raise BrokerError(f"reading {topic}[{partition}]: {err.str()}", transient=True)
                if m.offset() >= stop:
                    return
                headers = tuple((k, v) for k, v in (m.headers() or ()))
                yield Rec(m.offset(), m.key(), m.value(), headers, m.timestamp()[1])
    finally:
        consumer.close()


# --- One partition ------------------------------------------------------------------------------


@dataclass
class PartitionTask:
    """Everything one partition's verification needs; JSON-serialisable for Spark tasks."""

    options: dict[str, str]
    topic: str
    remote_topic: str
    partition: int
    segments: list[tuple[int, int, int, int]]
    upstream_from: int
    downstream_from: int
    source_end_offset: int
    total_before: int = 0
    checksum_before: str = ""
    note: str = ""


@dataclass
class PartitionVerification:
    """One partition's answer, as printed and as stored in the ``verifications`` table."""

    flow: str
    topic: str
    remote_topic: str
    partition: int
    status: str  # complete | behind | different
    behind: int
    upstream_from: int
    upstream_to: int
    downstream_from: int
    downstream_to: int
    records: int
    total_records: int
    checksum: str
    source_end_offset: int
    diff_upstream_offset: int | None = None
    diff_downstream_offset: int | None = None
    detail: str = ""
    duration_ms: float = 0.0
    verified_ts: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())

    def describe(self) -> str:
        """``complete``, ``behind by N`` or ``different at upstream offset U / downstream ...``."""
        if self.status == "different":
            return (
                f"different at upstream offset {self.diff_upstream_offset} / downstream offset "
                f"{self.diff_downstream_offset}: {self.detail}"
            )
        return "complete" if self.status == "complete" else f"behind by {self.behind}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "result": self.describe()}


def _segments_of(task: PartitionTask) -> list[Segment]:
    return [Segment(*s) for s in task.segments]


def verify_partition(task: PartitionTask, timeout_s: float = 60) -> PartitionVerification:
    """Compare one partition from its verified point to the replicated end (runs anywhere)."""
    started = time.monotonic()
    ctx = FlowContext.from_options(task.options)
    offsets = OffsetMap(_segments_of(task))
    u_to, d_to = offsets.upstream_end, offsets.downstream_end
    a_conf, b_conf = ctx.client("source", "consumer"), ctx.client("target", "consumer")
    with (
        closing(read_partition(a_conf, task.topic, task.partition, task.upstream_from, u_to,
                               timeout_s)) as ups,
        closing(read_partition(b_conf, task.remote_topic, task.partition, task.downstream_from,
                               d_to, timeout_s)) as downs,
    ):  # fmt: skip
        out = compare_ranges(
            offsets,
            ups,
            downs,
            upstream_from=task.upstream_from,
            downstream_from=task.downstream_from,
            checksum_seed=task.checksum_before,
        )
    behind, status = 0, "different" if out.difference else "complete"
    end = task.source_end_offset
    if out.difference is None and end > out.upstream_next:
        tail = read_partition(a_conf, task.topic, task.partition, out.upstream_next, end, timeout_s)
        with closing(tail):
            for n, _rec in enumerate(tail, 1):
                behind = n
                if n >= BEHIND_SCAN_MAX:
                    behind = end - out.upstream_next
                    break
        status = "behind" if behind else "complete"
    diff = out.difference or (None, None, "")
    return PartitionVerification(
        flow=ctx.flow.name,
        topic=task.topic,
        remote_topic=task.remote_topic,
        partition=task.partition,
        status=status,
        behind=behind,
        upstream_from=task.upstream_from,
        upstream_to=out.upstream_next,
        downstream_from=task.downstream_from,
        downstream_to=out.downstream_next,
        records=out.records,
        total_records=task.total_before + out.records,
        checksum=out.checksum,
        source_end_offset=end,
        diff_upstream_offset=diff[0],
        diff_downstream_offset=diff[1],
        detail="; ".join(x for x in (diff[2], task.note) if x),
        duration_ms=(time.monotonic() - started) * 1000,
    )


def _verify_json(payload: str) -> str:
    return json.dumps(verify_partition(PartitionTask(**json.loads(payload))).as_dict())


def _verify_arrow(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body: one JSON task per row in, one JSON result per row out."""
    import pyarrow as pa  # lazy: optional extra "delta/spark"

    for batch in batches:
        results = [_verify_json(t) for t in batch.column("task").to_pylist()]
        yield pa.RecordBatch.from_pydict({"result": results})


def run_tasks(
    tasks: Sequence[PartitionTask], spark: Any = None, parallelism: int = 4
) -> list[PartitionVerification]:
    """Verify partitions in parallel: one Spark task each with a session, else threads."""
    if not tasks:
        return []
    if spark is not None:
        payloads = [(json.dumps(asdict(t)),) for t in tasks]
        df = spark.createDataFrame(payloads, "task string").repartition(len(payloads))
        rows = df.mapInArrow(_verify_arrow, "result string").collect()
        results = [json.loads(r["result"]) for r in rows]
        for r in results:
            r.pop("result")
        out = [PartitionVerification(**r) for r in results]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(tasks)))) as pool:
            out = list(pool.map(verify_partition, tasks))
    return sorted(out, key=lambda r: (r.topic, r.partition))


# --- A flow -------------------------------------------------------------------------------------


def flow_partitions(ctx: FlowContext, topics: Sequence[str] | None = None) -> dict[str, int]:
    """Source topics the flow replicates (all, or ``topics``) -> partition count."""

    existing = list_topic_partitions(admin_client(ctx.client("source", "admin")))
    policy = ctx.policy
    replicated = {
        t: n
        for t, n in existing.items()
        if ctx.should_replicate(t) and not policy.is_internal_topic(t)
        and not policy.is_heartbeats_topic(t)
    }  # fmt: skip
    if not topics:
        return dict(sorted(replicated.items()))
    for t in topics:
        if t not in replicated:
            raise ConfigError(
                "--topics",
                t,
                f"a topic on {ctx.source} that {ctx.flow.name} replicates "
                f"({', '.join(sorted(replicated)) or 'none'})",
            )
    return {t: replicated[t] for t in sorted(set(topics))}


def _previous_points(
    config: MirrorConfig, flow: str, spark: Any
) -> dict[tuple[str, int], dict[str, Any]]:
    from mirror_lib.tables.state_tables import read_rows  # lazy: deltalake, pyarrow

    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for row in read_rows(config, "verifications", spark):
        if row["flow"] != flow:
            continue
        key = (row["topic"], row["partition"])
        if key not in latest or (row["verified_ts"], row["run_id"]) > (
            latest[key]["verified_ts"],
            latest[key]["run_id"],
        ):
            latest[key] = row
    return latest


def fits(offsets: OffsetMap, upstream: int, downstream: int) -> bool:
    """True if a stored point (next upstream, next downstream) still matches the segments."""
    if upstream == 0 or downstream == 0:
        return upstream == downstream == 0
    return offsets.copied(upstream - 1) and offsets.downstream(upstream - 1) == downstream - 1


def plan_task(
    ctx: FlowContext,
    topic: str,
    partition: int,
    segments: Sequence[Segment],
    bounds: tuple[int, int],
    previous: dict[str, Any] | None,
) -> PartitionTask:
    """Where to start: the stored verified point if it still fits the segments, else the start.

    A verification always starts at the oldest segment still on the metrics topic or later:
    records copied before it have no mapping left to check them against.
    """
    offsets = OffsetMap(segments)
    low, end = bounds
    first = segments[0].upstream_start if segments else low
    start = max(low, first)
    u_from, d_from = start, 0 if start == 0 else offsets.downstream(start)
    total, seed, note = 0, "", ""
    if previous is not None:
        u, d = previous["upstream_to"], previous["downstream_to"]
        if u >= start and fits(offsets, u, d):
            u_from, d_from = u, d
            total, seed = previous["total_records"] or 0, previous["checksum"] or ""
        else:
            note = f"stored point {u}/{d} does not fit the current segments: verified from {start}"
    return PartitionTask(
        options=ctx.to_options(),
        topic=topic,
        remote_topic=ctx.remote_topic(topic),
        partition=partition,
        segments=[
            (s.upstream_start, s.upstream_end, s.downstream_start, s.downstream_end)
            for s in segments
        ],
        upstream_from=u_from,
        downstream_from=d_from,
        source_end_offset=end,
        total_before=total,
        checksum_before=seed,
        note=note,
    )


@dataclass
class VerifyReport:
    """Per-partition verifications of one flow; ``ok``: no partition differs."""

    flow: str
    run_id: str
    partitions: list[PartitionVerification]

    @property
    def ok(self) -> bool:
        return all(p.status != "different" for p in self.partitions)

    @property
    def complete(self) -> bool:
        return all(p.status == "complete" for p in self.partitions)

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "run_id": self.run_id,
            "ok": self.ok,
            "complete": self.complete,
            "partitions": [p.as_dict() for p in self.partitions],
        }


def verify_flow(
    config: MirrorConfig,
    flow: str,
    topics: Sequence[str] | None = None,
    *,
    spark: Any = None,
    resume: bool = True,
    record: bool = True,
    parallelism: int = 4,
) -> VerifyReport:
    """Verify every partition of the flow's topics (or ``topics``) and record the results.

    ``resume`` starts each partition at its stored verified point; ``record`` appends one row
    per partition to the ``verifications`` table.
    """

    ctx = FlowContext.create(config, flow)
    partitions = flow_partitions(ctx, topics)
    tps = [(t, p) for t, n in partitions.items() for p in range(n)]
    bounds = partition_bounds(admin_client(ctx.client("source", "admin")), tps)
    indexes = load_segments(ctx)
    previous = _previous_points(config, ctx.flow.name, spark) if resume else {}
    tasks = [
        plan_task(
            ctx,
            t,
            p,
            indexes[(t, p)].segments if (t, p) in indexes else (),
            bounds[(t, p)],
            previous.get((t, p)),
        )
        for t, p in tps
    ]
    run_id = uuid.uuid4().hex
    report = VerifyReport(ctx.flow.name, run_id, run_tasks(tasks, spark, parallelism))
    if record:
        record_report(config, report, spark)
    return report


def record_report(config: MirrorConfig, report: VerifyReport, spark: Any = None) -> None:
    """Append one ``verifications`` row per partition of ``report``."""
    from mirror_lib.tables.state_tables import append_rows  # lazy: deltalake, pyarrow

    flow = config.flow(report.flow)
    rows = []
    for p in report.partitions:
        ts = datetime.fromisoformat(p.verified_ts)
        row = {**asdict(p), "run_id": report.run_id, "source": flow.source, "target": flow.target}
        rows.append({**row, "verified_ts": ts, "record_ts": ts})
    append_rows(config, "verifications", rows, spark)


def format_report(report: VerifyReport) -> str:
    """One line per partition, then the verdict."""
    lines = [f"{'topic':<40} {'partition':>9} {'records':>10} {'verified to':>12}  result"]
    for p in report.partitions:
        lines.append(
            f"{p.topic:<40} {p.partition:>9} {p.total_records:>10} {p.upstream_to:>12}  "
            f"{p.describe()}"
        )
    different = sum(p.status == "different" for p in report.partitions)
    behind = sum(p.status == "behind" for p in report.partitions)
    lines.append(
        f"{report.flow}: {len(report.partitions)} partitions, {different} different, "
        f"{behind} behind (run {report.run_id})"
    )
    return "\n".join(lines)
