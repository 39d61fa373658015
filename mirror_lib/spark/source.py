"""The replication data source: Spark's side of the slice planner
(:mod:`mirror_lib.replication.planning.slices`, docs/design.md#d2-slices).

``readStream.format("mirror")`` plans a slice per micro-batch on the driver and hands each task
slot its partitions (:class:`~mirror_lib.spark.slot_work.SlotWork`); each task copies its slot's
slice inside the source's own ``read()`` (:mod:`mirror_lib.spark.copy_task`). The planner's Kafka
collaborators are wired here (:class:`KafkaPlanningParts`), from the data source options.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import cast

from confluent_kafka.admin import AdminClient
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from mirror_lib.errors import RemoteTopicError
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.companions.protection import RemoteTopicGuard
from mirror_lib.replication.companions.topic_sync import (
    ConfigPropertyFilter,
    TopicSyncer,
    refusal_error,
)
from mirror_lib.replication.context import FlowContext, stable_slot
from mirror_lib.replication.copy.ledger import LedgerView
from mirror_lib.replication.copy.read_group import ReadGroup
from mirror_lib.replication.copy.source_gaps import (
    GapPolicy,
    ends_before,
    lost_entry,
    recorded_topic_ids,
)
from mirror_lib.replication.copy.target_producer import fence_slots
from mirror_lib.replication.migration import mm2_takeover
from mirror_lib.replication.planning.slices import (
    Plan,
    SlicePlanner,
    parse_until,
    plan_positions,
)
from mirror_lib.replication.planning.slot_tasks import task_slots
from mirror_lib.spark.copy_task import copy_slot, summary_batch
from mirror_lib.spark.slot_work import SlotWork

__all__ = [
    "SCHEMA",
    "KafkaPlanningParts",
    "MirrorDataSource",
    "SliceReader",
]

log = logging.getLogger(__name__)

SCHEMA = "slot int, records long, transactions long"
FENCE_S = 30.0  # init_transactions of a slot's producer, fenced between slices


class MirrorDataSource(DataSource):
    """``readStream.format("mirror")``: the driver plans slices, each task copies one slot's
    (:mod:`mirror_lib.spark.copy_task`); one row per task says what it copied."""

    @classmethod
    def name(cls) -> str:
        return "mirror"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SliceReader(dict(self.options))


class KafkaPlanningParts:
    """The slice planner's collaborators on the clusters of the data source options, each made
    once per flow (or cluster) and kept for the query run."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self._group: ReadGroup | None = None
        self._admins: dict[str, AdminClient] = {}
        self._syncers: dict[str, TopicSyncer] = {}
        self._guards: dict[str, RemoteTopicGuard] = {}
        self._ledgers: dict[str, LedgerView] = {}
        self._gaps = GapPolicy()

    @property
    def group(self) -> ReadGroup:
        if self._group is None:
            self._group = ReadGroup.from_options(self.options)
        return self._group

    def admin(self, ctx: FlowContext, side: str) -> AdminClient:
        alias = ctx.source if side == "source" else ctx.target
        if alias not in self._admins:
            self._admins[alias] = ctx.admin(side)
        return self._admins[alias]

    def syncer(self, ctx: FlowContext) -> TopicSyncer:
        name = ctx.flow.name
        if name not in self._syncers:
            s = ctx.settings
            self._syncers[name] = TopicSyncer(
                ctx.admin_ops("source"),
                ctx.admin_ops("target"),
                ctx.should_replicate,
                ctx.remote_topic,
                config_filter=ConfigPropertyFilter(
                    s.config_properties_exclude, s.use_defaults_from
                ),
                replication_factor=s.replication_factor,
                sync_acls_enabled=s.sync_topic_acls,
            )
        return self._syncers[name]

    def guard(self, ctx: FlowContext) -> RemoteTopicGuard:
        name = ctx.flow.name
        if name not in self._guards:
            self._guards[name] = RemoteTopicGuard.for_flow(ctx, self.syncer(ctx).target)
        return self._guards[name]

    def ledger(self, ctx: FlowContext) -> LedgerView:
        name = ctx.flow.name
        if name not in self._ledgers:
            self._ledgers[name] = LedgerView(ctx)
        return self._ledgers[name]

    def gap(
        self, ctx: FlowContext, topic: str, p: int, pos: int | None, lo: int, hi: int, reason: str
    ) -> int:
        return self._gaps.handle(ctx, topic, p, pos, lo, hi, reason)

    def lost_entry(self, ctx: FlowContext, topic: str, p: int, planned: int | None) -> int | None:
        return lost_entry(ctx, topic, p, planned)

    def recorded_topic_ids(self, ctx: FlowContext, topics: set[str]) -> Mapping[str, str | None]:
        return recorded_topic_ids(ctx, topics)

    def ends_before(
        self, ctx: FlowContext, positions: dict[TP, int], bounds: dict[TP, tuple[int, int]]
    ) -> dict[TP, int]:
        return ends_before(ctx, positions, bounds)

    def after_mm2(
        self, ctx: FlowContext, fresh: list[TP], earliest: dict[TP, int]
    ) -> dict[TP, int]:
        found = mm2_takeover.boundaries(ctx, fresh, earliest)
        return {tp: boundary.next_offset for tp, boundary in found.items()}

    def refusal_error(
        self, ctx: FlowContext, counts: dict[str, int], target_counts: dict[str, int]
    ) -> RemoteTopicError | None:
        return refusal_error(
            ctx.label, ctx.where("target"), counts, target_counts, ctx.remote_topic,
            self.syncer(ctx).refused,
        )  # fmt: skip

    def fence(self, ctx: FlowContext, slots: range) -> None:
        if ctx.settings.exactly_once:
            failed = fence_slots(ctx, slots, FENCE_S)
            if failed:
                raise failed[min(failed)]


class SliceReader(DataSourceStreamReader):
    """Driver-side: Spark's stream reader over one :class:`SlicePlanner` for a whole query run
    (docs/how-it-works.md#which-spark-process-runs-what); its ``read()`` runs in the tasks."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.planner = SlicePlanner(KafkaPlanningParts(options), parse_until(options.get("until")))

    def initialOffset(self) -> Plan:
        return self.planner.initial_offset()

    def latestOffset(self, start: Plan | None = None, limit: object = None) -> Plan:
        return self.planner.latest_offset(start)

    def partitions(self, start: Plan, end: Plan) -> Sequence[InputPartition]:
        self.planner.position = end
        if end.get("slice") == start.get("slice") and end.get("v") == start.get("v"):
            return []
        until = self.planner.until
        # a replayed slice keeps the slots and tasks it was planned with: the ledger groups it
        # wrote, the producers that wrote them
        slots = int(end.get("k") or self.planner.ctx.settings.tasks)
        task_of = {s: shared[0] for shared in task_slots(slots, int(end.get("t") or slots))
                   for s in shared}  # fmt: skip
        counts = {t: int(e["c"]) for t, e in end.get("topics", {}).items() if "c" in e}
        # planned topics only: a vanished one is remembered with its id but not read
        ids = {t: e["id"] for t, e in end.get("topics", {}).items() if e.get("id") and "c" in e}
        tasks: dict[int, SlotWork] = {}
        for (topic, p), pos in sorted(plan_positions(end).items()):
            stop = until.get((topic, p))
            if until and (stop is None or pos >= stop):
                continue
            own = stable_slot(topic, p, slots)
            slot = task_of[own]
            work = tasks.setdefault(
                slot, SlotWork(slot, [], [], counts, int(end["slice"]), ids, busy=end.get("busy"))
            )
            if own != slot and own not in work.shared:
                work.shared.append(own)
                work.slots = slots
            work.partitions.append((topic, p))
            for flow, parts in end["topics"][topic].get("f", {}).items():
                if p in parts:
                    work.targets.setdefault(flow, []).append((topic, p))
            if stop is not None:
                work.until.append((topic, p, stop))
        return [tasks[slot] for slot in sorted(tasks)]

    def read(self, partition: InputPartition) -> Iterator[object]:
        work = cast(SlotWork, partition)  # what partitions() plans (see RecordsReader.read)
        yield summary_batch(work.slot, copy_slot(self.options, work))

    def commit(self, end: Plan) -> None:
        self.planner.position = end
