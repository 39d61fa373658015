"""One partition of ``mirror verify``: read both sides and compare them through the segments.

A :class:`PartitionTask` (JSON-serialisable, so it can run as a Spark task) holds the segments,
the ``skip`` events' ranges, the verified point to resume from and the target's range to read;
:func:`verify_partition` walks the source records of ``[verified point, replicated end)`` in
lockstep with the target's records (:func:`~mirror_lib.offsets.record_compare.compare_ranges`),
which also finds the stray ones, and then counts what is not replicated yet. :func:`run_tasks`
runs many in parallel.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from mirror_lib.errors import BrokerError
from mirror_lib.offsets.record_compare import OffsetMap, Rec, SkippedRanges, compare_ranges
from mirror_lib.offsets.segments import Segment
from mirror_lib.replication.context import FlowContext

#: A tail longer than this is not counted record by record: "behind by" is then the offset gap.
BEHIND_SCAN_MAX = 100_000


# --- Reading partitions -------------------------------------------------------------------------


def read_partition(
    conf: dict[str, Any], topic: str, partition: int, start: int, stop: int, timeout_s: float = 60
) -> Generator[Rec, None, None]:
    """Committed records of ``topic[partition]`` with ``start <= offset < stop``, in order.

    Ends early at the end of the partition; no record within ``timeout_s`` raises a transient
    :class:`BrokerError` rather than answering with a partial range.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition  # lazy: optional extra "kafka"

    from mirror_lib.kafka.reader import READ_TO_END, consume  # lazy: confluent-kafka

    if stop <= start:
        return
    consumer = Consumer({
        "group.id": f"__mirror_verify.{uuid.uuid4().hex}",
        "isolation.level": "read_committed",
        **READ_TO_END,
        **conf,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout_s
        while True:
            msgs = consume(consumer, 2000, timeout=0.2)
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
    skipped: list[tuple[int, int]] = field(default_factory=list)  # ranges of skip events
    # the target is read from here (<= downstream_from: where strays may be unreported yet) to
    # its end as it was before the segments were read, to see records past the replicated end
    downstream_read_from: int | None = None  # None: downstream_from
    target_end_offset: int = 0


@dataclass
class PartitionVerification:
    """One partition's answer, as printed and as stored in the ``verifications`` table."""

    flow: str
    topic: str
    remote_topic: str
    partition: int
    status: str  # complete | behind | stray | different
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
    skipped: int = 0  # source records in the range not copied on purpose (skip events)
    stray: int = 0  # target records that are not copies of source records
    stray_offsets: str = ""  # their downstream offsets: "7, 40-41"
    detail: str = ""
    duration_ms: float = 0.0
    verified_ts: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())

    @property
    def differs(self) -> bool:
        """The target is not an exact copy: a difference, or records the source never had."""
        return self.status in ("different", "stray")

    def describe(self) -> str:
        """``complete``, ``behind by N``, ``stray: N records ... at downstream offsets ...`` or
        ``different at upstream offset U / downstream ...``, with the records skipped on
        purpose, if any."""
        if self.status == "different":
            return (
                f"different at upstream offset {self.diff_upstream_offset} / downstream offset "
                f"{self.diff_downstream_offset}: {self.detail}"
            )
        text = f"behind by {self.behind}" if self.behind else "complete"
        if self.stray:
            stray = f"stray: {stray_text(self.stray, self.stray_offsets)}"
            text = f"{stray}; {text}" if self.behind else stray
        return f"{text}, {skipped_text(self.skipped)}" if self.skipped else text

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "result": self.describe()}


def _segments_of(task: PartitionTask) -> list[Segment]:
    return [Segment(*s) for s in task.segments]


def skipped_text(n: int) -> str:
    return f"{n} skipped on purpose (skip events)"


def stray_text(n: int, offsets: str) -> str:
    """``2 records on the target that are not copies of source records, at downstream offsets
    7, 40``."""
    if n == 1:
        what = "1 record on the target that is not a copy of a source record, at downstream offset"
    else:
        what = f"{n} records on the target that are not copies of source records, at downstream"
        what += " offsets"
    return f"{what} {offsets}"


def verify_partition(task: PartitionTask, timeout_s: float = 60) -> PartitionVerification:
    """Compare one partition from its verified point to the replicated end (runs anywhere)."""
    started = time.monotonic()
    ctx = FlowContext.from_options(task.options)
    offsets = OffsetMap(_segments_of(task))
    skipped = SkippedRanges(task.skipped)
    u_to, d_to = offsets.upstream_end, max(offsets.downstream_end, task.target_end_offset)
    d_from = (
        task.downstream_from if task.downstream_read_from is None else task.downstream_read_from
    )
    a_conf, b_conf = ctx.client("source", "consumer"), ctx.client("target", "consumer")
    with (
        closing(read_partition(a_conf, task.topic, task.partition, task.upstream_from, u_to,
                               timeout_s)) as ups,
        closing(read_partition(b_conf, task.remote_topic, task.partition, d_from, d_to,
                               timeout_s)) as downs,
    ):  # fmt: skip
        out = compare_ranges(
            offsets,
            ups,
            downs,
            upstream_from=task.upstream_from,
            downstream_from=task.downstream_from,
            checksum_seed=task.checksum_before,
            skipped=skipped,
        )
    behind, status = 0, "different" if out.difference else "complete"
    n_skipped, end = out.skipped, task.source_end_offset
    if out.difference is None and end > out.upstream_next:
        tail = read_partition(a_conf, task.topic, task.partition, out.upstream_next, end, timeout_s)
        with closing(tail):
            for n, rec in enumerate(tail, 1):
                if rec.offset in skipped:
                    n_skipped += 1
                else:
                    behind += 1
                if n >= BEHIND_SCAN_MAX:
                    behind = end - out.upstream_next - (n - behind)
                    break
        status = "behind" if behind else "complete"
    strays = out.strays
    stray_note = stray_text(strays.count, strays.offsets()) if strays.count else ""
    if strays.count and out.difference is None:
        status = "stray"
    diff = out.difference or (None, strays.first, "")
    skip_note = skipped_text(n_skipped) if n_skipped else ""
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
        skipped=n_skipped,
        stray=strays.count,
        stray_offsets=strays.offsets(),
        detail="; ".join(x for x in (diff[2], stray_note, task.note, skip_note) if x),
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
