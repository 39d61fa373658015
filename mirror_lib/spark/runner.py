"""Start, watch and stop the queries of ``mirror run`` with a SparkSession passed in: run_flows.

One :class:`~mirror_lib.spark.flow_runner.FlowRunner` per flow or fan-out group (the replication
query), :class:`CompanionJob` threads (heartbeats, checkpoints) and the tables' materialization,
supervised through outages. ``--once`` gives availableNow semantics on Spark 4.1: it snapshots the
source's end offsets, passes them to the planner as ``until``, and stops when the delivery ledger
reached them for every partition.

:func:`run_flows` resolves a :class:`~mirror_lib.spark.plan.RunPlan` once, builds every part
from it, checks it against the clusters before anything starts, then runs it in phases: start,
then once or continuous, and stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from typing import Any, Protocol

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError, MirrorRuntimeError, is_transient_text
from mirror_lib.kafka.clients import client_principal
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.companions.checkpoint_job import SavedCheckpoints
from mirror_lib.replication.companions.heartbeats import emit_heartbeat
from mirror_lib.replication.companions.supervise import Supervisor, Unit, failure_text
from mirror_lib.replication.companions.threads import PARTS, CompanionJob, TablesJob
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.events import QueryRestart, RunEvents
from mirror_lib.replication.metrics.flow_status import FlowStatus
from mirror_lib.replication.metrics.metrics_endpoint import MetricsExporter, start_exporter
from mirror_lib.spark.flow_runner import FlowRunner
from mirror_lib.spark.materialize import materialize_now, start_materialization
from mirror_lib.spark.plan import RunPlan
from mirror_lib.spark.progress import (
    CatchUpProgress,
    progress_rows,
    raise_query_error,
    stop_query,
    unit_name,
)
from mirror_lib.spark.session import check_compute, session_cores, session_for_run, slots_text
from mirror_lib.tables.location import tables_root
from mirror_lib.tables.maintenance import maintain_if_due

log = logging.getLogger(__name__)

# A slice plans only the topics that exist when it starts; one created later (say, by the first
# heartbeat) is found by the copy tasks within a minute, and a --once run after it waits for that.
FIRST_HEARTBEAT_WAIT_S = 15.0
FAILURE_TABLES_S = 30.0  # a failed --once materializes its events at most this long
#: How often a run nobody watches measures each flow's lag, kept as the "records behind" of
#: an outage's events: each measure lists the source's topics and the offsets and ledger of
#: every partition, three quarters of an idle driver's CPU at 1,000 partitions every 5 s.
UNWATCHED_LAG_S = 30.0
#: How often a continuous run hands the C heap's free pages back (:func:`release_free_memory`).
TRIM_INTERVAL_S = 60.0

Report = Callable[[str], object]  # where a run says what it does: print, a logger, a list


def _check_matches(ctx: FlowContext, matched: dict[TP, int], once: bool, report: Report) -> None:
    """A topic filter that matches nothing is an error with --once, a warning otherwise.

    Heartbeats topics, replicated whatever the filter says, do not count as a match.
    """
    if any(ctx.topic_filter.should_replicate_topic(topic) for topic, _p in matched):
        return
    names = sorted(t for t in ctx.admin_ops("source").list_topics() if not t.startswith("__"))
    shown = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "") or "no topics"
    principal, _how = client_principal(ctx.client("source", "admin"))
    who = principal or "the flow's principal"  # an authorizer hides the topics it may not see
    shown += f"; with an authorizer, only the topics {who} may DESCRIBE are listed"
    key = f"{ctx.flow.name}.topics"
    expected = f"patterns matching a topic on {ctx.source} (it has: {shown})"
    if once:
        raise ConfigError(key, ", ".join(ctx.settings.topics), expected)
    report(
        f"warning: {key} = {', '.join(ctx.settings.topics)} matches no topic on "
        f"{ctx.source} yet (it has: {shown}); new topics are picked up when they appear"
    )


def _runner_unit(r: FlowRunner) -> Unit:
    """A replication query; it counts as recovered once the delivery ledger moves (a slice lasts
    minutes, so Spark's batch count would tell too late)."""
    return Unit(unit_name(r), r.ctx, lambda: r.query, r.restart, lambda _q: r.delivered_total())


def _table_failure(tables: list[Any], i: int, cluster: str) -> Callable[[], None]:
    """Raise the error that ended the materialization query of ``cluster``, if it failed."""
    return lambda: raise_query_error(tables[i], f"materialization of {cluster}")


def _table_unit(run: _Run, i: int, cluster: str) -> Unit:
    """Materialization of ``cluster`` (restart replaces ``run.tables[i]``); its outages name
    the flow the plan chose for it."""
    tables = run.tables

    def restart(_after: QueryRestart) -> Any:  # its tasks copy nothing, so tell nothing
        tables[i] = start_materialization(run.spark, run.config, cluster, writer=run.writer)
        return tables[i]

    return Unit(f"tables of {cluster}", run.plan.tables[cluster], lambda: tables[i], restart)


def _catch_up_through_outages(
    r: FlowRunner,
    target: dict[TP, int],
    limit: float | None,
    bar: CatchUpProgress | None,
    sup: Supervisor,
) -> bool:
    """:meth:`FlowRunner.await_caught_up`, restarting the query after transient failures."""
    deadline = None if limit is None else time.monotonic() + limit
    unit = _runner_unit(r)
    while True:
        left = None if deadline is None else max(deadline - time.monotonic(), 0)
        try:
            caught = r.await_caught_up(target, left, bar)
            sup.watch(unit, r.raise_if_failed)  # ends an outage the catch-up went through
            return caught
        except MirrorRuntimeError:
            text = failure_text(r.query)
            if text is None or not is_transient_text(text):
                raise
        while failure_text(r.query) is not None:
            sup.watch(unit, r.raise_if_failed)  # raises after mirror.outage.max.seconds
            time.sleep(0.5)


def _one_round(ctx: FlowContext, report: Report, parts: Collection[str] = PARTS) -> None:
    """After a --once catch-up: one heartbeat and one checkpoint cycle, without Spark."""
    s = ctx.settings
    if s.emit_heartbeats and "heartbeats" in parts:
        emit_heartbeat(ctx)
    if s.emit_checkpoints and "checkpoints" in parts:
        written, skipped = SavedCheckpoints.of(ctx).run(ctx, force_group_sync=True)
        report(f"{ctx.flow.name}: {written} checkpoints written, {skipped} bad records skipped")


def companion_jobs(plan: RunPlan) -> list[CompanionJob]:
    """The plan's companion jobs (checkpoints and heartbeats), on driver threads
    (:mod:`mirror_lib.replication.companions.threads`)."""
    return [CompanionJob(ctx, job) for ctx, job in plan.companions]


class RunObserver(Protocol):
    """Told of a run by :func:`run_flows`: when its plan is resolved (before any check, so that
    a run that fails its checks is seen too), and when it ended, with its error if it failed.
    :class:`~mirror_lib.app.tracking.MlflowRun` logs the run so."""

    def start(self, plan: RunPlan) -> None: ...

    def finish(self, error: BaseException | None) -> None: ...


class _Run:
    """The parts of one run over a session (replication queries, companion threads, the
    tables), built from its plan, started, driven and stopped in phases: :meth:`start`, then
    :meth:`once` or :meth:`continuous`, and :meth:`stop` in every case."""

    def __init__(self, plan: RunPlan, spark: Any, report: Report) -> None:
        self.plan, self.config, self.report = plan, plan.config, report
        self.own_session = False  # stop only a session made here, never e.g. a Databricks job's
        if spark is None:
            from pyspark.sql import SparkSession  # lazy: optional extra "spark"

            self.own_session = SparkSession.getActiveSession() is None
            spark = session_for_run(plan.settings.session_delta, **plan.session_conf)
        self.spark = spark
        stall = plan.settings.stall_limit_s
        self.runners = [FlowRunner(spark, group, stall_limit_s=stall) for group in plan.groups]
        self.jobs: list[CompanionJob] = companion_jobs(plan)
        self.writer = plan.tables_writer(spark)
        clusters = list(plan.tables)
        if clusters and not plan.once and self.writer == "delta-rs":
            self.jobs += [TablesJob(self.config, c) for c in clusters]  # driver threads, no query
            clusters = []
        self.clusters = clusters  # materialized by Spark queries (continuous) or at the end (once)
        self.tables: list[Any] = []
        self.lags: dict[str, int] = {}  # last measured lag per flow: "records behind" of an outage
        self.sup = Supervisor(self.config, plan.settings.outage_limit_s, report, self.lags.get)
        self.events = RunEvents(
            plan.contexts if self.runners else (), plan.mode, plan.config.state_dir
        )
        self.exporter: MetricsExporter | None = None
        self.released: threading.Thread | None = None  # stops the queries and the session (--once)
        self.targets: dict[str, dict[TP, int]] = {}
        self.before: dict[str, dict[str, dict[TP, int]]] = {}  # --once: each ledger at start
        self.deadline: float | None = None

    def start(self) -> None:
        """Snapshot the sources, then start the companions and the replication queries."""
        report, once = self.report, self.plan.once
        if self.plan.endpoint is not None:
            self.exporter = start_exporter(
                self.plan.endpoint, self.runners, self.jobs, report, self.sup.current
            )
        slots = {r.name: r.ctx.settings.tasks for r in self.runners}
        crowded = slots_text(slots, session_cores(self.spark))
        if crowded is not None:
            report(f"warning: {crowded}")
        self.targets = {r.name: r.snapshot() for r in self.runners}
        for r in self.runners:
            for ctx in r.group.contexts:
                _check_matches(ctx, self.targets[r.name], once, report)
                ctx.refuse_loops({t for t, _p in self.targets[r.name] if ctx.should_replicate(t)})
        for j in self.jobs:
            j.start()
            report(f"started {j.job} of {j.name} (a driver thread, every {j.interval}s)")
        # as in MM2, the heartbeats topic exists before the first slice is planned
        for j in self.jobs:
            if j.job == "heartbeats":
                j.first_run_done(FIRST_HEARTBEAT_WAIT_S)
        for r in self.runners:
            target = self.targets[r.name]
            if once:  # where each flow's ledger stands, for the summary of what this run copied
                self.before[r.name] = r.delivered_by_flow(target)
            r.start(target if once else None, snapshot=target)
            report(f"started {r.job} of {r.name} (checkpoint {r.checkpoint})")
        self.events.start()
        duration_s = self.plan.duration_s
        self.deadline = None if duration_s is None else time.monotonic() + duration_s

    def once(
        self, show_progress: bool, on_summary: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, FlowStatus]:
        """``--once``: wait until every query caught up with its snapshot, release Spark, stop
        the companion jobs, then one heartbeat and checkpoint round and the tables;
        ``on_summary`` gets what each flow copied (:func:`copied_summary`)."""
        report, spark, config = self.report, self.spark, self.config
        after: dict[str, dict[str, dict[TP, int]]] = {}
        deadline, timeout_s = self.deadline, self.plan.timeout_s
        limit = timeout_s if deadline is None else max(deadline - time.monotonic(), 0)
        for r in self.runners:
            bar = CatchUpProgress(r.name) if show_progress else None
            caught = _catch_up_through_outages(r, self.targets[r.name], limit, bar, self.sup)
            if bar is not None:
                bar.finish()
            if not caught:
                raise MirrorRuntimeError(
                    f"flow {r.name} did not catch up within {limit:.0f}s; "
                    "everything committed so far is kept"
                )
            report(f"{r.name}: caught up with {sum(self.targets[r.name].values())} source offsets")
            if on_summary is not None:
                after[r.name] = r.delivered_by_flow(self.targets[r.name])
        statuses = {r.name: r.status() for r in self.runners}
        if on_summary is not None:
            on_summary(copied_summary(self.plan.contexts, self.before, after))
        if self.own_session and self.writer == "delta-rs":  # what is left needs no Spark
            self.released = _release_spark(spark, self.runners)
        self.events.stop("--once: caught up with the snapshot taken at start")
        # the last round is the last word: a job's round still running would write checkpoints
        # it translated before the catch-up after it, and fence its transactional id
        _stop_each([j.stop for j in self.jobs])
        for ctx in self.plan.contexts:
            _one_round(ctx, report, self.plan.parts)
        for cluster in self.clusters:
            report(materialize_now(spark, config, cluster, timeout_s, self.writer))
        if self.clusters and self.writer == "delta-rs" and maintain_if_due(config) is not None:
            report(f"maintained the tables in {tables_root(config)}")
        return statuses

    def continuous(
        self,
        on_progress: Callable[[list[dict[str, Any]]], None] | None,
        progress_interval_s: float,
    ) -> dict[str, FlowStatus]:
        """Until the deadline (else until interrupted): watch every part through outages, and
        measure progress every ``progress_interval_s`` (with nobody to tell it, the lag every
        :data:`UNWATCHED_LAG_S` at most)."""
        spark, config, sup, tables = self.spark, self.config, self.sup, self.tables
        runners, jobs, clusters = self.runners, self.jobs, self.clusters
        tables += [start_materialization(spark, config, c, writer=self.writer) for c in clusters]
        units = [(_runner_unit(r), r.raise_if_failed) for r in runners]
        units += [
            (_table_unit(self, i, c), _table_failure(tables, i, c)) for i, c in enumerate(clusters)
        ]
        if on_progress is None:
            progress_interval_s = max(progress_interval_s, UNWATCHED_LAG_S)
        next_progress = time.monotonic() + progress_interval_s
        next_trim = time.monotonic() + TRIM_INTERVAL_S
        while self.deadline is None or time.monotonic() < self.deadline:
            for unit, raise_terminal in units:
                sup.watch(unit, raise_terminal)
            for j in jobs:  # companions retry transient errors on their own thread
                j.raise_if_failed()
            if time.monotonic() >= next_progress:
                rows: list[dict[str, Any]] = []
                if on_progress is not None:
                    rows = progress_rows(runners + jobs, tables, clusters, sup.waiting())
                    on_progress(rows)
                elif not sup.outages:  # records behind, for the next outage's events
                    rows = progress_rows(runners, [], [])
                self.lags.update({x["flow"]: x["lag"] for x in rows if x["lag"] is not None})
                next_progress = time.monotonic() + progress_interval_s
            if time.monotonic() >= next_trim:
                release_free_memory()
                next_trim = time.monotonic() + TRIM_INTERVAL_S
            time.sleep(1)
        self.events.stop(f"--duration of {self.plan.duration_s:g}s reached")
        if on_progress is not None:
            on_progress(progress_rows(runners + jobs, tables, clusters, sup.waiting()))
        return {r.name: r.status() for r in runners}

    def failed(self, exc: BaseException) -> None:
        """The run failed: its error event, and for ``--once`` the tables that show it."""
        self.events.error(exc)
        terminal = isinstance(exc, MirrorRuntimeError) and not exc.transient
        if self.plan.once and self.clusters and terminal:
            _materialize_failure(self, self.report)

    def stop(self) -> None:
        """Stop every part that runs, and the session if it was started here."""
        spark = self.spark
        stops: list[Callable[[], Any]] = [self.exporter.stop] if self.exporter is not None else []
        stops.append(self.sup.close)
        stops += [r.stop for r in self.runners if self.released is None]
        stops += [j.stop for j in self.jobs]
        stops += [functools.partial(stop_query, spark, q) for q in self.tables]
        _stop_each(stops)
        if self.released is not None:
            self.released.join()
        elif self.own_session:
            spark.stop()


def run_flows(
    spark: Any,
    config: MirrorConfig,
    flow_names: Collection[str] | None = None,
    *,
    once: bool = False,
    duration_s: float | None = None,
    timeout_s: float | None = None,
    report: Report = print,
    show_progress: bool = False,
    parts: Collection[str] = PARTS,
    on_progress: Callable[[list[dict[str, Any]]], None] | None = None,
    progress_interval_s: float = 5,
    metrics_port: int | None = None,
    metrics_host: str | None = None,
    on_summary: Callable[[dict[str, Any]], None] | None = None,
    observer: RunObserver | None = None,
) -> dict[str, FlowStatus]:
    """Run the queries of the given (default: all enabled) flows; the one call behind `mirror run`.

    ``once``: replicate everything available at start, then stop (availableNow semantics).
    ``duration_s``: stop after that many seconds. Otherwise run until interrupted. Every query is
    stopped on return, also on errors and Ctrl-C. ``spark=None`` starts (or reuses) a session
    after the clusters were found reachable. ``parts``: which of replication, checkpoints,
    heartbeats and tables (materialization) to run, so that job tasks can split them.
    ``on_progress`` gets :func:`~mirror_lib.spark.progress.progress_rows` every
    ``progress_interval_s`` while running.
    ``metrics_port``/``metrics_host`` (else ``mirror.metrics.port``/``.host``): serve Prometheus
    metrics from before the queries start until return
    (:mod:`mirror_lib.replication.metrics.metrics_endpoint`). ``on_summary`` (``--once``):
    gets what each flow copied (:func:`copied_summary`) once every query caught up.
    ``observer``: told when the run starts and ends (:class:`RunObserver`; MLflow logging).
    """
    plan = RunPlan.resolve(
        config,
        flow_names,
        parts=parts,
        once=once,
        duration_s=duration_s,
        timeout_s=timeout_s,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
    )
    with _observed(observer, plan):
        plan.check()
        check_compute(spark, once=once, endpoint=plan.endpoint)  # e.g. continuous on serverless
        run = _Run(plan, spark, report)
        try:
            run.start()
            if once:
                return run.once(show_progress, on_summary)
            return run.continuous(on_progress, progress_interval_s)
        except KeyboardInterrupt:
            run.events.stop("interrupted (Ctrl-C, SIGINT or a job cancel)")
            raise
        except BaseException as exc:
            run.failed(exc)
            raise
        finally:
            run.stop()


@contextlib.contextmanager
def _observed(observer: RunObserver | None, plan: RunPlan) -> Iterator[None]:
    """Tell ``observer`` that the run of ``plan`` starts, and when it ended (how, on failure)."""
    if observer is None:
        yield
        return
    observer.start(plan)
    try:
        yield
    except BaseException as exc:
        observer.finish(exc)
        raise
    observer.finish(None)


def copied_summary(
    contexts: Collection[FlowContext],
    before: dict[str, dict[str, dict[TP, int]]],
    after: dict[str, dict[str, dict[TP, int]]],
) -> dict[str, Any]:
    """Per flow, what a ``--once`` run copied: per source topic its remote topic, partitions and
    source offsets (the ledger's move: records, and the transaction markers a source may hold
    between them), and their sum. ``before``/``after``: query -> flow -> ledger position."""
    positions = {
        flow: (pos, before.get(query, {}).get(flow, {}))
        for query, flows in after.items()
        for flow, pos in flows.items()
    }
    out: dict[str, Any] = {}
    for ctx in contexts:
        end, start = positions.get(ctx.flow.name, ({}, {}))
        topics: dict[str, dict[str, Any]] = {}
        for (topic, partition), pos in sorted(end.items()):
            row = topics.setdefault(
                topic, {"remote_topic": ctx.remote_topic(topic), "partitions": 0, "offsets": 0}
            )
            row["partitions"] += 1
            row["offsets"] += max(pos - start.get((topic, partition), 0), 0)
        out[ctx.flow.name] = {
            "offsets": sum(t["offsets"] for t in topics.values()),
            "topics": topics,
        }
    return out


def _materialize_failure(run: _Run, report: Report) -> None:
    """After ``--once`` failed for good (a gap with ``mirror.on.gap = fail``, refused
    credentials): its ``gap`` and ``error`` events into ``flow_events`` now, as a successful
    ``--once`` does at its end. Without this they reached the table only with a later
    successful run, which a gap never allows. Best effort: the run's own error is what counts.
    """
    for cluster in run.clusters:
        try:
            report(materialize_now(run.spark, run.config, cluster, FAILURE_TABLES_S, run.writer))
        except Exception as exc:  # the run's own error follows
            log.warning("materializing %s after the failure failed: %s", cluster, exc)


def _stop_each(stops: list[Callable[[], Any]]) -> None:
    """Call every stop; one failing must not leave the other queries running."""
    for stop in stops:
        try:
            stop()
        except Exception:
            log.exception("stopping a part of the run failed; stopping the others")


@functools.cache
def _libc() -> Any:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl): nothing to trim
        return None


def release_free_memory() -> bool:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``); whether any
    were. The driver's threads (delta-rs, librdkafka clients) each get a malloc arena, and what
    they free stays in it: a soak's driver held 68 MB free in 15 arenas after an hour, its RSS
    climbing for no live data (bench/journal/2026-12-05-driver-heap.md)."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


def _release_spark(spark: Any, runners: list[FlowRunner]) -> threading.Thread:
    """Stop the caught-up queries and the run's own session on a thread, so that the end of
    ``--once`` (heartbeat, checkpoints, tables over delta-rs: no Spark) does not wait for them."""

    stops = [*(r.stop for r in runners), spark.stop]
    thread = threading.Thread(target=_stop_each, args=(stops,), name="mirror-release-spark")
    thread.start()
    return thread
