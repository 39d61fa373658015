"""The replication query of a flow ``A->B`` or a fan-out group ``A->B,C``: :class:`FlowRunner`.

It starts the query over the slice planner and its copy tasks (:mod:`mirror_lib.spark.source`,
:mod:`mirror_lib.spark.copy_task`) with a SparkSession passed in, and measures it from the delivery
ledgers: what each target has, progress, lag and, for ``--once``, whether it caught up with a
snapshot (availableNow semantics on Spark 4.1).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any, TypedDict

from mirror_lib.config.global_settings import ONCE_OUTAGE_MAX_S
from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError, MirrorError, MirrorRuntimeError
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.context import FlowContext, flow_dir
from mirror_lib.replication.copy.ledger import LedgerView, flow_bounds, flow_ends
from mirror_lib.replication.copy.read_group import ReadGroup, split_group_name
from mirror_lib.replication.copy.target_producer import fence_slots
from mirror_lib.replication.events import RESTART_OPTION, QueryRestart
from mirror_lib.replication.metrics.flow_status import FlowStatus
from mirror_lib.replication.planning.slices import flows_short_of, format_until
from mirror_lib.replication.planning.stall import StallWatch, stall_text
from mirror_lib.spark.plan import RunPlan
from mirror_lib.spark.progress import drive_until, raise_query_error, stop_query
from mirror_lib.spark.session import register_sources

log = logging.getLogger(__name__)


def _claim_checkpoint(ctx: FlowContext, folder: Path, name: str | None = None) -> None:
    """Refuse a checkpoint folder that belongs to another flow; ``name``: of a fan-out group."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "flow.json"
    mine = {
        "flow": name or ctx.flow.name,
        "source": ctx.config.cluster(ctx.source).bootstrap_servers,
        "target": ctx.config.cluster(ctx.target).bootstrap_servers,
    }
    if marker.exists():
        theirs = json.loads(marker.read_text())
        if theirs.get("flow") != mine["flow"]:
            raise ConfigError(
                "mirror.state.dir",
                str(folder),
                f"the checkpoint folder of flow {mine['flow']}, not of {theirs.get('flow')}",
            )
        return
    marker.write_text(json.dumps(mine))


#: How long a caught-up ``--once`` slice is given to end on its own (FlowRunner._await_slice_end).
SLICE_END_S = 30.0
FANOUT_READ_S = 5.0  # a fan-out target's ledger is asked this long (it may be the one that is out)


class _Figures(TypedDict):
    copied: int
    records_per_s: float
    lag: int


class Progress(_Figures, total=False):
    """What :meth:`FlowRunner.progress` measures; ``lags``: each target's own (fan-out groups)."""

    lags: dict[str, int | None]


class FlowRunner:
    """The replication query of a flow: a planner of time slices and long-running copy tasks."""

    #: What it runs, for its messages and its query's name (the other parts of a run are
    #: CompanionJob threads and the tables).
    job = "replication"

    def __init__(
        self, spark: Any, group: ReadGroup, *, stall_limit_s: float | None = ONCE_OUTAGE_MAX_S
    ) -> None:
        """The query of ``group`` over ``spark``; ``stall_limit_s``: how long a ``--once`` slice
        may leave a partition where it was (a run's plan says: ``mirror.outage.max.seconds``)."""
        self.spark = spark
        self.group = group
        self.ctx = self.group.lead
        self.query: Any = None
        self._ledgers: dict[str, LedgerView] = {}
        self._known: dict[str, dict[TP, int]] = {}  # last ledger read per target
        self._unread: set[str] = set()  # targets whose last ledger read failed
        self._sample: tuple[int, int, float] | None = None
        self._until: dict[TP, int] | None = None
        self._restart: QueryRestart | None = None  # the outage the query was started again after
        self._parts: list[TP] = []
        self._stall = StallWatch(stall_limit_s)

    @classmethod
    def of(cls, spark: Any, config: MirrorConfig, name: str) -> FlowRunner:
        """The query of flow ``A->B`` (or fan-out group ``A->B,C``) of ``config`` alone, as
        :func:`~mirror_lib.spark.runner.run_flows` builds it from its plan."""
        plan = RunPlan.resolve(config, split_group_name(name), parts=("replication",))
        if len(plan.groups) != 1:
            raise ConfigError("--flow", name, "a flow A->B or a fan-out group A->B,C")
        return cls(spark, plan.groups[0], stall_limit_s=plan.settings.stall_limit_s)

    @property
    def name(self) -> str:
        """The flow ``A->B``, or the fan-out group ``A->B,C`` this query serves."""
        return self.group.name

    @property
    def checkpoint(self) -> Path:
        return flow_dir(self.ctx.config, self.name) / self.job

    def ledger(self, ctx: FlowContext) -> LedgerView:
        if ctx.flow.name not in self._ledgers:
            self._ledgers[ctx.flow.name] = LedgerView(ctx)
        return self._ledgers[ctx.flow.name]

    def start(
        self,
        until: dict[TP, int] | None = None,
        snapshot: dict[TP, int] | None = None,
    ) -> Any:
        """Start the query. ``until``: copy only up to these offsets (``--once``). ``snapshot``:
        a :meth:`snapshot` the caller just took (else one is taken here, for progress).

        With ``until`` the query runs ``availableNow`` (one slice, then it ends: the only trigger
        serverless allows); :meth:`await_caught_up` starts it again should one slice not reach
        ``until`` (a slice's time ran out, or Spark replayed an interrupted one).
        """
        if snapshot is None:
            snapshot = self.snapshot()
        else:
            self._parts = list(snapshot)
        done = sum(self.delivered(snapshot).values())
        self._sample = (done, done, time.monotonic())  # progress() counts from here
        self._restart = None
        return self._start_query(until)

    def _start_query(self, until: dict[TP, int] | None) -> Any:
        register_sources(self.spark)
        _claim_checkpoint(self.ctx, self.checkpoint.parent, self.name)
        options = self.group.to_options()
        if until is not None:
            options["until"] = format_until(until)
        if self._restart is not None:
            options[RESTART_OPTION] = self._restart.option()
        self._until = until
        df = self.spark.readStream.format("mirror").options(**options).load()
        writer = (
            df.writeStream.format("noop")  # the tasks copy in read(): copy_task
            .option("checkpointLocation", str(self.checkpoint.resolve()))
            .queryName(f"mirror-{self.job}-{self.name}")
        )
        if until is not None:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.ctx.settings.trigger_interval} seconds")
        self.query = writer.start()
        return self.query

    def stop(self) -> None:
        """Stop the query and wait for its copy tasks to end. Where that cannot be seen (Spark
        Connect) or takes too long, every slot's producer is fenced
        (:func:`~mirror_lib.replication.copy.target_producer.fence_slots`): a task Spark has
        not killed yet commits nothing after the run stopped."""
        if stop_query(self.spark, self.query) or not self.ctx.settings.exactly_once:
            return
        for ctx in self.group:
            failed = fence_slots(ctx, range(ctx.settings.tasks))
            if failed:  # the next run's own fencing takes them
                log.warning(
                    "%s: slots %s were not fenced after the stop: %s",
                    ctx.label, sorted(failed), failed[min(failed)],
                )  # fmt: skip

    def status(self) -> FlowStatus:
        q = self.query
        recent = q.recentProgress if q is not None else []
        last = recent[-1] if recent else None
        return FlowStatus(
            flow=self.name,
            job=self.job,
            active=bool(q is not None and q.isActive),
            batches=len(recent),
            last_batch_id=last["batchId"] if last else None,
            records_per_second=last.get("processedRowsPerSecond") if last else None,
            message=q.status["message"] if q is not None else "not started",
        )

    def snapshot(self) -> dict[TP, int]:
        """Last stable offsets of every partition the flow replicates, right now, never below
        a partition's start: what ``--once`` copies up to."""
        bounds = flow_bounds(self.group, self.ctx.admin("source"))
        self._parts = list(bounds)
        return {tp: hi for tp, (_lo, hi) in bounds.items()}

    def ends(self) -> dict[TP, int]:
        """Last stable offsets of every partition the flow replicates, right now, in one
        listing: what the lag is measured against."""
        ends = flow_ends(self.group, self.ctx.admin("source"))
        self._parts = list(ends)
        return ends

    def restart(self, after: QueryRestart | None = None) -> Any:
        """Start the query again as it was started (``--once`` keeps its snapshot), ``after``
        an outage, which its copy tasks then tell (:class:`QueryRestart`).

        Nothing is read from the clusters here, and progress counts on from the first start:
        in an outage of the target a read of its ledger waits out its timeout, slot by slot,
        with the run's loop (and ``mirror status``) held meanwhile; the query's tasks read the
        ledger anyway.
        """
        self._restart = after
        return self._start_query(self._until)

    def delivered_total(self, timeout_s: float = 3.0) -> int:
        """Sum of the ledger over the partitions of the last snapshot; -1 when unreadable."""
        try:
            return sum(self.delivered(self._parts, timeout_s).values())
        except MirrorError:
            return -1

    def delivered(self, partitions: Collection[TP], timeout_s: float = 30) -> dict[TP, int]:
        """Next upstream offset per partition, from the delivery ledger (the truth); in a
        fan-out group, of the target furthest behind."""
        return _slowest(self.delivered_by_flow(partitions, timeout_s))

    def delivered_by_flow(
        self, partitions: Collection[TP], timeout_s: float = 30
    ) -> dict[str, dict[TP, int]]:
        """The ledger of each target of the query, for the partitions its flow replicates.

        In a fan-out group a target that cannot be read now counts with its last known
        positions (asked with a short timeout), so that the others are still measured.
        """
        out: dict[str, dict[TP, int]] = {}
        for ctx in self.group.contexts:
            mine = [tp for tp in partitions if ctx.should_replicate(tp[0])]
            name = ctx.flow.name
            try:
                wait = min(timeout_s, FANOUT_READ_S) if self.group.fanout else timeout_s
                out[name] = self.ledger(ctx).positions(mine, wait)
                self._known[name] = {**self._known.get(name, {}), **out[name]}
                self._unread.discard(name)
            except MirrorError:
                if not self.group.fanout:
                    raise
                self._unread.add(name)
                out[name] = {tp: pos for tp, pos in self._known.get(name, {}).items() if tp in mine}
        return out

    def lag(self) -> int:
        """Records the flow still has to copy (source LSO - delivered), from the ledger."""
        return self.progress()["lag"]

    def progress(self) -> Progress:
        """Records copied since the first call, records/s since the previous call, and lag."""
        ends = self.ends()
        by_flow = self.delivered_by_flow(ends)
        done = _slowest(by_flow)
        total, now = sum(done.values()), time.monotonic()
        base, last_total, last_time = self._sample or (total, total, now)
        self._sample = (base, total, now)
        rate = (total - last_total) / (now - last_time) if now > last_time else 0.0
        out: Progress = {
            "copied": total - base,
            "records_per_s": round(rate, 1),
            "lag": sum(max(hi - done.get(tp, 0), 0) for tp, hi in ends.items()),
        }
        if self.group.fanout:  # each target's own lag: one that fell behind shows here
            out["lags"] = {ctx.flow.name: self._lag(ctx, by_flow, ends) for ctx in self.group}
        return out

    def _lag(
        self,
        ctx: FlowContext,
        by_flow: dict[str, dict[TP, int]],
        snapshot: dict[TP, int],
    ) -> int | None:
        """Records one target still has to get; None when its ledger was never read."""
        name = ctx.flow.name
        if name in self._unread and not self._known.get(name):
            return None
        done = by_flow[name]
        return sum(
            max(hi - done.get(tp, 0), 0)
            for tp, hi in snapshot.items()
            if ctx.should_replicate(tp[0])
        )

    def caught_up(self, target: dict[TP, int]) -> bool:
        """True when the ledger of every target reached ``target`` for every partition."""
        wanted = {tp: off for tp, off in target.items() if off > 0}
        by_flow = self.delivered_by_flow(wanted)
        return all(
            by_flow[ctx.flow.name].get(tp, 0) >= off
            for ctx in self.group.contexts
            for tp, off in wanted.items()
            if ctx.should_replicate(tp[0])
        )

    def await_caught_up(
        self, target: dict[TP, int], timeout_s: float | None, on_progress: Any = None
    ) -> bool:
        """Wait until caught up with ``target``; False on timeout. Query failures raise.

        Not before the query planned its first slice: a ledger ahead of the snapshot can be a
        gap the planner finds (a truncated or re-created source partition), not progress. A
        ``--once`` query whose availableNow slice ended short of the snapshot starts again.
        """
        caught = drive_until(
            lambda: self.planned() and self.caught_up(target),
            check=self.raise_if_failed,
            ended=lambda: self._until is not None and not self.query.isActive,
            again=self._next_slice,
            timeout_s=timeout_s,
            tick=None if on_progress is None else lambda: on_progress(self, target),
        )
        if caught and self._until is not None:
            self._await_slice_end()
        return caught

    def _await_slice_end(self) -> None:
        """Let the slice that caught up end on its own: after its last records it still
        commits the metrics its window holds (the last batch events). Stopping the query at
        the ledger's catch-up killed that commit now and then, and the tables missed the
        run's last records and lag. A slice that fails there raises its error; one still
        running after :data:`SLICE_END_S` is stopped as before."""
        try:
            self.query.awaitTermination(SLICE_END_S)
        except Exception:  # the query failed: its error, as the catch-up loop reports it
            self.raise_if_failed()
            raise

    def planned(self) -> bool:
        """True once the query planned a slice, or ended (an availableNow query with nothing
        to copy ends without one)."""
        query = self.query
        return (
            not query.isActive
            or query.lastProgress is not None
            or bool(query.status.get("isDataAvailable"))
        )

    def _next_slice(self) -> Any:
        """Start the next ``--once`` slice, unless the last ones left a partition where it was
        for ``mirror.outage.max.seconds`` (:mod:`mirror_lib.replication.planning.stall`)."""
        until = self._until or {}
        by_flow = self.delivered_by_flow(list(until))
        delivered = _slowest(by_flow)
        left = {
            tp: delivered.get(tp, -1) for tp, end in until.items() if delivered.get(tp, -1) < end
        }
        stalls = self._stall.observe(left, until, time.monotonic())
        if stalls:
            names = flows_short_of(by_flow, {s.tp: s.end for s in stalls})  # not just the first
            behind = [c for c in self.group.contexts if c.flow.name in names] or [self.ctx]
            label = ", ".join(c.label for c in behind)
            where = " and ".join(c.where("target") for c in behind)
            raise MirrorRuntimeError(stall_text(label, where, stalls))
        return self.start(self._until)

    def raise_if_failed(self) -> None:
        """Re-raise a failed query's error as a MirrorRuntimeError with the cause's message."""
        raise_query_error(
            self.query,
            f"{self.job} of {self.ctx.label}",
            "everything committed before the failure is kept; restarting resumes from the last "
            "committed batch",
        )


def _slowest(by_flow: dict[str, dict[TP, int]]) -> dict[TP, int]:
    """Per partition, the position of the target furthest behind."""
    out: dict[TP, int] = {}
    for positions in by_flow.values():
        for tp, pos in positions.items():
            out[tp] = min(pos, out.get(tp, pos))
    return out
