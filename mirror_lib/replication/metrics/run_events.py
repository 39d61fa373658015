"""A run's own events on each flow's metrics topic, so in ``flow_events``: ``start``, ``stop``
and ``error``.

``mirror run`` (:func:`mirror_lib.spark.runner.run_flows`) writes ``start`` once its replication
queries are started, ``stop`` when it ends as asked (``--once`` caught up, ``--duration``
reached, Ctrl-C or a job cancel) and ``error`` when it fails, with the first line of the error.
An alert on ``type = 'error'`` then sees a run that died, and the events tile shows when runs
began and ended. The events are best effort: a target that cannot take them (often the cause of
the error) costs a warning, and the end of the run waits :data:`END_WAIT_S` at most in all, never
its own outcome.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext

log = logging.getLogger(__name__)

PUBLISH_TIMEOUT_S = 5.0  # per target: creating the metrics topic, then the write
END_WAIT_S = 10.0  # what the end of a run waits for start and its stop/error, in all


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
            event = events.flow_event(
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
                events.ensure_metrics_topic(ctx, PUBLISH_TIMEOUT_S / 2)
                events.publish(ctx, [event], timeout_s=PUBLISH_TIMEOUT_S / 2)
            except Exception as exc:  # best effort: never the run's own outcome
                failed.add(ctx.target)
                log.warning("%s: the %s event was not written (%s)", ctx.flow.name, kind, exc)
