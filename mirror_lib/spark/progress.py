"""Progress of queries and catch-ups: shared by the flow runner and materialization.

:class:`CatchUpProgress` (``mirror run --once``, the demo): records done / to do and rate; a bar
on a terminal, otherwise a plain line when the count moved, at most every ``LINE_SECONDS`` (logs,
CI, jobs). Counts come from the delivery ledger, so they are exact. :func:`end_offsets` and
:func:`raise_query_error` read a streaming query's progress and failure; :func:`stop_query`
stops one and waits for its tasks. :func:`progress_rows` is what a running ``mirror run`` reports
every few seconds, one row per part.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from mirror_lib.errors import MirrorError, MirrorRuntimeError
from mirror_lib.kafka.lookups import positions
from mirror_lib.mm2.formats import TP

LINE_SECONDS = 5.0


class CatchUpProgress:
    """Callable passed to :meth:`~mirror_lib.spark.flow_runner.FlowRunner.await_caught_up` as
    ``on_progress``."""

    def __init__(self, flow: str, stream: TextIO | None = None) -> None:
        self.flow = flow
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self.base: int | None = None
        self.last_done: int | None = None
        self.last_line = 0.0

    def update(self, delivered: dict[TP, int], target: dict[TP, int]) -> str | None:
        """The line for these ledger positions (None when nothing new is worth a line)."""
        reached = sum(min(delivered.get(tp, 0), off) for tp, off in target.items())
        if self.base is None:
            self.base = reached
        done = reached - self.base
        total = max(sum(target.values()) - self.base, 0)
        rate = done / max(time.monotonic() - self.started, 1e-9)
        if self.tty:
            filled = int(30 * done / total) if total else 30
            return (
                f"\r{self.flow} [{'#' * filled}{'.' * (30 - filled)}] "
                f"{done}/{total} records {rate:,.0f} rec/s"
            )
        now = time.monotonic()
        if done == self.last_done or (done < total and now - self.last_line < LINE_SECONDS):
            return None
        self.last_done, self.last_line = done, now
        return f"{self.flow}: {done}/{total} records, {rate:,.0f} rec/s\n"

    def __call__(self, runner: Any, target: dict[TP, int]) -> None:
        line = self.update(runner.delivered(target), target)
        if line:
            self.stream.write(line)
            self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")


def end_offsets(progress: dict[str, Any] | None) -> dict[TP, int]:
    """End offset per (topic, partition) of a mirror source's last progress ({} if none)."""
    if not progress or not progress.get("sources"):
        return {}
    raw = progress["sources"][0].get("endOffset")
    # Python sources report offsets as the repr of the dict in Spark 4.1, JSON elsewhere.
    end = (
        (json.loads(raw) if raw.startswith('{"') else ast.literal_eval(raw))
        if isinstance(raw, str)
        else raw
    )
    return positions(end)


def raise_query_error(
    query: Any, what: str, kept: str = "the tables keep every committed batch"
) -> None:
    """Raise a MirrorRuntimeError naming the cause when ``query`` failed.

    The cause is our own error's message when the Python traceback carries one, else the first
    line of Spark's message.
    """
    exc = query.exception() if query is not None else None
    if exc is not None:
        text = str(exc)
        match = re.search(r"mirror_lib\.errors\.(\w+): (.*)", text)
        detail = f"{match.group(1)}: {match.group(2)}" if match else text.strip().splitlines()[0]
        raise MirrorRuntimeError(f"{what} failed: {detail}; {kept}")


# Spark logs each task of a deliberately stopped query as an ERROR with a stack trace
# ("Aborting task", TaskKilledException, "Aborting commit"), though nothing failed: a copy
# task's open transaction is fenced and the ledger says where the next run starts.
KILL_LOGGERS = (
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.util.Utils",
)


@contextlib.contextmanager
def quiet_kills(spark: Any) -> Iterator[None]:
    """Silence :data:`KILL_LOGGERS` while a query is stopped; they inherit their level again
    afterwards. Without a driver JVM (Spark Connect) or log4j 2, nothing changes."""
    try:
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in KILL_LOGGERS:
            configurator.setLevel(name, off)
    except Exception:
        configurator = None
    try:
        yield
    finally:
        if configurator is not None:
            for name in KILL_LOGGERS:
                with contextlib.suppress(Exception):
                    configurator.setLevel(name, None)


#: How often a stop cancels the query's jobs again until the query's thread has ended.
CANCEL_EVERY_S = 0.5


def stop_query(spark: Any, query: Any, timeout_s: float = 30) -> bool:
    """Stop a streaming query and wait until its tasks have ended, not only its driver thread;
    False when that could not be seen (the caller fences what they may still write).

    ``StreamingQuery.stop`` returns once the job is cancelled, while a copy task is still being
    killed; a query started at that moment could be handed the dying Python worker. Without a
    SparkContext (Spark Connect, serverless) only the query is stopped. The killed tasks are not
    logged as errors (:func:`quiet_kills`).
    """
    if query is None:
        return True
    with quiet_kills(spark):
        return _stop_and_wait(spark, query, timeout_s)


def _stop_and_wait(spark: Any, query: Any, timeout_s: float) -> bool:
    if not query.isActive:
        return True  # it ended on its own, its tasks with it
    try:
        context = spark.sparkContext
        tracker = context.statusTracker()
    except Exception:  # Spark Connect has no SparkContext
        query.stop()
        return False
    group = str(query.runId)
    _stop_cancelling(query, context, group)
    deadline = time.monotonic() + timeout_s
    _drain_listeners(context, timeout_s)
    while time.monotonic() < deadline:
        if tasks_ended(tracker, group):
            return True
        time.sleep(0.1)
    return False


def _stop_cancelling(query: Any, context: Any, group: str) -> None:
    """``query.stop()``, cancelling the query's job group again every :data:`CANCEL_EVERY_S`
    until it returns.

    Spark cancels the group once and interrupts the query's thread; a thread that was planning
    a batch then could start that batch's job anyway (the interrupt was lost on the way), and
    the stop waited for the whole slice, its copy task copying all along (seen once in 16
    stops, for 300 s)."""
    failed: list[BaseException] = []

    def stop() -> None:
        try:
            query.stop()
        except BaseException as exc:  # raised in the caller's thread below
            failed.append(exc)

    stopping = threading.Thread(target=stop, name="mirror-query-stop", daemon=True)
    stopping.start()
    while True:
        stopping.join(CANCEL_EVERY_S)
        if not stopping.is_alive():
            break
        context.cancelJobGroup(group)
    if failed:
        raise failed[0]


def _drain_listeners(context: Any, timeout_s: float) -> None:
    """Wait until Spark's listeners have taken every event posted so far, where the JVM lets
    us: the status tracker knows a job only once its start event was taken."""
    with contextlib.suppress(Exception):  # not on every JVM (an internal of Spark's)
        context._jsc.sc().listenerBus().waitUntilEmpty(int(timeout_s * 1000))


def tasks_ended(tracker: Any, group: str) -> bool:
    """Whether every job of ``group`` has ended and no task of its stages still runs.

    A stage's count of active tasks lags in Spark's status store: a task that started just
    after its stage counted 0 there for up to 2.3 s while it copied. Once the job has ended
    (the stop cancelled it), the stage's end has written the count, and it is exact."""
    for jid in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(jid)
        if job is None:
            continue
        if job.status == "RUNNING":
            return False
        for sid in job.stageIds or []:
            stage = tracker.getStageInfo(sid)
            if stage is not None and stage.numActiveTasks > 0:
                return False
    return True


def drive_until(
    reached: Callable[[], bool],
    *,
    check: Callable[[], None],
    ended: Callable[[], bool],
    again: Callable[[], Any],
    timeout_s: float | None,
    tick: Callable[[], None] | None = None,
) -> bool:
    """Wait until ``reached()``, the one catch-up loop of replication and materialization.

    ``check()`` raises a failed query's error; a query that ``ended()`` short of the goal (an
    availableNow run of one capped or replayed batch) is started ``again()``; ``tick()`` runs
    each round (progress). False when ``timeout_s`` passes first.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while deadline is None or time.monotonic() < deadline:
        check()
        if reached():
            check()  # a query that failed right after the first check
            return True
        if ended():
            check()
            again()
        if tick is not None:
            tick()
        time.sleep(0.5)
    return False


def unit_name(r: Any) -> str:
    """``replication of A->B`` (or of a group ``A->B,C``), ``checkpoints of A->B``, ..."""
    return f"{r.job} of {r.name}"


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
        outage = waiting.get(unit_name(r))
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
