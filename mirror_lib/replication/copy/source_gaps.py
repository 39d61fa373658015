"""Source ranges that vanished under a flow (docs/design.md#d10-nothing-lost-nothing-silent), as the
planner finds them between slices.

- Records deleted (retention, DeleteRecords) before they were copied: the ledger is behind the
  earliest offset. A copy task whose consumer meets the deletion ends its slice, so the planner
  records it at once.
- A topic deleted and re-created: its id changed since the last slice. A query on a new
  checkpoint has no last slice: it takes the id from the flow's newest ``segments`` event for the
  topic on its metrics topic (:func:`recorded_topic_ids`), which names the topic id the records
  were copied from.
- A partition that now ends before the flow's position: truncated by an unclean leader election,
  or re-created while the planner could not see it (its query started on a new checkpoint, so
  there was no last slice to compare ids with). Without this check the flow would wait for the
  new log to pass its old position and then skip every record before it.

Each is a ``gap`` event and, with ``mirror.on.gap = fail`` (the default), a DataLossError; with
``skip`` the flow continues from the earliest offset the source holds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Collection

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError, DataLossError
from mirror_lib.kafka.reader import read_back
from mirror_lib.mm2.formats import TP
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.source_reader import consumed, make_consumer
from mirror_lib.replication.translate import SEGMENTS_EVENT, reader_conf

log = logging.getLogger(__name__)

PROBE_S = 10.0


class GapPolicy:
    """What one planner does about a gap: publish its event once, then fail or skip it."""

    def __init__(self) -> None:
        self._published: set[tuple[str, str, int, int | None, int]] = set()

    def handle(
        self, ctx: FlowContext, topic: str, p: int, pos: int | None, lo: int, hi: int, reason: str
    ) -> int:
        """The position to continue from (``lo``, with ``mirror.on.gap = skip``)."""
        action = ctx.settings.on_gap
        key = (ctx.flow.name, topic, p, pos, lo)
        if key not in self._published:  # a fan-out target left out is planned at every slice
            self._published.add(key)
            events.publish(ctx, [events.gap_event(ctx, topic, p, pos, lo, hi, reason, action)])
        message = (
            f"data gap in {topic}[{p}] for flow {ctx.flow.name}: {reason}; the flow was at "
            f"offset {pos}, the source now holds [{lo}, {hi}). "
        )
        if action == "fail":
            raise DataLossError(
                message + "Nothing after the gap was replicated; set "
                f"{ctx.flow.name}.mirror.on.gap=skip to continue from offset {lo}."
            )
        log.warning(message + "continuing from %d (mirror.on.gap=skip)", lo)
        return lo


def ends_before(
    ctx: FlowContext,
    positions: dict[TP, int],
    bounds: dict[TP, tuple[int, int]],
    timeout_s: float = PROBE_S,
) -> dict[TP, int]:
    """The partitions of ``positions`` whose log ends before that position, with their end.

    Asked only for positions past the end offset listed in ``bounds`` (earliest, end), as
    :func:`~mirror_lib.kafka.lookups.partition_bounds` gives them. On Kafka that alone means a
    truncated log, but the test broker lists less than it holds, so the answer comes from a
    fetch from the listed end: a record at or past the position's last offset clears it, an end
    of partition before the position confirms it. A partition that does not answer in time is
    not reported (the copy task meets an out-of-range position itself).
    """
    if not positions:
        return {}
    ends: dict[TP, int] = {}
    waiting = dict(positions)
    listed = {tp: bounds[tp][1] for tp in positions}
    consumer = make_consumer(ctx, to_end=True)
    try:
        consumer.assign([TopicPartition(t, p, listed[(t, p)]) for t, p in sorted(waiting)])
        deadline = time.monotonic() + timeout_s
        while waiting and time.monotonic() < deadline:
            for msg in consumed(consumer, 1000, 0.2):
                tp = (msg.topic(), msg.partition())
                err = msg.error()
                if tp not in waiting:
                    continue
                if err is None:
                    if msg.offset() + 1 >= waiting[tp]:
                        del waiting[tp]
                elif err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() < waiting.pop(tp):
                        ends[tp] = msg.offset()
                elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    ends[tp] = listed[tp]  # even the listed end is gone: truncated again
                    del waiting[tp]
    except KafkaException as exc:
        log.warning("%s: checking where the source partitions end failed: %s", ctx.label, exc)
    finally:
        with contextlib.suppress(Exception):
            consumer.close()
    if waiting:
        log.warning(
            "%s: could not tell within %.0f s whether %s end before the flow's position",
            ctx.label, timeout_s, ", ".join(f"{t}[{p}]" for t, p in sorted(waiting)),
        )  # fmt: skip
    return ends


def lost_entry(ctx: FlowContext, topic: str, p: int, planned: int | None) -> int | None:
    """The last plan's position of a partition whose ledger entry is gone: the broker expires
    a group's offset not committed for ``offsets.retention.minutes``, or the group was deleted.
    Never more than was delivered, and exact when the partition stayed idle since."""
    if planned is None:
        return None
    log.warning(
        "%s: no delivery ledger entry for %s[%d] although the last slice started it at %s "
        "(expired after the target's offsets.retention.minutes, or its group was deleted): "
        "going on from there",
        ctx.label, topic, p, planned,
    )  # fmt: skip
    return int(planned)


def recorded_topic_ids(
    ctx: FlowContext, topics: Collection[str], budget_s: float = PROBE_S
) -> dict[str, str | None]:
    """The source topic id that the flow's newest ``segments`` event names, per topic of
    ``topics`` that has one (None: that event names no id, as those written before ids were).

    Read back from the end of the metrics topic until every topic is found, the topic's start,
    or ``budget_s``: topics not found are left out, and the planner knows no more than before.
    """
    wanted, found = set(topics), {}
    deadline = time.monotonic() + budget_s
    complete = True
    try:
        for chunk in read_back(reader_conf(ctx), ctx.metrics_topic, timeout_s=budget_s):
            newest: dict[str, str | None] = {}  # in this chunk; records come oldest first
            for msg in chunk.records:
                value = msg.value()
                if not value or not value.startswith(SEGMENTS_EVENT):
                    continue
                with contextlib.suppress(ValueError, AttributeError):
                    event = json.loads(value)
                    if event.get("flow") == ctx.flow.name and event.get("topic") in wanted:
                        newest[event["topic"]] = event.get("topic_id")
            found.update({t: i for t, i in newest.items() if t not in found})
            if len(found) == len(wanted) or chunk.at_start:
                break
            if time.monotonic() > deadline:
                complete = False
                break
    except BrokerError as exc:
        log.warning("%s: reading %s for source topic ids failed: %s", ctx.label,
                    ctx.metrics_topic, exc)  # fmt: skip
        complete = False
    if not complete and len(found) < len(wanted):
        log.warning(
            "%s: could not tell within %.0f s whether %s were re-created since the flow last "
            "copied them", ctx.label, budget_s, ", ".join(sorted(wanted - set(found))),
        )  # fmt: skip
    return found
