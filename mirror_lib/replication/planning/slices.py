"""The slice planner (docs/design.md#d2-slices), without Spark: what each slice copies.

A micro-batch is a checkpoint interval, not a unit of latency: each batch is one *slice* in which
every task slot copies its partitions continuously for ``mirror.batch.duration.seconds``
(:mod:`mirror_lib.replication.copy.copier`). Between slices the planner lists the source topics
the flow replicates (new topics and partitions are picked up), creates missing remote topics,
reads where each partition stands from the delivery ledger
(:mod:`mirror_lib.replication.copy.ledger`, the truth about what was delivered), writes start
positions for partitions seen for the first time, and checks for vanished ranges.
:mod:`mirror_lib.spark.source` is the Spark data source over it.

Offsets (JSON, string keys): ``{"v": 2, "slice": n, "k": tasks.max, "t": copy tasks, "topics":
{topic: {"id": id, "n": count, "p": {"0": next upstream offset at planning}}}}``. ``p`` is where
the previous slice ended; a replayed slice simply continues from the ledger, in the slots of its
``k`` and the tasks of its ``t`` (:mod:`~mirror_lib.replication.planning.slot_tasks`). With the
``until`` option (``--once``) a slice copies only up to those offsets, and no new slice is planned
once the ledger reached them.

The planner's collaborators from the rooms above planning (the topic sync and write protection of
``companions/``, the ledger, the read group and the gap checks of ``copy/``, the MirrorMaker 2
take-over of ``migration/``) come in as :class:`PlanningParts`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from confluent_kafka.admin import AdminClient

from mirror_lib.errors import BrokerError, DataLossError, MirrorRuntimeError, RemoteTopicError
from mirror_lib.kafka.lookups import list_topic_partitions, partition_bounds, topic_ids
from mirror_lib.mm2.formats import TP
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.planning.slot_tasks import EARLY, task_count

log = logging.getLogger(__name__)

PROBE_S = 5.0  # a fan-out target that does not answer this fast is left out of the slice
RETENTION = "records were deleted (retention or DeleteRecords)"
RECREATED = "topic was deleted and re-created"
TRUNCATED = (
    "the partition ends at offset {end}, before the flow's position: it was truncated (an "
    "unclean leader election) or deleted and re-created"
)

#: A slice's plan: the offsets of the replication query (see the module's text).
Plan = dict[str, Any]


def parse_until(text: str | None) -> dict[TP, int]:
    """The ``until`` option: ``{"topic": {"0": end}}`` -> ``{(topic, 0): end}``."""
    if not text:
        return {}
    return {
        (t, int(p)): int(end) for t, parts in json.loads(text).items() for p, end in parts.items()
    }


def format_until(until: dict[TP, int]) -> str:
    """The ``until`` option for end offsets per partition (see :func:`parse_until`)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), end in sorted(until.items()):
        out.setdefault(topic, {})[str(p)] = end
    return json.dumps(out, sort_keys=True)


def plan_positions(plan: Plan | None) -> dict[TP, int]:
    """Next upstream offset per planned partition of a slice plan (``{}`` for none)."""
    return {
        (topic, int(p)): int(pos)
        for topic, entry in (plan or {}).get("topics", {}).items()
        for p, pos in entry.get("p", {}).items()
    }


def flows_short_of(per_flow: dict[str, dict[TP, int]], ends: dict[TP, int]) -> list[str]:
    """The flows (of a fan-out group) with a partition short of its end in ``ends``, in
    ``per_flow``'s order; a partition missing from either side does not count."""
    return [
        flow
        for flow, positions in per_flow.items()
        if any(pos < ends.get(tp, -1) for tp, pos in positions.items())
    ]


class TopicSync(Protocol):
    """A flow's topic sync (:class:`~mirror_lib.replication.companions.topic_sync.TopicSyncer`)."""

    refused: dict[str, BrokerError]  # remote topic -> what the target refused

    def create_missing(self, topics: list[str]) -> object: ...
    def sync_partitions(self) -> object: ...
    def sync_configs(self) -> object: ...
    def sync_acls(self) -> object: ...


class TopicGuard(Protocol):
    """A flow's write protection of its remote topics
    (:class:`~mirror_lib.replication.companions.protection.RemoteTopicGuard`)."""

    def refresh(self, topics: list[str]) -> object: ...


class LedgerPositions(Protocol):
    """A flow's delivery ledger (:class:`~mirror_lib.replication.copy.ledger.LedgerView`)."""

    def carried_positions(
        self, partitions: list[TP], last_tasks: int | None
    ) -> tuple[dict[TP, int], dict[TP, int]]: ...
    def former_positions(self, partitions: Iterable[TP]) -> dict[TP, int]: ...
    def commit(self, starts: dict[TP, int]) -> None: ...


class FlowGroup(Protocol):
    """The flows a query serves (:class:`~mirror_lib.replication.copy.read_group.ReadGroup`)."""

    @property
    def contexts(self) -> tuple[FlowContext, ...]: ...
    @property
    def lead(self) -> FlowContext: ...
    @property
    def fanout(self) -> bool: ...
    def should_replicate(self, topic: str) -> bool: ...


class PlanningParts(Protocol):
    """The planner's collaborators, one set per query run (each method: for flow ``ctx``)."""

    @property
    def group(self) -> FlowGroup: ...
    def admin(self, ctx: FlowContext, side: str) -> AdminClient: ...
    def syncer(self, ctx: FlowContext) -> TopicSync: ...
    def guard(self, ctx: FlowContext) -> TopicGuard: ...
    def ledger(self, ctx: FlowContext) -> LedgerPositions: ...
    def gap(
        self, ctx: FlowContext, topic: str, p: int, pos: int | None, lo: int, hi: int, reason: str
    ) -> int:
        """The position after a gap: its event is published, then it fails or is skipped."""
        ...

    def lost_entry(
        self, ctx: FlowContext, topic: str, p: int, planned: int | None
    ) -> int | None: ...
    def recorded_topic_ids(
        self, ctx: FlowContext, topics: set[str]
    ) -> Mapping[str, str | None]: ...
    def ends_before(
        self, ctx: FlowContext, positions: dict[TP, int], bounds: dict[TP, tuple[int, int]]
    ) -> dict[TP, int]: ...
    def after_mm2(
        self, ctx: FlowContext, fresh: list[TP], earliest: dict[TP, int]
    ) -> dict[TP, int]:
        """Where each of ``fresh`` continues after MirrorMaker 2 (those it replicated)."""
        ...

    def refusal_error(
        self, ctx: FlowContext, counts: dict[str, int], target_counts: dict[str, int]
    ) -> RemoteTopicError | None: ...
    def fence(self, ctx: FlowContext, slots: range) -> None:
        """Fence the copy tasks' producers of ``slots`` (exactly once; a BrokerError if not)."""
        ...


class SlicePlanner:
    """Plans a query's slices; one instance lives for a whole query run
    (docs/how-it-works.md#which-spark-process-runs-what).

    It plans for a flow ``A->B`` or a fan-out group ``A->B,C``: each target gets its remote
    topics, internal topics and ledger start positions; in a group, a target that does not
    answer, or that fails for good (it refused a remote topic or the credentials, or its ledger
    is behind a gap), is left out of the slice (and tried again for the next) while the others
    go on.
    """

    def __init__(self, parts: PlanningParts, until: dict[TP, int]) -> None:
        self.parts = parts
        self.until = until
        self.position: Plan | None = None  # the last plan Spark handed back
        self._initial: Plan | None = None
        self._last_refresh: dict[str, dict[str, float]] = {}
        self._known_topics: dict[str, set[str]] = {}
        self._fixed_counts: dict[str, int] | None = None  # refresh.topics.enabled = false
        self._internal_ready: set[str] = set()
        # fan-out targets that failed for good (a remote topic or the credentials refused, a gap
        # with on.gap=fail): left out of the slice, as MM2 fails only their task; --once fails
        # once the others are done
        self._failed: dict[str, MirrorRuntimeError] = {}
        self._last: tuple[float, dict[TP, int]] | None = None  # the last plan: when, positions

    @property
    def ctx(self) -> FlowContext:
        """The leading flow: the source side and names."""
        return self.parts.group.lead

    def initial_offset(self) -> Plan:
        if self._initial is None:
            self._initial = self.plan(None, first=True)
        return self._initial

    def latest_offset(self, start: Plan | None = None) -> Plan:
        """The next slice's plan after ``start`` (``start`` itself: no new slice)."""
        fresh = start is None and self.position is None and self._initial is None
        if start is None:
            start = self.position or self.initial_offset()
        # on a new query Spark asks for the latest offset right before the initial one: plan once
        plan = dict(start) if fresh else self.plan(start, first=False)
        work = [
            tp
            for tp, pos in plan_positions(plan).items()
            if not self.until or pos < self.until.get(tp, -1)
        ]
        if not work and self.until and self._failed:
            raise next(iter(self._failed.values()))  # the other targets reached the snapshot
        if not work and (self.until or plan["topics"].keys() == start.get("topics", {}).keys()):
            return start  # nothing to copy: no new slice
        plan["slice"] = int(start.get("slice", 0)) + 1
        return plan

    def plan(self, start: Plan | None, *, first: bool) -> Plan:
        """Where every planned partition continues after ``start`` (None: the query's first)."""
        group = self.parts.group
        source = self.parts.admin(self.ctx, "source")
        counts = {
            t: n for t, n in list_topic_partitions(source).items() if group.should_replicate(t)
        }
        if not self.ctx.settings.refresh_topics:  # as MM2: what was there at start, until restart
            if self._fixed_counts is None:  # an empty first listing is kept too
                self._fixed_counts = dict(counts)
            counts = {t: min(n, self._fixed_counts[t]) for t, n in counts.items()
                      if t in self._fixed_counts}  # fmt: skip
        ids = topic_ids(source, counts)
        bounds = partition_bounds(source, [(t, p) for t, n in counts.items() for p in range(n)])
        previous = (start or {}).get("topics", {})
        per_flow: dict[str, dict[TP, int]] = {}
        waiting: set[str] = set()  # left out for now: their work is unknown, so counted as busy
        self._failed = {}
        for ctx in group.contexts:
            try:
                if group.fanout:
                    list_topic_partitions(self.parts.admin(ctx, "target"), PROBE_S)
                per_flow[ctx.flow.name] = self._plan_flow(
                    ctx, counts, ids, bounds, start or {}, first
                )
            except (BrokerError, RemoteTopicError, DataLossError) as exc:
                if not group.fanout:
                    raise
                if isinstance(exc, BrokerError) and exc.transient:
                    log.warning("%s is left out of this slice: %s", ctx.label, exc)
                    waiting.add(ctx.flow.name)
                else:
                    self._failed[ctx.flow.name] = exc
                    log.error("%s is left out of this slice, the others go on: %s", ctx.label, exc)
                    events.left_out(ctx, exc)
        if len(self._failed) == len(group.contexts):
            raise next(iter(self._failed.values()))
        tasks = self._tasks(start, per_flow, bounds)
        last_tasks = int((start or {}).get("t") or (start or {}).get("k") or 0)
        if any(per_flow.values()) and (first or tasks != last_tasks):
            self._fence(per_flow, waiting)
        topics: dict[str, dict[str, Any]] = {}
        for flow, positions in per_flow.items():
            for (topic, p), pos in sorted(positions.items()):
                entry = topics.setdefault(
                    topic, {"id": ids.get(topic), "n": 0, "c": counts[topic], "p": {}}
                )
                entry["n"] = max(entry["n"], p + 1)
                old = entry["p"].get(str(p))
                entry["p"][str(p)] = pos if old is None else min(old, pos)
                if group.fanout:
                    entry.setdefault("f", {}).setdefault(flow, []).append(p)
        for topic, entry in previous.items():
            if topic not in topics:  # vanished for now: remember it to detect a re-creation
                topics[topic] = {"id": entry.get("id"), "n": 0, "p": {}}
        plan: Plan = {
            "v": 2,
            "slice": int((start or {}).get("slice", 0)),
            "k": self.ctx.settings.tasks,
            "t": tasks,
            "topics": dict(sorted(topics.items())),
        }
        if group.fanout and self.until:  # lets a slot raise a failed target's error (SlotWork)
            plan["busy"] = sorted({*flows_short_of(per_flow, self.until), *waiting})
        return plan

    def _tasks(
        self,
        start: Plan | None,
        per_flow: dict[str, dict[TP, int]],
        bounds: dict[TP, tuple[int, int]],
    ) -> int:
        """The copy tasks of the slice: one for slots that share it while the flow is quiet
        (:func:`~mirror_lib.replication.planning.slot_tasks.task_count`)."""
        s = self.ctx.settings
        positions: dict[TP, int] = {}
        for flow_positions in per_flow.values():
            for tp, pos in flow_positions.items():
                positions[tp] = min(pos, positions.get(tp, pos))
        backlog = sum(max(bounds[tp][1] - pos, 0) for tp, pos in positions.items())
        now, rate, ended_early = time.monotonic(), None, False
        if self._last is not None and start is not None:
            then, before = self._last
            took = max(now - then, 1e-3)
            copied = sum(max(pos - before[tp], 0) for tp, pos in positions.items() if tp in before)
            rate = copied / took
            shared = int(start.get("t") or s.tasks) < s.tasks
            ended_early = shared and took < EARLY * s.batch_duration
        self._last = (now, positions)
        return task_count(
            s.tasks, s.slots_shared_below, backlog=backlog, rate=rate, ended_early=ended_early,
            once=bool(self.until),
        )  # fmt: skip

    def _fence(self, per_flow: dict[str, dict[TP, int]], waiting: set[str]) -> None:
        """Before a slice whose tasks differ from the last one's (or a query's first): fence
        every slot's producer, so that no copy task of another layout still copies a
        partition this slice gives to another task (docs/design.md#d3-exactly-once). In a
        fan-out group a target that cannot be fenced is left out of the slice."""
        for ctx in self.parts.group.contexts:
            if ctx.flow.name not in per_flow:
                continue
            try:
                self.parts.fence(ctx, range(ctx.settings.tasks))
            except BrokerError as exc:
                if not self.parts.group.fanout:
                    raise
                log.warning("%s is left out of this slice: %s", ctx.label, exc)
                del per_flow[ctx.flow.name]
                waiting.add(ctx.flow.name)

    def _plan_flow(
        self,
        ctx: FlowContext,
        counts: dict[str, int],
        ids: dict[str, str],
        bounds: dict[TP, tuple[int, int]],
        last: Plan,
        first: bool,
    ) -> dict[TP, int]:
        """Where each partition of one flow continues after the ``last`` plan; writes first
        start positions, and positions carried to a new slot."""
        parts = self.parts
        if ctx.flow.name not in self._internal_ready:
            self._ensure_internal(ctx)
        mine = {t: n for t, n in counts.items() if ctx.should_replicate(t)}
        ctx.refuse_loops(mine)  # a topic that would come back (both ways keep names)
        target_counts = self._ensure_remote(ctx, mine)
        refused = parts.refusal_error(ctx, mine, target_counts)
        if refused is not None:
            raise refused
        # a remote partition that is not there yet is planned once it exists
        tps = [
            (t, p)
            for t, n in mine.items()
            for p in range(min(n, target_counts.get(ctx.remote_topic(t), 0)))
        ]
        ledger = parts.ledger(ctx)
        previous = last.get("topics", {})
        delivered, starts = ledger.carried_positions(tps, last.get("k"))
        missing = [tp for tp in tps if tp not in delivered]
        former = ledger.former_positions(missing) if missing else {}
        # a partition MirrorMaker 2 replicated before us: continue after its last record
        fresh = [tp for tp in missing if tp not in former]
        earliest = {tp: bounds[tp][0] for tp in fresh}
        after_mm2 = parts.after_mm2(ctx, fresh, earliest) if fresh else {}
        # a new checkpoint: which topic ids the ledger's positions were copied from
        unplanned = {t for (t, p), pos in delivered.items() if t not in previous
                     and pos > bounds[(t, p)][0]}  # fmt: skip
        recorded = parts.recorded_topic_ids(ctx, unplanned) if unplanned else {}
        pos_of: dict[TP, int] = {}
        for topic, p in tps:
            lo, hi = bounds[(topic, p)]
            pos = delivered.get((topic, p))
            old = previous.get(topic)
            known = recorded.get(topic) if old is None else old.get("id")
            same = known in (None, ids.get(topic))
            if pos is not None and not same:
                pos = starts[(topic, p)] = parts.gap(ctx, topic, p, pos, lo, hi, RECREATED)
            elif pos is None:
                planned = old["p"].get(str(p)) if old is not None and same else None
                pos = parts.lost_entry(ctx, topic, p, planned)
                if pos is None:
                    pos = former.get((topic, p))
                if pos is None and (topic, p) in after_mm2:
                    pos = after_mm2[(topic, p)]
                if pos is None:
                    latest = first and ctx.starting_offsets == "latest"
                    pos = hi if latest else lo
                starts[(topic, p)] = pos
            elif pos < lo:
                pos = starts[(topic, p)] = parts.gap(ctx, topic, p, pos, lo, hi, RETENTION)
            pos_of[(topic, p)] = pos
        beyond = {tp: pos for tp, pos in pos_of.items() if pos > bounds[tp][1]}
        for (topic, p), end in parts.ends_before(ctx, beyond, bounds).items():
            pos_of[(topic, p)] = starts[(topic, p)] = parts.gap(
                ctx, topic, p, beyond[(topic, p)], bounds[(topic, p)][0], end,
                TRUNCATED.format(end=end),
            )  # fmt: skip
        if starts:
            ledger.commit(starts)
        return pos_of

    def _ensure_internal(self, ctx: FlowContext) -> None:
        """Create the metrics and offset-syncs topics once per run (idempotent, as MM2 does)."""
        events.ensure_internal_topics(ctx)
        self._internal_ready.add(ctx.flow.name)

    def _ensure_remote(self, ctx: FlowContext, counts: dict[str, int]) -> dict[str, int]:
        """Create remote topics on first sight; grow partitions, sync configs/ACLs and
        write-protect the remote topics on refresh."""
        s = ctx.settings
        syncer = self.parts.syncer(ctx)
        # never yet: due at once (time.monotonic() counts from boot, so 0 may be recent)
        never = float("-inf")
        last = self._last_refresh.setdefault(
            ctx.flow.name, {"configs": never, "acls": never, "partitions": never, "protect": never}
        )
        known = self._known_topics.setdefault(ctx.flow.name, set())
        target = list_topic_partitions(self.parts.admin(ctx, "target"))
        missing = [t for t in counts if ctx.remote_topic(t) not in target]
        grow = [t for t, n in counts.items() if 0 < target.get(ctx.remote_topic(t), 0) < n]
        now = time.monotonic()
        if missing:
            syncer.create_missing(missing)
        if grow and (now - last["partitions"] >= s.refresh_topics_interval or set(grow) - known):
            syncer.sync_partitions()
            last["partitions"] = now
        known.update(grow)
        if s.sync_topic_configs and now - last["configs"] >= s.sync_topic_configs_interval:
            last["configs"] = now
            _best_effort(syncer.sync_configs, "topic config sync")
        if s.sync_topic_acls and now - last["acls"] >= s.sync_topic_acls_interval:
            last["acls"] = now
            _best_effort(syncer.sync_acls, "topic ACL sync")
        if missing or grow:
            target = list_topic_partitions(self.parts.admin(ctx, "target"))
        remote = {ctx.remote_topic(t): target.get(ctx.remote_topic(t), 0) for t in counts}
        if s.protect_remote_topics and (
            missing or now - last["protect"] >= s.sync_topic_acls_interval
        ):
            last["protect"] = now
            existing = [r for r, n in remote.items() if n > 0]
            _best_effort(lambda: self.parts.guard(ctx).refresh(existing), "remote topic protection")
        return remote


def _best_effort(call: Callable[[], object], what: str) -> None:
    try:
        call()
    except BrokerError as exc:
        log.warning("%s skipped: %s", what, exc)
