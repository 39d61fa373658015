"""Flow events and metrics records on the target's metrics topic
(docs/design.md#d8-metrics-are-data).

Records are JSON values keyed by ``<remote topic>:<partition>`` (or the flow name for flow-level
events). ``type`` is one of ``batch`` (per partition per transaction chunk), ``gap``, ``skip``
(stale records left out on purpose, :mod:`mirror_lib.config.stale`), ``start``, ``stop``, ``error``.
Schemas are documented in docs/how-it-works.md#metrics-records.

:class:`RunEvents` writes a run's own ``start``, ``stop`` and ``error``: ``mirror run``
(:func:`mirror_lib.spark.runner.run_flows`) writes ``start`` once its replication queries are
started, ``stop`` when it ends as asked (``--once`` caught up, ``--duration`` reached, Ctrl-C or a
job cancel) and ``error`` when it fails, with the first line of the error. An alert on
``type = 'error'`` then sees a run that died, and the events tile shows when runs began and ended.
They are best effort: a target that cannot take them (often the cause of the error) costs a
warning, and the end of the run waits :data:`END_WAIT_S` at most in all, never its own outcome.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from mirror_lib.kafka.admin_ops import NewTopicSpec
from mirror_lib.replication.context import FlowContext, produce_plain

if TYPE_CHECKING:
    from mirror_lib.kafka.admin import KafkaAdminOps

log = logging.getLogger(__name__)

LEFT_OUT_S = 3.0  # what telling a fan-out target's failure may hold up the other targets
PUBLISH_TIMEOUT_S = 5.0  # a run event, per target: creating the metrics topic, then the write
END_WAIT_S = 10.0  # what the end of a run waits for start and its stop/error, in all
_told_left_out: set[tuple[str, str]] = set()


#: The data source option of a query started again through an outage (:class:`QueryRestart`)
RESTART_OPTION = "restart"


@dataclass(frozen=True)
class QueryRestart:
    """Why a replication query was started again: the outage the run's supervisor restarted
    it through. Its copy tasks tell it in the ``resumed`` event of records that waited since
    before the restart, which then names the outage's cause rather than only a restart."""

    at_ms: int  # when the query was started again
    outage_id: str  # as in the outage's outage_started and outage_ended events
    why: str  # "an outage of target cluster B: <last error>", or "an outage: <what names B>"

    def option(self) -> str:
        """The value of :data:`RESTART_OPTION`."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def of_option(cls, text: str | None) -> QueryRestart | None:
        """From :meth:`option`'s text (None: the query was not started again so)."""
        return cls(**json.loads(text)) if text else None


def now_ms() -> int:
    return int(time.time() * 1000)


def flow_event(ctx: FlowContext, kind: str, **fields: Any) -> dict[str, Any]:
    """A flow-level event (start, stop, error)."""
    return {
        "type": kind,
        "flow": ctx.flow.name,
        "source": ctx.source,
        "target": ctx.target,
        "ts_ms": now_ms(),
        **fields,
    }


def gap_event(
    ctx: FlowContext,
    topic: str,
    partition: int,
    position: int | None,
    earliest: int,
    latest: int,
    reason: str,
    action: str,
) -> dict[str, Any]:
    """A vanished source range: where the flow was and what the source holds now."""
    return flow_event(
        ctx,
        "gap",
        topic=topic,
        remote_topic=ctx.remote_topic(topic),
        partition=partition,
        expected_offset=position,
        available_start=earliest,
        available_end=latest,
        reason=reason,
        action=action,
    )


def left_out(ctx: FlowContext, exc: BaseException) -> None:
    """An ``error`` event (action ``left_out``) for a fan-out target that failed for good while
    the others go on, so an alert on ``flow_events`` ``type = 'error'`` sees it. Once per
    process and cause; best effort, as the target may be what fails."""
    lines = str(exc).strip().splitlines()
    reason = lines[0] if lines else type(exc).__name__
    if (ctx.flow.name, reason) in _told_left_out:
        return
    _told_left_out.add((ctx.flow.name, reason))
    event = flow_event(
        ctx, "error", reason=reason, action="left_out", error_type=type(exc).__name__,
        transient=False,
    )  # fmt: skip
    try:
        publish(ctx, [event], timeout_s=LEFT_OUT_S)
    except Exception as err:  # the target refused the event too: its ERROR line still says it
        log.warning("%s: its error event was not written (%s)", ctx.flow.name, err)


def encode(event: dict[str, Any]) -> tuple[bytes, bytes]:
    """(key, value) bytes of an event record."""
    if "partition" in event and "remote_topic" in event:
        key = f"{event['remote_topic']}:{event['partition']}"
    else:
        key = event["flow"]
    return key.encode(), json.dumps(event, separators=(",", ":")).encode()


def publish(ctx: FlowContext, events: Iterable[dict[str, Any]], timeout_s: float = 30) -> None:
    """Write events outside any transaction (planner-side events such as gaps)."""
    produce_plain(
        ctx, "target", ctx.metrics_topic, [encode(e) for e in events], timeout_s=timeout_s
    )


def ensure_metrics_topic(ctx: FlowContext, timeout_s: float | None = None) -> KafkaAdminOps:
    """Create the flow's metrics topic on the target (idempotent, as MM2 creates its own)."""
    target = ctx.admin_ops("target", timeout_s)
    spec = NewTopicSpec(
        ctx.metrics_topic,
        1,
        ctx.settings.offset_syncs_replication_factor,
        {"cleanup.policy": "delete", "retention.ms": str(ctx.settings.metrics_retention_ms)},
    )
    target.create_topics([spec])
    return target


def ensure_internal_topics(ctx: FlowContext) -> None:
    """Create the flow's metrics and offset-syncs topics (idempotent, as MM2 creates its own)."""
    s = ctx.settings
    target = ensure_metrics_topic(ctx)
    if s.emit_offset_syncs:
        side = "target" if ctx.offset_syncs_on_target else "source"
        admin = target if side == "target" else ctx.admin_ops(side)
        admin.create_compacted_topic(ctx.offset_syncs_topic, s.offset_syncs_replication_factor)


class RunEvents:
    """The start/stop/error events of one run for the flows of ``contexts`` (empty: none are
    written); ``state_dir`` says which deployment ran (jobs may share the clusters)."""

    def __init__(self, contexts: Sequence[FlowContext], mode: str, state_dir: str) -> None:
        self.contexts = list(contexts)
        self.state_dir = state_dir
        self.mode = mode
        self.run_id = uuid.uuid4().hex[:12]
        self._started: threading.Thread | None = None
        self._stopped = self._failed = False

    def start(self) -> None:
        """Write ``start`` on a thread: the run does not wait for it."""
        self._started = self._thread("start", reason=f"mirror run started ({self.mode})",
                                     action="started")  # fmt: skip

    def stop(self, reason: str) -> None:
        """Write ``stop``: the run, once started, ended as asked (once per run)."""
        if self._started is not None and not self._stopped:
            self._stopped = True
            self._end("stop", reason=reason, action="stopped")

    def error(self, exc: BaseException) -> None:
        """Write ``error`` with the first line of ``exc`` (once per run; also after ``stop``
        when the work at the end of a ``--once`` run fails)."""
        if self._failed:
            return
        self._failed = True
        text = str(exc).strip().splitlines()
        self._end(
            "error",
            reason=text[0] if text else type(exc).__name__,
            action="failed",
            error_type=type(exc).__name__,
            transient=bool(getattr(exc, "transient", False)),
        )

    def _end(self, kind: str, **fields: Any) -> None:
        """Write ``kind`` after ``start``, waiting :data:`END_WAIT_S` at most in all: the run's
        own end (stopping its queries, raising its error) must not wait on a lost target."""
        started, deadline = self._started, time.monotonic() + END_WAIT_S
        if started is not None:  # start is written first
            started.join(END_WAIT_S)
        self._thread(kind, **fields).join(max(deadline - time.monotonic(), 0.1))

    def _thread(self, kind: str, **fields: Any) -> threading.Thread:
        thread = threading.Thread(
            target=self._publish,
            args=(kind,),
            kwargs=fields,
            name=f"mirror-run-event-{kind}",
            daemon=True,  # never holds the process: its clients time out on their own
        )
        thread.start()
        return thread

    def _publish(self, kind: str, **fields: Any) -> None:
        failed: set[str] = set()  # a target that did not answer is not waited for again
        for ctx in self.contexts:
            if ctx.target in failed:
                continue
            event = flow_event(
                ctx,
                kind,
                run_id=self.run_id,
                mode=self.mode,
                state_dir=self.state_dir,
                pid=os.getpid(),
                host=socket.gethostname(),
                **fields,
            )
            try:
                ensure_metrics_topic(ctx, PUBLISH_TIMEOUT_S / 2)
                publish(ctx, [event], timeout_s=PUBLISH_TIMEOUT_S / 2)
            except Exception as exc:  # best effort: never the run's own outcome
                failed.add(ctx.target)
                log.warning("%s: the %s event was not written (%s)", ctx.flow.name, kind, exc)
