"""``mirror cutover``: move a flow's consumers from A to B in tracked, provable steps.

1. readiness: replication lag, checkpoint age, heartbeat age; refuse when not ready;
2. producers: until the user confirms producers write to B (``producers_stopped``), the partitions
   are recorded ``migrating``; then A's end offsets are the cutover point;
3. replicated: wait until A's end offsets are replicated and verified
(:mod:`mirror_lib.replication.migration.verify`);
4. groups: translate every selected group's offsets on A exactly (segments) and commit them on
   B - idle groups only, never rewinding an offset B already has;
5. protection: lift the write protection of the remote topics on B
   (:mod:`mirror_lib.replication.companions.protection`), so that producers may write there;
6. report: per partition A's end offset and the matching offset on B (``migrated``);
7. later, ``retire``: A's topics may be deleted (``retired``).
Without ``apply`` nothing is changed (a dry run); each applied step appends rows to ``migrations``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import BrokerError, ConfigError, DecodeError
from mirror_lib.kafka.admin import admin_client
from mirror_lib.kafka.lookups import partition_bounds
from mirror_lib.kafka.mirror_client import MirrorClient
from mirror_lib.kafka.reach import check_client_addresses, check_flow_clusters
from mirror_lib.kafka.reader import read_topic
from mirror_lib.mm2.formats import TP, Checkpoint
from mirror_lib.replication.companions.protection import lift_protection
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.migration.cutover_groups import (
    GroupMove,
    commit_group_moves,
    plan_group_moves,
)
from mirror_lib.replication.migration.verify import flow_partitions, record_report, verify_flow
from mirror_lib.replication.segment_view import SegmentView
from mirror_lib.replication.translate import reader_conf

RULE = (
    "a consumer that keeps offsets outside Kafka: offsets below A's end offset map through the "
    "translation (`mirror translate --offsets-json` / `--spark-checkpoint`); a consumer at A's "
    "end offset continues on B at the matching offset, and everything after it is new on B"
)


@dataclass
class CutoverOptions:
    """What to do; the defaults are a dry run of every step."""

    groups: list[str] | None = None
    topics: list[str] | None = None
    producers_stopped: bool = False
    apply: bool = False
    retire: bool = False
    max_lag: int = 10_000
    max_age_s: float = 300
    wait_s: float = 300

    def __post_init__(self) -> None:
        for key, value, least in (("max_lag", self.max_lag, 0), ("max_age_s", self.max_age_s, 0),
                                  ("wait_s", self.wait_s, 0)):  # fmt: skip
            if value < least:
                raise ConfigError(key, value, f"a number >= {least}")
        if self.retire and self.producers_stopped:
            raise ConfigError(
                "retire", True, "retire alone, after a cutover with producers_stopped"
            )


@dataclass
class Step:
    name: str
    status: str  # ok | done | would | waiting | refused
    detail: str


@dataclass
class PartitionCutover:
    topic: str
    remote_topic: str
    partition: int
    source_end_offset: int
    target_offset: int
    status: str


@dataclass
class CutoverResult:
    flow: str
    run_id: str
    dry_run: bool
    steps: list[Step] = field(default_factory=list)
    partitions: list[PartitionCutover] = field(default_factory=list)
    groups: list[GroupMove] = field(default_factory=list)
    rule: str = RULE

    @property
    def ok(self) -> bool:
        """False when a step was refused."""
        return all(s.status != "refused" for s in self.steps)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def readiness(
    ctx: FlowContext,
    ends: dict[TP, int],
    segments: SegmentView,
    options: CutoverOptions,
    groups: set[str],
) -> Step:
    """Lag (A's end - replicated end, summed), checkpoint age of ``groups`` and heartbeat age."""
    lag = 0
    for tp, end in ends.items():
        index = segments.indexes.get(tp)
        last = index.last if index is not None else None
        lag += max(0, end - (last.upstream_end + 1 if last is not None else 0))
    problems = [f"lag {lag} > {options.max_lag}"] if lag > options.max_lag else []
    facts = [f"lag {lag} records"]
    now_ms = time.time() * 1000
    if groups and ctx.settings.emit_checkpoints:
        age = _checkpoint_age(ctx, groups, now_ms)
        facts.append("no checkpoint yet" if age is None else f"checkpoint age {age:.0f}s")
        if age is None or age > options.max_age_s:
            problems.append(f"checkpoint age {age if age is None else round(age)}s")
    if ctx.settings.emit_heartbeats:
        client = MirrorClient(ctx.client("target", "consumer"), ctx.policy)
        beats = client.latest_heartbeats([ctx.policy.heartbeats_topic()])
        beat = beats.get((ctx.source, ctx.target))
        age = None if beat is None else (now_ms - beat) / 1000
        facts.append("no heartbeat yet" if age is None else f"heartbeat age {age:.0f}s")
        if age is None or age > options.max_age_s:
            problems.append(f"heartbeat age {age if age is None else round(age)}s")
    if problems:
        limit = f"limits: lag {options.max_lag}, ages {options.max_age_s:.0f}s"
        return Step("readiness", "refused", f"not ready: {', '.join(problems)} ({limit})")
    return Step("readiness", "ok", ", ".join(facts))


def _checkpoint_age(ctx: FlowContext, groups: set[str], now_ms: float) -> float | None:
    """Seconds since the newest checkpoint of any of ``groups`` (None: none yet)."""
    newest = None
    for msg in read_topic(reader_conf(ctx), ctx.checkpoints_topic):
        try:
            group = Checkpoint.decode(msg.key(), msg.value()).group
        except DecodeError:
            continue
        if group in groups:
            newest = max(newest or 0, msg.timestamp()[1])
    return None if newest is None else (now_ms - newest) / 1000


def _end_offsets(ctx: FlowContext, tps: list[TP]) -> dict[TP, int]:

    bounds = partition_bounds(admin_client(ctx.client("source", "admin")), tps)
    return {tp: hi for tp, (_lo, hi) in bounds.items()}


def _record(config: MirrorConfig, result: CutoverResult, ctx: FlowContext, spark: Any) -> None:
    from mirror_lib.tables.state_tables import append_rows  # lazy: deltalake, pyarrow

    groups = ",".join(sorted({g.group for g in result.groups if g.action == "committed"}))
    ts = _now()
    rows = [
        {**asdict(p), "run_id": result.run_id, "flow": ctx.flow.name, "source": ctx.source,
         "target": ctx.target, "groups": groups, "detail": result.steps[-1].detail, "ts": ts}
        for p in result.partitions
    ]  # fmt: skip
    append_rows(config, "migrations", rows, spark)


def _wait_verified(
    config: MirrorConfig, ctx: FlowContext, topics: list[str], options: CutoverOptions, spark: Any
) -> tuple[Step, Any]:
    """Verify until complete (apply) or once (dry run); a difference or a stray record on the
    target refuses at once."""
    deadline = time.monotonic() + (options.wait_s if options.apply else 0)
    while True:
        report = verify_flow(config, ctx.flow.name, topics, spark=spark, record=False)
        if not report.ok:
            bad = next(p for p in report.partitions if p.differs)
            text = f"{bad.topic}[{bad.partition}] {bad.describe()}"
            return Step("replicated", "refused", text), report
        if report.complete:
            break
        if time.monotonic() >= deadline:
            behind = sum(p.behind for p in report.partitions)
            status = "refused" if options.apply else "waiting"
            text = f"still behind by {behind} records after {options.wait_s:.0f}s"
            return Step(
                "replicated", status, text if options.apply else f"behind by {behind}"
            ), report
        time.sleep(1.0)
    if options.apply:  # the proof of the cutover point, dated
        record_report(config, report, spark)
    total = sum(p.total_records for p in report.partitions)
    return Step("replicated", "ok", f"verified complete: {total} records"), report


def run_cutover(
    config: MirrorConfig, flow: str, options: CutoverOptions, spark: Any = None
) -> CutoverResult:
    """Walk the cutover steps for ``flow``; stops at the first refused or waiting step."""
    ctx = FlowContext.create(config, flow)
    check_flow_clusters(config, [ctx.flow.name], kept="nothing was changed")  # and the logins
    check_client_addresses(config, [ctx.flow.name], heartbeats=False)  # own bootstrap.servers
    result = CutoverResult(ctx.flow.name, uuid.uuid4().hex, dry_run=not options.apply)
    if options.retire:
        return retire(config, ctx, options, result, spark)
    partitions = flow_partitions(ctx, options.topics)
    tps = [(t, p) for t, n in partitions.items() for p in range(n)]
    ends = _end_offsets(ctx, tps)
    segments = SegmentView()  # read back from the metrics topic's end as far as offsets need
    segments.update(ctx, _at_ends(ends))
    moves = plan_group_moves(ctx, options.groups, set(partitions), segments)
    groups = {m.group for m in moves}
    result.steps.append(readiness(ctx, ends, segments, options, groups))
    if not result.ok:
        return result
    if not options.producers_stopped:
        result.partitions = _partition_rows(ctx, ends, segments, "migrating")
        verb = "recorded as migrating" if options.apply else "would be recorded as migrating"
        text = (f"{len(tps)} partitions {verb}; move the producers to {ctx.target}, then run "
                "again with --producers-stopped")  # fmt: skip
        result.steps.append(Step("producers", "waiting", text))
        if options.apply:
            _record(config, result, ctx, spark)
        result.groups = moves
        return result
    result.steps.append(Step("producers", "ok", f"confirmed: producers write to {ctx.target}"))
    step, _report = _wait_verified(config, ctx, sorted(partitions), options, spark)
    result.steps.append(step)
    if step.status != "ok":
        return result
    final = _end_offsets(ctx, tps)
    moved = {tp: (ends[tp], final[tp]) for tp in tps if final[tp] != ends[tp]}
    if moved:
        (t, p), (a, b) = next(iter(moved.items()))
        text = f"{t}[{p}] end moved from {a} to {b}: producers still write to {ctx.source}"
        result.steps.append(Step("cutover point", "refused", text))
        return result
    segments.update(ctx, _at_ends(final))  # what was written since; all is replicated now
    moves = plan_group_moves(ctx, options.groups, set(partitions), segments)
    result.groups = commit_group_moves(ctx, moves) if options.apply else moves
    refused = [g for g in result.groups if g.action.startswith("refused")]
    if refused:
        text = "; ".join(sorted({f"{g.group}: {g.action}" for g in refused}))
        result.steps.append(Step("groups", "refused", text))
        return result
    done = "committed" if options.apply else "would commit"
    count = sum(g.action in ("committed", "would commit") for g in result.groups)
    n_groups = len({g.group for g in result.groups})
    result.steps.append(Step("groups", "done" if options.apply else "would",
                             f"{done} {count} offsets of {n_groups} groups"))  # fmt: skip
    protection = _lift_step(ctx, sorted(ctx.remote_topic(t) for t in partitions), options.apply)
    if protection is not None:
        result.steps.append(protection)
        if protection.status == "refused":
            return result
    result.partitions = _partition_rows(ctx, final, segments, "migrated")
    status = "done" if options.apply else "would"
    result.steps.append(Step("report", status, RULE))
    if options.apply:
        _record(config, result, ctx, spark)
    return result


def _lift_step(ctx: FlowContext, remote_topics: list[str], apply: bool) -> Step | None:
    """Lift the write protection of the remote topics (None: the flow protects nothing)."""
    try:
        lift = lift_protection(ctx, remote_topics, apply=apply)
    except BrokerError as exc:
        return Step("protection", "refused", str(exc))
    if lift is None:
        return None
    return Step("protection", "done" if apply else "would", lift.describe())


def _at_ends(ends: dict[TP, int]) -> dict[tuple[str, TP], int]:
    """A's end offsets as offsets for :meth:`SegmentView.update` to read segments for."""
    return {("", tp): end for tp, end in ends.items()}


def _partition_rows(
    ctx: FlowContext, ends: dict[TP, int], segments: SegmentView, status: str
) -> list[PartitionCutover]:
    rows = []
    for (topic, partition), end in sorted(ends.items()):
        target = segments.translate((topic, partition), end)
        rows.append(PartitionCutover(topic, ctx.remote_topic(topic), partition, end,
                                     0 if target is None else target, status))  # fmt: skip
    return rows


def retire(
    config: MirrorConfig, ctx: FlowContext, options: CutoverOptions, result: CutoverResult, spark
) -> CutoverResult:
    """Mark the flow's migrated partitions ``retired``: A's topics may now be deleted."""
    from mirror_lib.tables.state_tables import read_rows  # lazy: deltalake, pyarrow

    latest: dict[TP, dict[str, Any]] = {}
    for row in read_rows(config, "migrations", spark):
        key = (row["topic"], row["partition"])
        if row["flow"] == ctx.flow.name and (key not in latest or row["ts"] >= latest[key]["ts"]):
            latest[key] = row
    wanted = set(options.topics) if options.topics else {t for t, _p in latest}
    rows = {k: r for k, r in latest.items() if k[0] in wanted}
    pending = sorted(f"{t}[{p}] ({r['status']})" for (t, p), r in rows.items()
                     if r["status"] not in ("migrated", "retired"))  # fmt: skip
    if not rows or pending:
        text = f"not migrated yet: {', '.join(pending)}" if pending else "nothing migrated yet"
        result.steps.append(Step("retire", "refused", text))
        return result
    result.partitions = [
        PartitionCutover(r["topic"], r["remote_topic"], r["partition"], r["source_end_offset"],
                         r["target_offset"], "retired") for _k, r in sorted(rows.items())
    ]  # fmt: skip
    verb = "retired" if options.apply else "would retire"
    text = f"{verb} {len(rows)} partitions: {ctx.source}'s topics may be deleted"
    result.steps.append(Step("retire", "done" if options.apply else "would", text))
    if options.apply:
        _record(config, result, ctx, spark)
    return result


def format_cutover(result: CutoverResult) -> str:
    """Steps, partitions (A's end and the offset on B), group offsets, the rule."""
    mode = "dry run (add --apply to change anything)" if result.dry_run else "applied"
    lines = [f"cutover {result.flow}: {mode}"]
    lines += [f"  [{s.status:>8}] {s.name}: {s.detail}" for s in result.steps]
    if result.partitions:
        lines.append(
            f"{'topic':<36} {'partition':>9} {'end on source':>14} {'on target':>10}  status"
        )
        lines += [f"{p.topic:<36} {p.partition:>9} {p.source_end_offset:>14} "
                  f"{p.target_offset:>10}  {p.status}" for p in result.partitions]  # fmt: skip
    if result.groups:
        lines.append(f"{'group':<28} {'remote topic':<36} {'partition':>9} {'offset':>8} "
                     f"{'current':>8}  action")  # fmt: skip
        lines += [f"{g.group:<28} {g.remote_topic:<36} {g.partition:>9} {g.offset:>8} "
                  f"{'-' if g.current is None else g.current:>8}  {g.action}"
                  for g in result.groups]  # fmt: skip
    if any(s.name == "report" for s in result.steps):
        lines.append(f"rule for {RULE}")
    return "\n".join(lines)
