"""A run's own events on each flow's metrics topic, so in ``flow_events``: ``start``, ``stop``
and ``error``.

``mirror run`` (:func:`mirror_lib.spark.runner.run_flows`) writes ``start`` once its replication
queries are started, ``stop`` when it ends as asked (``--once`` caught up, ``--duration``
reached, Ctrl-C or a job cancel) and ``error`` when it fails, with the first line of the error.
An alert on ``type = 'error'`` then sees a run that died, and the events tile shows when runs
began and ended. The events are best effort: a target that cannot take them (often the cause of
the error) costs a warning and at most :data:`PUBLISH_TIMEOUT_S` per target, never the run's own
outcome.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext

log = logging.getLogger(__name__)

PUBLISH_TIMEOUT_S = 5.0


class RunEvents:
    """The start/stop/error events of one run for ``flows`` (names; empty: none are written)."""

    def __init__(self, config: MirrorConfig, flows: Sequence[str], mode: str) -> None:
        self.contexts = [FlowContext.create(config, name) for name in flows]
        self.state_dir = config.state_dir  # which deployment ran: jobs may share the clusters
        self.mode = mode
        self.run_id = uuid.uuid4().hex[:12]
        self._started: threading.Thread | None = None
        self._stopped = self._failed = False

    def start(self) -> None:
        """Write ``start`` on a thread: the run does not wait for it."""
        self._started = threading.Thread(
            target=self._publish,
            args=("start",),
            kwargs={"reason": f"mirror run started ({self.mode})", "action": "started"},
            name="mirror-run-events",
            daemon=True,
        )
        self._started.start()

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
        if self._started is not None:  # start is written first
            self._started.join(PUBLISH_TIMEOUT_S)
        self._publish(kind, **fields)

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
                events.ensure_metrics_topic(ctx, PUBLISH_TIMEOUT_S)
                events.publish(ctx, [event], timeout_s=PUBLISH_TIMEOUT_S)
            except Exception as exc:  # best effort: never the run's own outcome
                failed.add(ctx.target)
                log.warning("%s: the %s event was not written (%s)", ctx.flow.name, kind, exc)
