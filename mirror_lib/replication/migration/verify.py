"""``mirror verify``: prove per partition that the target holds exactly what the source holds.

The flow's own segments (docs/design.md#d4-exact-offset-mapping: every contiguous run
``upstream -> downstream`` the sink committed) say where each source record must be on the
target, so gaps on either side (transaction markers, aborted records, compaction at copy time)
are accounted for, and its ``skip`` events say which source records were left out on purpose.
Per partition the source records of ``[verified point, replicated end)`` are walked in lockstep
with the target records of the mapped range and compared field by field (key, value, headers,
timestamp); the first mismatch is reported with both offsets
(:mod:`mirror_lib.replication.migration.verify_partition`). The target is also read where a
record the source never had may lie: before the replicated range (on a first verification),
between its copies, and after it up to the target's end; every record there that no segment maps is
reported as stray, by offset. A sha256 chained over every verified record (count and checksum
are stored with the verified point in the ``verifications`` table), so the next run resumes
there. Partitions run in parallel: Spark tasks when a session is given, threads otherwise.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.admin import admin_client
from mirror_lib.kafka.lookups import list_topic_partitions, partition_bounds
from mirror_lib.kafka.reach import check_client_addresses
from mirror_lib.mm2.formats import TP
from mirror_lib.offsets.record_compare import OffsetMap
from mirror_lib.offsets.segments import Segment
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.migration.verify_partition import (
    PartitionTask,
    PartitionVerification,
    run_tasks,
    skipped_text,
)
from mirror_lib.replication.translate import load_segments

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


def _previous_points(config: MirrorConfig, flow: str, spark: Any) -> dict[TP, dict[str, Any]]:
    from mirror_lib.tables.state_tables import read_rows  # lazy: deltalake, pyarrow

    latest: dict[TP, dict[str, Any]] = {}
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


@dataclass(frozen=True)
class TargetSnapshot:
    """The target's ends, taken before the segments are read.

    A record committed below ``ends`` was committed with its ``segments`` event, which the
    metrics topic holds below ``metrics_end`` (its high watermark, taken after ``ends``): the
    segments read up to there account for every copy the flow made below ``ends``. Without
    transactions (``mirror.delivery = at_least_once``) the segments follow their records, so a
    flow copying meanwhile can show its newest records as strays.
    """

    ends: dict[TP, int]  # remote partition -> last stable offset
    metrics_end: int = 0
    whole_history: bool = True  # the metrics topic never lost a record (retention)


def target_snapshot(ctx: FlowContext, tps: Sequence[TP]) -> TargetSnapshot:
    """The ends of the remote partitions of ``tps`` that exist, then the metrics topic's."""
    admin = admin_client(ctx.client("target", "admin"))
    existing = list_topic_partitions(admin)
    remote = [(ctx.remote_topic(t), p) for t, p in tps if p < existing.get(ctx.remote_topic(t), 0)]
    ends = {tp: hi for tp, (_lo, hi) in partition_bounds(admin, remote).items()}
    if ctx.metrics_topic not in existing:  # nothing copied yet: no record there is a copy
        return TargetSnapshot(ends)
    metrics = (ctx.metrics_topic, 0)
    low, high = partition_bounds(admin, [metrics], committed=False)[metrics]
    return TargetSnapshot(ends, high, low == 0)


def plan_task(
    ctx: FlowContext,
    topic: str,
    partition: int,
    segments: Sequence[Segment],
    bounds: tuple[int, int],
    previous: dict[str, Any] | None,
    skipped: Sequence[tuple[int, int]] = (),
    *,
    target_end: int = 0,
    whole_history: bool = True,
    taken_over: bool = False,
) -> PartitionTask:
    """Where to start: the stored verified point if it still fits the segments, else the start.

    A verification always starts at the oldest segment still on the metrics topic or later:
    records copied before it have no mapping left to check them against. The target is read on
    to ``target_end``, and from where a stray record may be unreported: its start when the
    verification starts over, else the stored point or the stray the last run reported first.
    Without the metrics topic's ``whole_history``, a record below the oldest segment may be a
    copy whose segments retention removed: that part is not read. Nor is it when the flow
    ``taken_over`` the partition from MirrorMaker 2: what lies below its first segment is MM2's
    copy, of which we keep no mapping.
    """
    offsets = OffsetMap(segments)
    low, end = bounds
    first = segments[0].upstream_start if segments else low
    start = max(low, first)
    u_from, d_from = start, 0 if start == 0 else offsets.downstream(start)
    whole = whole_history and not taken_over
    known = 0 if whole else segments[0].downstream_start if segments else target_end
    look_from = known
    total, seed, note = 0, "", ""
    if previous is not None:
        u, d = previous["upstream_to"], previous["downstream_to"]
        if u >= start and fits(offsets, u, d):
            u_from, d_from = u, d
            total, seed = previous["total_records"] or 0, previous["checksum"] or ""
            look_from = d
            if previous.get("status") == "stray":  # again from the first stray it reported
                look_from = max(known, min(d, previous["diff_downstream_offset"]))
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
        skipped=[(first, last) for first, last in skipped if last >= u_from],
        downstream_read_from=min(d_from, look_from) if segments else look_from,
        target_end_offset=target_end,
    )


@dataclass
class VerifyReport:
    """Per-partition verifications of one flow; ``ok``: no partition differs."""

    flow: str
    run_id: str
    partitions: list[PartitionVerification]

    @property
    def ok(self) -> bool:
        return not any(p.differs for p in self.partitions)

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
    check_client_addresses(config, [ctx.flow.name], heartbeats=False)  # own bootstrap.servers
    partitions = flow_partitions(ctx, topics)
    tps = [(t, p) for t, n in partitions.items() for p in range(n)]
    bounds = partition_bounds(admin_client(ctx.client("source", "admin")), tps)
    target = target_snapshot(ctx, tps)  # before the segments: they must cover what it holds
    skips: dict[TP, list[tuple[int, int]]] = {}
    mm2_below: dict[TP, int] = {}
    indexes = load_segments(ctx, skips=skips, until=target.metrics_end, mm2_below=mm2_below)
    previous = _previous_points(config, ctx.flow.name, spark) if resume else {}
    tasks = [
        plan_task(
            ctx,
            t,
            p,
            indexes[(t, p)].segments if (t, p) in indexes else (),
            bounds[(t, p)],
            previous.get((t, p)),
            skips.get((t, p), ()),
            target_end=target.ends.get((ctx.remote_topic(t), p), 0),
            whole_history=target.whole_history,
            taken_over=(t, p) in mm2_below,
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
    stray = sum(p.status == "stray" for p in report.partitions)
    behind = sum(p.status == "behind" for p in report.partitions)
    skipped = sum(p.skipped for p in report.partitions)
    lines.append(
        f"{report.flow}: {len(report.partitions)} partitions, {different} different, "
        f"{f'{stray} stray, ' if stray else ''}{behind} behind"
        f"{', ' + skipped_text(skipped) if skipped else ''} (run {report.run_id})"
    )
    return "\n".join(lines)
