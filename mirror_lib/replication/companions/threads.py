"""Periodic work on driver threads: heartbeats, checkpoints and delta-rs tables
(docs/design.md#d6-companions-on-the-driver).

A Spark query per periodic job ran a Spark job every second and took task slots that replication
needs (measured: the heartbeats query doubled replication latency on 2 cores). These jobs are
small Kafka calls, so they run on a thread of the driver process, on their interval, with the
same start/stop/status/raise_if_failed surface as a :class:`~mirror_lib.spark.runner.FlowRunner`.
Their state is rebuilt from Kafka when needed, so they keep no checkpoint. The tables of a
cluster over delta-rs (:class:`TablesJob`) are the same kind of work: read the internal topics
on from the tables' own positions, decode, append (:mod:`mirror_lib.tables.catch_up`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError, MirrorError, MirrorRuntimeError
from mirror_lib.replication.companions.checkpoint_job import SavedCheckpoints
from mirror_lib.replication.companions.heartbeats import Heartbeater
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.metrics.flow_status import FlowStatus
from mirror_lib.replication.testhooks import delay_first_heartbeat
from mirror_lib.tables.catch_up import materialize_once, positions_file
from mirror_lib.tables.maintenance import maintain_if_due

log = logging.getLogger(__name__)

#: The parts of a run, one word for them everywhere (`run_flows(parts=)`, bundle tasks, status):
#: the replication query, the two companion jobs on driver threads, and materialization.
PARTS = ("replication", "checkpoints", "heartbeats", "tables")
COMPANIONS = ("heartbeats", "checkpoints")
#: How often a continuous run materializes a cluster's tables (the tables lag by up to this).
TABLES_INTERVAL_S = 30.0


def job_interval(ctx: FlowContext, job: str) -> float:
    """How often ``job`` runs for the flow."""
    s = ctx.settings
    if job == "heartbeats":
        return s.heartbeats_interval
    if s.sync_group_offsets:
        return min(s.checkpoints_interval, s.sync_group_offsets_interval)
    return s.checkpoints_interval


class CompanionJob:
    """One periodic job of one flow on a daemon thread of the driver."""

    #: How long :meth:`stop` waits for a run in progress (its Kafka calls time out by then).
    stop_wait_s = 30.0

    def __init__(self, ctx: FlowContext, job: str) -> None:
        if job not in COMPANIONS:
            raise ConfigError("job", job, "one of " + ", ".join(COMPANIONS))
        self.ctx = ctx
        self._setup(job, job_interval(ctx, job))
        self._checkpoints = SavedCheckpoints.of(self.ctx)  # across restarts of thread and process

    def _setup(self, job: str, interval: float) -> None:
        self.job = job
        self.interval = interval
        self.runs = 0
        self.written = 0
        self.last_error: str | None = None
        self.last_success_s: float | None = None  # epoch seconds of the last run that succeeded
        self._failure: BaseException | None = None
        self._stop = threading.Event()
        self._first_done = threading.Event()
        self._thread: threading.Thread | None = None
        self._heartbeater: Any = None
        self.query = None  # no Spark query: progress rows show no lag for companions

    @property
    def name(self) -> str:
        """What the job works for: the flow (the cluster for :class:`TablesJob`)."""
        return self.ctx.flow.name

    @property
    def label(self) -> str:
        return f"flow {self.name}"

    @property
    def checkpoint(self) -> str:
        return "no checkpoint: state is rebuilt from Kafka"

    def run_once(self) -> int:
        """Run the job one time; the number of records it wrote."""
        if self.job == "heartbeats":
            if self._heartbeater is None:
                delay_first_heartbeat()
                self._heartbeater = Heartbeater(self.ctx)
            return self._heartbeater.emit()
        written, _skipped = self._checkpoints.run(self.ctx)
        return written

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.written += self.run_once()
                self.last_error = None
                self.last_success_s = time.time()
            except MirrorError as exc:
                self.last_error = str(exc)
                if not getattr(exc, "transient", False):
                    self._failure = exc
                    return
                log.warning("%s of %s: %s (retrying)", self.job, self.name, exc)
            except Exception as exc:  # a bug must surface, not spin silently
                self._failure = exc
                return
            finally:
                self._first_done.set()
            self.runs += 1
            self._stop.wait(max(self.interval - (time.monotonic() - started), 0.05))

    def first_run_done(self, timeout_s: float) -> bool:
        """Wait until the job has run once (or failed); False after ``timeout_s``."""
        return self._first_done.wait(timeout_s)

    def start(self) -> None:
        self._stop.clear()
        self._first_done.clear()
        self._thread = threading.Thread(
            target=self._loop, name=f"mirror-{self.job}-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.stop_wait_s)
        if self._heartbeater is not None:
            self._heartbeater.close()
            self._heartbeater = None

    @property
    def active(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def status(self) -> FlowStatus:

        return FlowStatus(
            flow=self.name,
            job=self.job,
            active=self.active,
            batches=self.runs,
            last_batch_id=self.runs - 1 if self.runs else None,
            records_per_second=None,
            message=self.last_error or ("running" if self.active else "stopped"),
        )

    def raise_if_failed(self) -> None:
        """Raise the error that stopped the job (transient errors are retried, not raised)."""
        if self._failure is not None:
            raise MirrorRuntimeError(
                f"{self.job} of {self.label} failed: "
                f"{type(self._failure).__name__}: {self._failure}"
            )


class TablesJob(CompanionJob):
    """The delta-rs tables of one cluster, materialized on a driver thread every
    :data:`TABLES_INTERVAL_S` instead of by a Spark query.

    Each run reads the internal topics from where the tables stand
    (:func:`~mirror_lib.tables.catch_up.materialize_once`), so a stop, a crash or an outage
    loses nothing and the next run (or the next ``mirror run``) goes on from there.
    """

    #: A run blocked on an unreachable cluster (30 s look-ups) is left to end on its own: every
    #: commit is atomic and the positions are saved after it, so a stop need not wait for it.
    stop_wait_s = 5.0

    def __init__(
        self, config: MirrorConfig, cluster: str, interval_s: float = TABLES_INTERVAL_S
    ) -> None:
        self.config, self.cluster = config, cluster
        self._setup("tables", interval_s)

    @property
    def name(self) -> str:
        return self.cluster

    @property
    def label(self) -> str:
        return f"cluster {self.cluster}"

    @property
    def checkpoint(self) -> str:
        return f"positions in {positions_file(self.config, self.cluster)} and the tables"

    def run_once(self) -> int:
        """Materialize what the topics hold now, then maintain the tables when that is due
        (``mirror.tables.maintenance.interval.seconds``); the number of records read."""
        read = materialize_once(self.config, self.cluster, stopping=self._stop.is_set)
        if not self._stop.is_set():
            maintain_if_due(self.config)
        return read
