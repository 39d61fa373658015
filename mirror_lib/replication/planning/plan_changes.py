"""What ends a copy task's slice before its time: the source changed since the slice was
planned, and only the planner may set the change up.

- A topic of the plan has another id than at planning (deleted and re-created since, or just
  deleted), or its id cannot be read: the planner records the gap between slices. A source
  that does not answer in time (a broker or controller restarting) is asked again at the
  next look instead.
- A topic of the flow has more partitions than at planning, or a new topic matches: the
  planner creates its remote topic and writes its start position.

Inside a slice the topic ids are asked on a thread of their own and read at the next look: an
admin request can wait for its timeout (30 s) on a broker that went away, and the copy task
waited with it, its transaction open, twice in a row after a leader of the source was killed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaException

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.lookups import topic_ids
from mirror_lib.replication.context import FlowContext

log = logging.getLogger(__name__)


#: Errors that say the source did not answer, not that a topic is gone: a controller or broker
#: restarting (a rolling restart of a cluster of combined nodes answers "Timed out waiting for
#: controller" for seconds). The slice goes on, and the next look asks again.
UNANSWERED = frozenset(
    {"_TIMED_OUT", "REQUEST_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "NOT_CONTROLLER"}
)


def _unanswered(exc: BrokerError) -> bool:
    name = getattr(exc, "kafka_error", None)
    cause = exc.__cause__
    if name is None and isinstance(cause, KafkaException) and cause.args:
        name = getattr(cause.args[0], "name", lambda: None)()
    return name in UNANSWERED


class PlanChanges:
    """The plan's topic ``ids`` and partition ``counts`` (None: not watched, as with
    ``--once``), against what the source says now."""

    def __init__(
        self,
        contexts: Sequence[FlowContext],
        ids: dict[str, str],
        counts: dict[str, int] | None,
    ) -> None:
        self.contexts = contexts
        self.ctx = contexts[0]
        self.ids = ids
        self.counts = counts
        self._admin: Any = None
        self._look: _Look | None = None  # the look in flight inside the slice

    def replaced(self) -> str:
        """What changed when a topic of the plan has another id than at planning, or when its
        id cannot be read; else "".

        Checked at slice start (a replayed slice was planned before) and on every refresh, for
        every topic of the plan, not only this task's: every task then ends its slice, so that
        the planner records the gap now, not when the slice's time runs out.
        """
        if not self.ids:
            return ""
        if self._admin is None:
            self._admin = self.ctx.admin("source")
        try:
            now = topic_ids(self._admin, set(self.ids))
        except BrokerError as exc:
            if _unanswered(exc):
                log.info("the plan's topic ids went unread (%s); asked again at the next look", exc)
                return ""
            return f"a source topic of the plan is gone ({exc})"
        changed = [
            f"{t} (id {i}, now {now.get(t)})" for t, i in self.ids.items() if now.get(t) != i
        ]
        return "source topic re-created: " + ", ".join(changed) if changed else ""

    def ended_by_replaced(self, *, wait: bool = True) -> bool:
        """Whether a topic of the plan changed since planning; says which before the slice ends.

        ``wait`` off (the copy loop): the look runs on a thread and this call reads the one
        started at the call before, if it has its answer; so a source slow to answer never holds
        the copy up."""
        replaced = self.replaced() if wait else self._replaced_meanwhile()
        if replaced:
            log.warning("%s since planning: ending the slice", replaced)
        return bool(replaced)

    def new_partitions(self, consumer: Any) -> bool:
        """Whether the source (asked through ``consumer``) has a partition the plan has not."""
        if not self.ctx.settings.refresh_topics:
            return False
        try:
            md = consumer.list_topics(timeout=5)
        except KafkaException:
            return False
        counts = self.counts or {}
        return any(
            topic.error is None
            and len(topic.partitions) > counts.get(name, 0)
            and any(c.should_replicate(name) for c in self.contexts)
            for name, topic in md.topics.items()
        )

    def _replaced_meanwhile(self) -> str:
        look = self._look
        if look is None or look.done.is_set():
            self._look = _Look(self.replaced)
        if look is None or not look.done.is_set():
            return ""
        if look.error is not None:
            raise look.error
        return look.answer


class _Look:
    """One call of ``ask`` on a daemon thread: its answer, or the exception it raised."""

    def __init__(self, ask: Callable[[], str]) -> None:
        self.answer = ""
        self.error: Exception | None = None
        self.done = threading.Event()
        self._ask = ask
        threading.Thread(target=self._run, name="mirror-plan-look", daemon=True).start()

    def _run(self) -> None:
        try:
            self.answer = self._ask()
        except Exception as exc:  # raised where the answer is read
            self.error = exc
        finally:
            self.done.set()
