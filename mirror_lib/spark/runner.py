"""Start, watch and stop a flow's streaming queries with a SparkSession passed in.

One :class:`FlowRunner` per flow (the replication query) plus :class:`CompanionJob` threads
(heartbeats, checkpoints). ``--once`` gives availableNow semantics on Spark 4.1: it snapshots the
source's end offsets, passes them to the planner as ``until``, and stops when the delivery ledger
reached them for every partition.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from mirror_lib.config.fanout import group_name, read_groups
from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import (
    BrokerError,
    ConfigError,
    MirrorError,
    MirrorRuntimeError,
    is_transient_text,
)
from mirror_lib.kafka.clients import client_config
from mirror_lib.kafka.lookups import list_topic_partitions
from mirror_lib.replication.checkpoint_job import run_checkpoints
from mirror_lib.replication.companions import PARTS, CompanionJob
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.flow_status import FlowStatus
from mirror_lib.replication.heartbeats import emit_heartbeat
from mirror_lib.replication.ledger import LedgerView, flow_bounds
from mirror_lib.replication.metrics_endpoint import metrics_endpoint, start_exporter
from mirror_lib.replication.read_group import ReadGroup
from mirror_lib.replication.supervise import Supervisor, Unit, failure_text
from mirror_lib.spark.materialize import materialize_caught_up, start_materialization
from mirror_lib.spark.progress import CatchUpProgress, drive_until, raise_query_error, stop_query
from mirror_lib.spark.session import get_spark, register_sources
from mirror_lib.spark.source import format_until
from mirror_lib.tables.location import materialized_clusters, tables_enabled

log = logging.getLogger(__name__)


def flow_dir(config: MirrorConfig, flow_name: str) -> Path:
    """State folder of one flow under ``mirror.state.dir``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", flow_name.replace("->", "_to_"))
    return Path(config.state_dir) / "flows" / safe


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


def _check_matches(ctx: FlowContext, matched: dict, once: bool, report: Any) -> None:
    """A topic filter that matches nothing is an error with --once, a warning otherwise.

    Heartbeats topics, replicated whatever the filter says, do not count as a match.
    """
    if any(ctx.topic_filter.should_replicate_topic(topic) for topic, _p in matched):
        return
    names = sorted(t for t in list_topic_partitions(ctx.admin("source")) if not t.startswith("__"))
    shown = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "") or "no topics"
    key = f"{ctx.flow.name}.topics"
    expected = f"patterns matching a topic on {ctx.source} (it has: {shown})"
    if once:
        raise ConfigError(key, ", ".join(ctx.settings.topics), expected)
    report(
        f"warning: {key} = {', '.join(ctx.settings.topics)} matches no topic on "
        f"{ctx.source} yet (it has: {shown}); new topics are picked up when they appear"
    )


class FlowRunner:
    """The replication query of a flow: a planner of time slices and long-running copy tasks."""

    def __init__(
        self, spark: Any, config: MirrorConfig, flow_name: str, job: str = "replication"
    ) -> None:
        if job != "replication":
            raise ConfigError(
                "job", job, "replication (heartbeats and checkpoints run as CompanionJob threads)"
            )
        self.spark = spark
        self.job = job
        self.group = ReadGroup.create(config, flow_name)
        self.ctx = self.group.lead
        for ctx in self.group.contexts:
            if not ctx.flow.enabled:
                raise ConfigError(f"{ctx.flow.name}.enabled", "false", "true to replicate it")
        self.query: Any = None
        self._ledgers: dict[str, LedgerView] = {}
        self._sample: tuple[int, int, float] | None = None
        self._until: dict[tuple[str, int], int] | None = None
        self._parts: list[tuple[str, int]] = []

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
        until: dict[tuple[str, int], int] | None = None,
        snapshot: dict[tuple[str, int], int] | None = None,
    ) -> Any:
        """Start the query. ``until``: copy only up to these offsets (``--once``). ``snapshot``:
        a :meth:`snapshot` the caller just took (else one is taken here, for progress).

        With ``until`` the query runs ``availableNow`` (one slice, then it ends: the only trigger
        serverless allows); :meth:`await_caught_up` starts it again should one slice not reach
        ``until`` (a slice's time ran out, or Spark replayed an interrupted one).
        """
        register_sources(self.spark)
        _claim_checkpoint(self.ctx, self.checkpoint.parent, self.name)
        if snapshot is None:
            snapshot = self.snapshot()
        else:
            self._parts = list(snapshot)
        done = sum(self.delivered(snapshot).values())
        self._sample = (done, done, time.monotonic())  # progress() counts from here
        options = self.group.to_options()
        if until is not None:
            options["until"] = format_until(until)
        self._until = until
        df = self.spark.readStream.format("mirror").options(**options).load()
        writer = (
            df.writeStream.format("mirror")
            .options(**options)
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
        """Stop the query and wait for its copy tasks to end (an open transaction is fenced)."""
        stop_query(self.spark, self.query)

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

    def snapshot(self) -> dict[tuple[str, int], int]:
        """Last stable offsets of every partition the flow replicates, right now."""
        admin = self.ctx.admin("source")
        bounds: dict[tuple[str, int], tuple[int, int]] = {}
        for ctx in self.group.contexts:
            bounds.update(flow_bounds(ctx, admin))
        self._parts = list(bounds)
        return {tp: hi for tp, (_lo, hi) in bounds.items()}

    def restart(self) -> Any:
        """Start the query again as it was started (``--once`` keeps its snapshot)."""
        return self.start(self._until)

    def delivered_total(self, timeout_s: float = 3.0) -> int:
        """Sum of the ledger over the partitions of the last snapshot; -1 when unreadable."""
        try:
            return sum(self.delivered(self._parts, timeout_s).values())
        except MirrorError:
            return -1

    def delivered(
        self, partitions: Collection[tuple[str, int]], timeout_s: float = 30
    ) -> dict[tuple[str, int], int]:
        """Next upstream offset per partition, from the delivery ledger (the truth, D3); in a
        fan-out group, of the target furthest behind."""
        out: dict[tuple[str, int], int] = {}
        for positions in self.delivered_by_flow(partitions, timeout_s).values():
            for tp, pos in positions.items():
                out[tp] = min(pos, out.get(tp, pos))
        return out

    def delivered_by_flow(
        self, partitions: Collection[tuple[str, int]], timeout_s: float = 30
    ) -> dict[str, dict[tuple[str, int], int]]:
        """The ledger of each target of the query, for the partitions its flow replicates."""
        return {
            ctx.flow.name: self.ledger(ctx).positions(
                [tp for tp in partitions if ctx.should_replicate(tp[0])], timeout_s
            )
            for ctx in self.group.contexts
        }

    def lag(self) -> int:
        """Records the flow still has to copy (source LSO - delivered), from the ledger."""
        return self.progress()["lag"]

    def progress(self) -> dict[str, Any]:
        """Records copied since the first call, records/s since the previous call, and lag."""
        snapshot = self.snapshot()
        done = self.delivered(snapshot)
        total, now = sum(done.values()), time.monotonic()
        base, last_total, last_time = self._sample or (total, total, now)
        self._sample = (base, total, now)
        rate = (total - last_total) / (now - last_time) if now > last_time else 0.0
        out = {
            "copied": total - base,
            "records_per_s": round(rate, 1),
            "lag": sum(max(hi - done.get(tp, 0), 0) for tp, hi in snapshot.items()),
        }
        if self.group.fanout:  # each target's own lag: one that fell behind shows here
            out["lags"] = {
                flow: sum(max(snapshot[tp] - pos, 0) for tp, pos in positions.items())
                for flow, positions in self.delivered_by_flow(snapshot).items()
            }
        return out

    def caught_up(self, target: dict[tuple[str, int], int]) -> bool:
        """True when the ledger of every target reached ``target`` for every partition."""
        wanted = {tp: off for tp, off in target.items() if off > 0}
        for ctx in self.group.contexts:
            mine = [tp for tp in wanted if ctx.should_replicate(tp[0])]
            done = self.ledger(ctx).positions(mine)
            if not all(done.get(tp, 0) >= wanted[tp] for tp in mine):
                return False
        return True

    def await_caught_up(
        self, target: dict[tuple[str, int], int], timeout_s: float | None, on_progress: Any = None
    ) -> bool:
        """Wait until caught up with ``target``; False on timeout. Query failures raise.

        A ``--once`` query whose availableNow slice ended short of the snapshot starts again.
        """
        return drive_until(
            lambda: self.caught_up(target),
            check=self.raise_if_failed,
            ended=lambda: self._until is not None and not self.query.isActive,
            again=lambda: self.start(self._until),
            timeout_s=timeout_s,
            tick=None if on_progress is None else lambda: on_progress(self, target),
        )

    def raise_if_failed(self) -> None:
        """Re-raise a failed query's error as a MirrorRuntimeError with the cause's message."""
        raise_query_error(
            self.query,
            f"{self.job} of {self.ctx.label}",
            "everything committed before the failure is kept; restarting resumes from the last "
            "committed batch",
        )


def _unit_name(r: FlowRunner) -> str:
    return f"{r.job} of {r.name}"


def _runner_unit(r: FlowRunner) -> Unit:
    """A replication query; it counts as recovered once the delivery ledger moves (a slice lasts
    minutes, so Spark's batch count would tell too late)."""
    return Unit(_unit_name(r), r.ctx, lambda: r.query, r.restart, lambda _q: r.delivered_total())


def _table_unit(spark: Any, config: MirrorConfig, tables: list[Any], i: int, cluster: str) -> Unit:
    """Materialization of ``cluster`` (restart replaces ``tables[i]``)."""

    def restart() -> Any:
        tables[i] = start_materialization(spark, config, cluster)
        return tables[i]

    flow = next((f for f in config.flows if f.target == cluster), config.flows[0])
    return Unit(f"tables of {cluster}", FlowContext(config, flow), lambda: tables[i], restart)


def _catch_up_through_outages(
    r: FlowRunner,
    target: dict[tuple[str, int], int],
    limit: float | None,
    bar: Any,
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


def check_clusters(config: MirrorConfig, aliases: list[str], timeout_s: float = 10) -> None:
    """Fail fast, before any query starts, when a cluster cannot be reached."""
    from confluent_kafka import KafkaException  # lazy: optional extra "kafka"

    from mirror_lib.kafka.admin import admin_client  # lazy: confluent-kafka

    quiet = logging.getLogger("mirror_lib.librdkafka")
    for alias in dict.fromkeys(aliases):
        cluster = config.cluster(alias)
        admin = admin_client(client_config(cluster, "admin", extra={"logger": quiet}))
        try:
            admin.list_topics(timeout=timeout_s)
        except KafkaException as exc:
            raise BrokerError(
                f"cannot reach cluster {alias} at {alias}.bootstrap.servers="
                f"{cluster.bootstrap_servers} within {timeout_s:.0f}s ({exc.args[0].str()}); "
                "nothing was started",
                transient=True,
            ) from exc


def _one_round(ctx: FlowContext, report: Any, parts: Collection[str] = PARTS) -> None:
    """After a --once catch-up: one heartbeat and one checkpoint cycle, without Spark."""
    s = ctx.settings
    if s.emit_heartbeats and "heartbeats" in parts:
        emit_heartbeat(ctx)
    if (s.emit_checkpoints or s.sync_group_offsets) and "checkpoints" in parts:
        written, skipped = run_checkpoints(ctx, force_group_sync=True)
        report(f"{ctx.flow.name}: {written} checkpoints written, {skipped} bad records skipped")


def companion_jobs(spark: Any, config: MirrorConfig, names: list[str]) -> list[CompanionJob]:
    """Checkpoint jobs of the given flows and heartbeat jobs of every heartbeat flow.

    As in MM2, heartbeats run for all cluster pairs with emit.heartbeats.enabled (default true),
    not only replicating ones, so that a flow's source has a ``heartbeats`` topic to replicate.
    They are driver threads (:mod:`mirror_lib.replication.companions`); ``spark`` is not used.
    """
    jobs = []
    for name in names:
        s = config.flow(name).settings
        if s.emit_checkpoints or s.sync_group_offsets:
            jobs.append(CompanionJob(config, name, "checkpoints"))
    jobs += [CompanionJob(config, f.name, "heartbeats") for f in config.heartbeat_flows()]
    return jobs


def run_flows(
    spark: Any,
    config: MirrorConfig,
    flow_names: list[str] | None = None,
    *,
    once: bool = False,
    duration_s: float | None = None,
    timeout_s: float | None = None,
    report: Any = print,
    show_progress: bool = False,
    parts: Collection[str] = PARTS,
    on_progress: Callable[[list[dict[str, Any]]], None] | None = None,
    progress_interval_s: float = 5,
    metrics_port: int | None = None,
    metrics_host: str | None = None,
) -> dict[str, FlowStatus]:
    """Run the queries of the given (default: all enabled) flows; the one call behind `mirror run`.

    ``once``: replicate everything available at start, then stop (availableNow semantics).
    ``duration_s``: stop after that many seconds. Otherwise run until interrupted. Every query is
    stopped on return, also on errors and Ctrl-C. ``spark=None`` starts (or reuses) a session
    after the clusters were found reachable. ``parts``: which of replication, checkpoints,
    heartbeats and tables (materialization) to run, so that job tasks can split them.
    ``on_progress`` gets :func:`progress_rows` every ``progress_interval_s`` while running.
    ``metrics_port``/``metrics_host`` (else ``mirror.metrics.port``/``.host``): serve Prometheus
    metrics from before the queries start until return
    (:mod:`mirror_lib.replication.metrics_endpoint`).
    """
    names = flow_names or [f.name for f in config.enabled_flows()]
    if not names:
        raise ConfigError("A->B.enabled", None, "at least one enabled flow (A->B.enabled = true)")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise ConfigError("parts", ",".join(unknown or parts), "any of " + ", ".join(PARTS))
    flows = [config.flow(name) for name in names]
    endpoint = metrics_endpoint(config, metrics_port, metrics_host)  # None: no endpoint
    if endpoint is not None:
        endpoint.check_free()  # a port in use fails here, before anything starts
    check_clusters(config, [alias for f in flows for alias in (f.source, f.target)])
    own_session = False  # stop only a session made here, never e.g. a Databricks job's
    if spark is None:
        from pyspark.sql import SparkSession  # lazy: optional extra "spark"

        own_session = SparkSession.getActiveSession() is None
        spark = get_spark()
    groups = [group_name(g) for g in read_groups(flows)]  # fan-out flows share one query
    runners = [FlowRunner(spark, config, g) for g in groups] if "replication" in parts else []
    jobs = [] if once else [j for j in companion_jobs(spark, config, names) if j.job in parts]
    clusters = materialized_clusters(config) if tables_enabled(config) and "tables" in parts else []
    tables: list[Any] = []
    lags: dict[str, int] = {}  # last measured lag per flow: "records behind" of an outage
    sup = Supervisor(config, once, report, lags.get)
    exporter = None
    try:
        if endpoint is not None:
            exporter = start_exporter(endpoint, runners, jobs, report)
        targets = {r.name: r.snapshot() for r in runners}
        for r in runners:
            for ctx in r.group.contexts:
                _check_matches(ctx, targets[r.name], once, report)
        for r in runners:
            target = targets[r.name]
            r.start(target if once else None, snapshot=target)
            report(f"started {r.job} of {r.name} (checkpoint {r.checkpoint})")
        for j in jobs:
            j.start()
            report(f"started {j.job} of {j.ctx.flow.name} (a driver thread, every {j.interval}s)")
        deadline = None if duration_s is None else time.monotonic() + duration_s
        if once:
            limit = timeout_s if deadline is None else max(deadline - time.monotonic(), 0)
            for r in runners:
                bar = CatchUpProgress(r.name) if show_progress else None
                caught = _catch_up_through_outages(r, targets[r.name], limit, bar, sup)
                if bar is not None:
                    bar.finish()
                if not caught:
                    raise MirrorRuntimeError(
                        f"flow {r.name} did not catch up within {limit:.0f}s; "
                        "everything committed so far is kept"
                    )
                report(f"{r.name}: caught up with {sum(targets[r.name].values())} source offsets")
            for name in names:
                _one_round(FlowContext.create(config, name), report, parts)
            for cluster in clusters:
                materialize_caught_up(spark, config, cluster, timeout_s)
                report(f"materialized the internal topics of {cluster} into Delta tables")
        else:
            tables = [start_materialization(spark, config, c) for c in clusters]
            units = [(_runner_unit(r), r.raise_if_failed) for r in runners]
            units += [
                (
                    _table_unit(spark, config, tables, i, c),
                    lambda i=i, c=c: raise_query_error(tables[i], f"materialization of {c}"),
                )
                for i, c in enumerate(clusters)
            ]
            next_progress = time.monotonic() + progress_interval_s
            while deadline is None or time.monotonic() < deadline:
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
                    lags.update({x["flow"]: x["lag"] for x in rows if x["lag"] is not None})
                    next_progress = time.monotonic() + progress_interval_s
                time.sleep(1)
            if on_progress is not None:
                on_progress(progress_rows(runners + jobs, tables, clusters, sup.waiting()))
        return {r.name: r.status() for r in runners}
    finally:
        if exporter is not None:
            exporter.stop()
        sup.close()
        for r in runners + jobs:
            r.stop()
        for q in tables:
            stop_query(spark, q)
        if own_session:
            spark.stop()


def _progress_or_none(r: Any) -> dict[str, Any]:
    """Copied records, records/s and lag of a replication query from the delivery ledger, or
    nothing when they cannot be measured now (e.g. during an outage)."""
    if r.job != "replication" or r.query is None:
        return {}
    try:
        return r.progress()
    except MirrorError:
        return {}


def progress_rows(
    runners: list[Any],
    tables: list[Any],
    clusters: list[str],
    waiting: dict[str, str] | None = None,
) -> list[dict]:
    """One row per running part: batches (slices) done and, for replication, records copied,
    records/s and lag from the delivery ledger (a slice lasts minutes; the ledger moves on every
    commit).

    ``waiting``: query name -> outage line of the parts waiting through an outage (they get
    ``outage`` and no ledger measurement, which would wait for the unreachable cluster).
    """
    waiting = waiting or {}
    rows = []
    for r in runners:
        st = r.status()
        outage = waiting.get(_unit_name(r))
        row = {
            "flow": st.flow,
            "job": st.job,
            "active": st.active,
            "batches": 0 if st.last_batch_id is None else st.last_batch_id + 1,
            "copied": None,
            "records_per_s": round(st.records_per_second or 0.0, 1),
            "lag": None,
            "outage": outage,
        }
        if not outage:
            row.update(_progress_or_none(r))
        lags = row.pop("lags", None)
        if lags is None:
            rows.append(row)
        else:  # a fan-out group: one row per target, each with its own lag
            rows += [{**row, "flow": flow, "lag": lag} for flow, lag in lags.items()]
    for q, cluster in zip(tables, clusters, strict=True):
        last = q.lastProgress
        rows.append(
            {
                "flow": cluster,
                "job": "tables",
                "active": q.isActive,
                "batches": last["batchId"] + 1 if last else 0,
                "copied": None,
                "records_per_s": round((last or {}).get("processedRowsPerSecond") or 0.0, 1),
                "lag": None,
                "outage": waiting.get(f"tables of {cluster}"),
            }
        )
    return rows
