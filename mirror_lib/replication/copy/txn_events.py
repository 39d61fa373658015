"""What a target's transaction carries besides the records: offset syncs, ``segments``,
``skip`` and ``resumed`` events (:mod:`mirror_lib.replication.copy.landing` produces them, and
the ``batch`` events of :mod:`mirror_lib.replication.copy.metrics_window`)."""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import TopicPartition

from mirror_lib.config.settings import FlowSettings
from mirror_lib.config.stale import skip_event_fields
from mirror_lib.mm2.formats import TP, OffsetSync
from mirror_lib.offsets.segments import Segment, mm2_compatible_points
from mirror_lib.replication import events
from mirror_lib.replication.copy.copy_state import PartState

if TYPE_CHECKING:
    from mirror_lib.replication.copy.writer import TargetWriter

#: The source's (low, high) watermarks of a partition, as the copy task's consumer last saw them.
Watermarks = Callable[[TopicPartition], tuple[int, int]]

#: A transaction whose records waited at least this long to be copied tells it (``resumed``)...
RESUMED_AFTER_S = 1.0
#: ... unless the task saw no cause and the slot's records usually wait half as long: on a
#: target busy enough that every transaction's records wait about a second, each would tell
#: "the target acknowledged late", one event a second, though the copy never stopped
USUAL_FACTOR = 2.0
#: a wait this long is told whatever the usual (a fault that stops the copy 2 s is told)
ALWAYS_TOLD_S = 1.5
#: the usual wait is the median of the slot's last this many transactions' longest waits
USUAL_OF = 20


class UsualWait:
    """How long a slot's records usually wait to be copied (:data:`USUAL_OF` transactions), and
    so how long a wait must be to be told without a cause: twice the usual, at least
    :data:`RESUMED_AFTER_S` and at most :data:`ALWAYS_TOLD_S`."""

    def __init__(self) -> None:
        self.recent: deque[float] = deque(maxlen=USUAL_OF)

    def learn(self, waited_s: float) -> None:
        """One more transaction's longest wait."""
        self.recent.append(waited_s)

    def told_from_s(self) -> float:
        usual = statistics.median(self.recent) if self.recent else 0.0
        return min(ALWAYS_TOLD_S, max(RESUMED_AFTER_S, USUAL_FACTOR * usual))


def sync_records(settings: FlowSettings, segments: Mapping[TP, list[Segment]]) -> list[OffsetSync]:
    """MM2 offset syncs for the transaction's segments (none when the flow emits none)."""
    if not settings.emit_offset_syncs:
        return []
    lag_max = settings.offset_lag_max
    return [
        OffsetSync(tp[0], tp[1], point.upstream, point.downstream)
        for tp, segs in segments.items()
        for seg in segs
        for point in mm2_compatible_points(seg, lag_max)
    ]


def skip_events(w: TargetWriter) -> list[dict[str, Any]]:
    """One ``skip`` event per partition and skipped range of writer ``w``'s open transaction."""
    return [
        events.flow_event(
            w.ctx,
            "skip",
            topic=tp[0],
            remote_topic=w.ctx.remote_topic(tp[0]),
            partition=tp[1],
            batch_id=w.batch_id,
            slot=w.slot,
            **skip_event_fields(rng, w.skips.policy),
        )
        for tp, skips in w.skips.by_tp.items()
        for rng in skips.pending
    ]


def segments_events(
    w: TargetWriter, parts: Mapping[TP, PartState], segments: Mapping[TP, list[Segment]]
) -> list[dict[str, Any]]:
    """A ``segments`` event per partition of writer ``w``'s transaction (``parts``: their
    states): where its records landed, which translation reads.

    It names the source topic's id when the plan knew it: a planner on a new checkpoint finds
    there which topic the ledger's positions belong to
    (:func:`~mirror_lib.replication.copy.source_gaps.recorded_topic_ids`)."""
    out: list[dict[str, Any]] = []
    for tp, segs in segments.items():
        topic_id = w.topic_ids.get(tp[0])
        out.append(
            events.flow_event(
                w.ctx,
                "segments",
                topic=tp[0],
                remote_topic=parts[tp].remote,
                partition=tp[1],
                batch_id=w.batch_id,
                segments=[
                    [g.upstream_start, g.upstream_end, g.downstream_start, g.downstream_end]
                    for g in segs
                ],
                **({"topic_id": topic_id} if topic_id else {}),
            )
        )
    return out


def resumed_events(
    w: TargetWriter,
    parts: Mapping[TP, PartState],
    acked_ms: float,
    usual: UsualWait,
    free_ms: float | None = None,
) -> list[dict[str, Any]]:
    """A ``resumed`` event when records of writer ``w``'s transaction waited at least
    :data:`RESUMED_AFTER_S` to be copied (without a cause the task saw, as long as ``usual``
    says, which learns this wait): from the later of their partition's last commit
    (``w.ledger.landed_ms``, kept across restarts in the ledger) and the first record's CreateTime,
    to the target's acknowledgement. That is how long a fault (a lost leader, a restart, a
    target that refused writes) stopped the copy of records that were there to be copied; a
    partition that never committed before (a new flow's backlog) does not count, nor, unless the
    task saw a cause or started again, one whose last commit left records behind on the source
    (a backlog, whose records wait for the copy to come round to them: the lag shows that).

    A wait since before the run's supervisor started the query again through an outage
    (``w.query_restart``) is told by that outage. Without such a cause, the wait is the source's
    when the copy task, free to read since ``free_ms`` (its last commit), read the
    longest-waiting records only in its second half; else the target's, which acknowledged
    late.
    """
    waits: list[tuple[float, float, PartState]] = []
    explained = w.trouble is not None or w.fresh_start
    for part in parts.values():
        remote = (part.remote, part.partition)
        last = w.ledger.landed_ms.get(remote)
        if last is None or not part.n or (remote in w.ledger.left_behind and not explained):
            continue
        since = max(last, part.ts[0]) if part.ts else last
        waits.append((acked_ms - since, since, part))
    if not waits:
        return []
    told_from_s = RESUMED_AFTER_S if explained else usual.told_from_s()
    usual.learn(max(ms for ms, _since, _p in waits) / 1000)
    waited = [wait for wait in waits if wait[0] >= told_from_s * 1000]
    if not waited:
        return []
    longest, began, part = max(waited, key=lambda wait: wait[0])
    # the cause's own fields: the outage's id, or what a cause the task did not see is judged by
    judged: dict[str, float | str] = {}
    if w.trouble is not None:
        cause = w.trouble
    elif w.fresh_start and w.query_restart is not None and began <= w.query_restart.at_ms:
        cause = f"the query was started again after {w.query_restart.why}"
        judged["outage_id"] = w.query_restart.outage_id
    elif w.fresh_start:
        cause = "the slot's copy task started again (the query or its slice restarted)"
    else:
        source_ms = _read_late_ms(part, began, free_ms)
        judged["source_s"] = round(source_ms / 1000, 3)
        held = [(p.topic, p.partition) for _ms, _s, p in waited]
        cause = _unexplained(w, held, longest, source_ms)
    return [
        events.flow_event(
            w.ctx,
            "resumed",
            slot=w.slot,
            batch_id=w.batch_id,
            waited_s=round(longest / 1000, 3),
            **judged,
            since_ms=int(min(since for _ms, since, _p in waited)),
            partitions=sorted(f"{p.remote}[{p.partition}]" for _ms, _s, p in waited),
            records=sum(p.n for _ms, _s, p in waited),
            reason=f"copying resumed after {longest / 1000:.1f}s: {cause}",
            action="resumed",
        )
    ]


def _read_late_ms(part: PartState, since: float, free_ms: float | None) -> float:
    """How long into a wait that began at ``since`` the copy task read the partition's first
    record, counted from when it was free to read (``free_ms``, its last commit, if later)."""
    if not part.consumed:
        return 0.0
    return max(0.0, part.consumed[0][0] - max(since, free_ms or since))


def _unexplained(w: TargetWriter, held: list[TP], waited_ms: float, source_ms: float) -> str:
    """The cause of a wait the task saw no cause for: records the task, free to read, read late
    were held on the source side (by a broker that left the source's cluster, where one holding
    a replica of ``held`` did); others, read at once, were acknowledged late."""
    if source_ms * 2 >= waited_ms:
        source = w.ctx.source
        why = w.source_lost(held) or f"a leader of {source} lost, or its producers retrying"
        return (
            f"source cluster {source} held them: the copy task, free to read, read them "
            f"{source_ms / 1000:.1f}s into the wait ({why})"
        )
    return "the target acknowledged late"
