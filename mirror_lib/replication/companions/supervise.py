"""Keep a run going through outages: restart failed queries, back off, record outage events.

A query that failed for a transient reason (unreachable cluster, timeout, leader move,
coordinator loading: see :func:`mirror_lib.errors.is_transient_text`) is restarted from its
checkpoint in this process with capped exponential backoff, for as long as
``mirror.outage.max.seconds`` allows; the other queries keep running. A terminal failure (auth,
authorization, a record too large, a gap with ``mirror.on.gap = fail``) is raised at once.
An outage is recorded as ``outage_started`` / ``outage_ended`` events on the flow's metrics
topic (so in ``flow_events``) and, while it lasts, in ``<mirror.state.dir>/outages-<pid>.json``
(one per process: job tasks that split a run's parts share the folder), which ``mirror status``
shows.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import MirrorError, MirrorRuntimeError, is_transient_text
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.events import QueryRestart

log = logging.getLogger(__name__)

BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 10.0
PROBE_TIMEOUT_S = 3.0
#: A diagnosis of a refusing target waits this long for its metadata (each bootstrap address),
#: then for its topics' configs.
DIAGNOSIS_METADATA_S = 2.0
DIAGNOSIS_CONFIGS_S = 5.0
#: Kafka's own logs that a transactional copy writes through its coordinators: with too few
#: in-sync replicas they answer COORDINATOR_NOT_AVAILABLE, which hides the cause.
COORDINATOR_LOGS = ("__transaction_state", "__consumer_offsets")
OUTAGES_GLOB = "outages-*.json"  # one file per running process (job tasks share a state dir)


def backoff(attempt: int) -> float:
    """Seconds before retry number ``attempt`` (1, 2, 4, 8, then 10)."""
    return min(BACKOFF_START_S * 2 ** max(attempt - 1, 0), BACKOFF_MAX_S)


def failure_text(query: Any) -> str | None:
    """The text of a failed query's exception (None while it runs or stopped cleanly)."""
    if query is None or query.isActive:
        return None
    exc = query.exception()
    return None if exc is None else str(exc)


def reachable(ctx: FlowContext, side: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the flow's ``side`` cluster answers a metadata request within ``timeout_s``,
    asked with the flow's own admin settings (its ``A->B.source.admin.*`` too)."""
    from confluent_kafka import KafkaException  # lazy: optional extra "kafka"

    admin = ctx.admin(side)
    try:
        return bool(admin.list_topics(timeout=timeout_s).brokers)
    except KafkaException:
        return False


def blamed_cluster(ctx: FlowContext, text: str) -> tuple[str, str, bool]:
    """(alias, role, answers) of the cluster an outage is on: the one that does not answer,
    else the one the error names, else the target."""
    for role, alias in (("source", ctx.source), ("target", ctx.target)):
        if not reachable(ctx, role):
            return alias, role, False
    match = re.search(r"\b(source|target) cluster ([A-Za-z0-9_\-]+)", text)
    if match:
        return match.group(2), match.group(1), True
    return ctx.target, "target", True


#: What an outage is, for alerts (the ``cause`` of events, ``mirror status --json`` and the
#: ``mirror_outage_seconds`` metric), from the failure's text; first match wins.
CAUSES = (
    ("not_enough_replicas", ("NOT_ENOUGH_REPLICAS",)),
    ("no_leader", ("has no leader", "have no leader", "LEADER_NOT_AVAILABLE", "NOT_LEADER")),
    ("coordinator", ("COORDINATOR", "send_offsets_to_transaction", "init_transactions")),
    ("timed_out", ("did not acknowledge", "TIMED_OUT", "did not answer")),
)


def outage_cause(text: str, answers: bool = True) -> str:
    """``unreachable`` when the cluster does not answer, else the first of :data:`CAUSES` the
    failure's text names, else ``other``."""
    if not answers:
        return "unreachable"
    return next((cause for cause, marks in CAUSES if any(m in text for m in marks)), "other")


def target_refusal(ctx: FlowContext) -> str | None:
    """Why the target refuses the flow's writes now, as its metadata shows it from whichever
    bootstrap address answers: partitions of the flow's remote topics, its metrics topic or
    the coordinators' logs without a leader or below ``min.insync.replicas``. For an outage
    that outlasts the first look: the controllers shrink the in-sync replicas only once they
    fence a lost broker, after the copy task first gave up. None: nothing seen (or no
    broker answered, which the outage says already)."""
    # here, not at the top: `mirror status` reads this module and starts without Kafka
    from mirror_lib.kafka import admin

    cluster, _silent = admin.first_answer(ctx.client("target", "admin"), DIAGNOSIS_METADATA_S)
    if cluster is None:
        return None
    meta = cluster.topics
    source = ctx.flow.mm2_source
    topics = sorted(
        t
        for t in meta
        if t in COORDINATOR_LOGS or t == ctx.metrics_topic or ctx.policy.topic_source(t) == source
    )
    needed = admin.min_insync(ctx.admin_ops("target", timeout_s=DIAGNOSIS_CONFIGS_S), topics)
    partitions = [(t, p) for t in topics for p in meta[t].partitions]
    problems = admin.replica_trouble(meta, partitions, needed)
    if not problems:
        return None
    return f"{ctx.where('target')} refuses writes: {admin.first_few(problems)}"


@dataclass
class Outage:
    """One query waiting for a cluster."""

    query: str
    flow: str
    label: str
    cluster: str
    role: str
    bootstrap: str
    reason: str
    started_ms: int
    records_behind: int | None
    cause: str = "other"
    outage_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    attempts: int = 0
    next_retry: float = 0.0
    started: float = field(default_factory=time.monotonic)
    restarted: bool = False

    def restart(self) -> QueryRestart:
        """What a query started again now, through this outage, tells its copy tasks."""
        named = f"{self.role} cluster {self.cluster}"
        # a diagnosis (target_refusal) or a failure line (BrokerError: ...) may name it already
        told = re.search(rf"\b{re.escape(named)}\b", self.reason) is not None
        of = "" if told else f" of {named}"
        return QueryRestart(events.now_ms(), self.outage_id, f"an outage{of}: {self.reason}")

    def line(self) -> str:
        """One line for the run's output and ``mirror status``."""
        waited = time.monotonic() - self.started
        return (
            f"outage: {self.label} ({self.query}) is waiting for {self.role} cluster "
            f"{self.cluster} (bootstrap {self.bootstrap}) for {waited:.0f}s, "
            f"{self.attempts} restarts so far; cause: {self.reason}"
        )


@dataclass
class Unit:
    """A supervised query: how to read it, restart it and name it."""

    name: str
    ctx: FlowContext
    get: Callable[[], Any]
    restart: Callable[[QueryRestart], Any]  # starts the query again after the outage given
    progress_count: Callable[[Any], int] = lambda q: len(q.recentProgress) if q else 0


class Supervisor:
    """Watches queries in the run loop; see the module docstring."""

    def __init__(
        self,
        config: MirrorConfig,
        limit: float | None,
        report: Callable[[str], Any] = print,
        lag_of: Callable[[str], int | None] = lambda _flow: None,
    ) -> None:
        """``limit``: how long a query may wait through an outage (``RunSettings.outage_limit_s``
        of :mod:`mirror_lib.config.global_settings`)."""
        self.config = config
        self.limit = limit
        self._report = report
        self.lag_of = lag_of
        self.outages: dict[str, Outage] = {}
        self.pending: list[tuple[FlowContext, dict[str, Any]]] = []
        self.status_file = Path(config.state_dir) / f"outages-{os.getpid()}.json"
        self._progress_at_restart: dict[str, int] = {}

    def report(self, line: str) -> None:
        """Say it now: the run's output is often a file or a pipe (block-buffered)."""
        self._report(line)
        sys.stdout.flush()

    # -- the loop's one call ----------------------------------------------------------------
    def watch(self, unit: Unit, raise_terminal: Callable[[], None]) -> None:
        """Check one query: raise a terminal failure, handle a transient one, end an outage."""
        query = unit.get()
        text = failure_text(query)
        outage = self.outages.get(unit.name)
        if text is not None:
            if not is_transient_text(text):
                raise_terminal()
                raise MirrorRuntimeError(f"{unit.name} failed: {text.splitlines()[0]}")
            if outage is None:
                outage = self._begin(unit, text)
            self._retry(unit, outage, text)
        elif (
            outage is not None and query is not None and query.isActive and self._moved(unit, query)
        ):
            self._end(unit, outage)
        self.flush_events()

    def _moved(self, unit: Unit, query: Any) -> bool:
        """Whether the restarted ``query`` of ``unit`` made progress since its restart. A count
        not known then (-1: the target's ledger did not answer) is taken from the first look
        that reads one: the ledger answering again is not the query copying again."""
        count = unit.progress_count(query)
        before = self._progress_at_restart.get(unit.name, 0)
        if before < 0 <= count:
            self._progress_at_restart[unit.name] = count
            return False
        return count > before

    def waiting(self) -> dict[str, str]:
        """Query name -> outage line of every query waiting through an outage."""
        return {name: o.line() for name, o in self.outages.items()}

    def current(self) -> list[dict[str, Any]]:
        """Every outage now, with the seconds it lasts so far (the metrics endpoint's view)."""
        now = time.monotonic()
        return [
            {"flow": o.flow, "query": o.query, "cluster": o.cluster, "role": o.role,
             "cause": o.cause, "seconds": now - o.started}
            for o in list(self.outages.values())
        ]  # fmt: skip

    # -- outage bookkeeping -------------------------------------------------------------------
    def _begin(self, unit: Unit, text: str) -> Outage:
        ctx = unit.ctx
        alias, role, answers = blamed_cluster(ctx, text)
        reason = _first_line(text)
        outage = Outage(
            query=unit.name,
            flow=ctx.flow.name,
            label=ctx.label,
            cluster=alias,
            role=role,
            bootstrap=ctx.config.cluster(alias).bootstrap_servers,
            reason=reason,
            started_ms=events.now_ms(),
            records_behind=self.lag_of(ctx.flow.name),
            cause=outage_cause(text, answers),
        )
        self.outages[unit.name] = outage
        self.report(f"{outage.line()}; retrying with backoff")
        self._queue(ctx, "outage_started", outage, reason=reason, action="retrying")
        self._write_status()
        return outage

    def _retry(self, unit: Unit, outage: Outage, text: str) -> None:
        now = time.monotonic()
        waited = now - outage.started
        if self.limit is not None and waited > self.limit:
            raise MirrorRuntimeError(
                f"{outage.label}: {outage.role} cluster {outage.cluster} (bootstrap "
                f"{outage.bootstrap}) still failing after {waited:.0f}s of retries "
                f"(mirror.outage.max.seconds = {self.limit:.0f}): {_first_line(text)}; "
                "everything committed before the failure is kept; restarting resumes from the "
                "last committed batch",
                transient=True,
            )
        if now < outage.next_retry:
            return
        outage.attempts += 1
        outage.next_retry = now + backoff(outage.attempts)
        self._diagnose(unit, outage, text)
        self._write_status()  # the cause as diagnosed, while the restart is under way
        try:
            query = unit.restart(outage.restart())
        except MirrorError as exc:
            if not exc.transient:
                raise
            self.report(
                f"{outage.line()}; restart failed ({exc}), next in {backoff(outage.attempts):.0f}s"
            )
            return
        self._progress_at_restart[unit.name] = unit.progress_count(query)
        outage.restarted = True
        self.report(
            f"{outage.line()}; restarted from its checkpoint "
            f"(next retry, if needed, in {backoff(outage.attempts):.0f}s)"
        )
        self._write_status()

    def _diagnose(self, unit: Unit, outage: Outage, text: str) -> None:
        """What the outage is now: a target that answers but refuses writes says why at each
        retry (its in-sync replicas shrink only once its controllers fence the lost brokers,
        after the first failure was told), else the failure's own text; a later cause
        replaces the first."""
        refusal = None
        if outage.role == "target" and outage.cause != "unreachable":
            try:
                refusal = target_refusal(unit.ctx)
            except Exception as exc:  # a diagnosis never ends a run
                log.debug("%s: no diagnosis of the target: %s", outage.label, exc)
        outage.reason = refusal or _first_line(text)
        if outage.cause != "unreachable":
            outage.cause = outage_cause(refusal or text)

    def _end(self, unit: Unit, outage: Outage) -> None:
        del self.outages[unit.name]
        duration = time.monotonic() - outage.started
        self.report(
            f"outage over: {outage.label} ({outage.query}) is running again after "
            f"{duration:.0f}s ({outage.role} cluster {outage.cluster}, {outage.attempts} restarts)"
        )
        self._queue(
            unit.ctx,
            "outage_ended",
            outage,
            duration_s=round(duration, 3),
            restarts=outage.attempts,
            reason=f"{outage.role} cluster {outage.cluster} (bootstrap {outage.bootstrap}) "
            f"unavailable for {duration:.0f}s; {outage.attempts} restarts",
            last_error=outage.reason,
            action="resumed",
        )
        self._write_status()

    def _queue(self, ctx: FlowContext, kind: str, outage: Outage, **extra: Any) -> None:
        event = events.flow_event(
            ctx,
            kind,
            outage_id=outage.outage_id,
            query=outage.query,
            cluster=outage.cluster,
            role=outage.role,
            bootstrap=outage.bootstrap,
            records_behind=outage.records_behind,
            started_ms=outage.started_ms,
            cause=outage.cause,
            **extra,
        )
        self.pending.append((ctx, event))

    def flush_events(self) -> None:
        """Write queued outage events to the metrics topics whose cluster is not waited for.

        Events keep their own time (``ts_ms``), so ``outage_started`` of a target outage is
        written after the target returned and still shows when the outage began.
        """
        down = {o.cluster for o in self.outages.values()}
        keep = []
        for ctx, event in self.pending:
            if ctx.target in down:
                keep.append((ctx, event))
                continue
            try:
                events.publish(ctx, [event], timeout_s=10)
            except MirrorError as exc:
                log.warning("outage event not written yet (%s); will retry", exc)
                keep.append((ctx, event))
        self.pending = keep

    def _write_status(self) -> None:
        data = {
            "pid": os.getpid(),
            "updated_ms": events.now_ms(),
            "outages": [
                {k: v for k, v in asdict(o).items() if k not in ("next_retry", "started")}
                for o in self.outages.values()
            ],
        }
        with contextlib.suppress(OSError):
            self.status_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.status_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(self.status_file)

    def close(self) -> None:
        """Remove the status file of this run (it describes a live run only)."""
        with contextlib.suppress(OSError):
            self.status_file.unlink()


def current_outages(config: MirrorConfig) -> list[dict[str, Any]]:
    """Outages a live ``mirror run`` on this state folder is waiting through (for ``status``)."""
    out = []
    for path in sorted(Path(config.state_dir).glob(OUTAGES_GLOB)):
        try:
            data = json.loads(path.read_text())
            os.kill(int(data["pid"]), 0)  # the run that wrote it is still alive
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out += list(data.get("outages") or [])
    return out


def _first_line(text: str) -> str:
    """The line of a failure that says what failed: our own error's, else a Kafka client's
    (a Spark query's text begins with Spark's "Job aborted"), else the first."""
    match = re.search(r"mirror_lib\.errors\.(\w+): (.*)", text) or re.search(
        r"\b(KafkaException): (.*)", text
    )
    if match:
        return f"{match.group(1)}: {match.group(2)}"
    lines = text.strip().splitlines()
    return lines[0] if lines else text
