"""The replication data source: a planner that emits ``[start, end)`` offset ranges (D2).

Every micro-batch the planner lists the source topics the flow replicates (new topics and
partitions are picked up without restart), creates missing remote topics, checks for vanished
ranges (D10) and returns per-partition end offsets capped by the flow's records/bytes budget.
``partitions()`` groups the ranges by task slot; the sink (:mod:`mirror_lib.sink`) copies them.

Offsets (JSON, string keys): ``{"v": 1, "topics": {topic: {"id": id, "p": {"0": end}, "s":
{"0": start}}}}``; ``s`` holds the batch's start only for partitions first seen or moved past a gap
in that batch, so a replayed batch re-plans exactly the same ranges.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
)

from mirror_lib import events
from mirror_lib.budget import allocate
from mirror_lib.errors import DataLossError
from mirror_lib.flow import FlowContext, stable_slot
from mirror_lib.kafka_offsets import (
    batch_ranges,
    list_topic_partitions,
    partition_bounds,
    positions,
    topic_ids,
)

log = logging.getLogger(__name__)

SCHEMA = "topic string, partition int, start long, end long, slot int"


@dataclass
class SlotWork(InputPartition):
    """All ranges of one task slot in one batch: (topic, partition, start, end)."""

    slot: int
    ranges: list[tuple[str, int, int, int]]


class MirrorDataSource(DataSource):
    """``readStream.format("mirror")`` plans ranges; ``writeStream.format("mirror")`` copies."""

    @classmethod
    def name(cls) -> str:
        return "mirror"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return RangePlanner(dict(self.options))

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        from mirror_lib.sink import RangeCopier

        return RangeCopier(dict(self.options))


def _offsets(topics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"v": 1, "topics": topics}


class RangePlanner(DataSourceStreamReader):
    """Driver-side planner; one instance lives for a whole query run (platform.md §1.2)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self._ctx: FlowContext | None = None
        self._admins: dict[str, Any] = {}
        self._syncer: Any = None
        self._position: dict[str, Any] | None = None
        self._initial: dict[str, Any] | None = None
        self._last_refresh = {"configs": 0.0, "acls": 0.0, "partitions": 0.0}
        self._known_topics: set[str] = set()
        self._internal_ready = False

    @property
    def ctx(self) -> FlowContext:
        if self._ctx is None:
            self._ctx = FlowContext.from_options(self.options)
        return self._ctx

    def _admin(self, side: str) -> Any:
        if side not in self._admins:
            self._admins[side] = self.ctx.admin(side)
        return self._admins[side]

    def _topic_syncer(self) -> Any:
        if self._syncer is None:
            from mirror_lib.admin import KafkaAdminOps
            from mirror_lib.topic_sync import ConfigPropertyFilter, TopicSyncer

            s = self.ctx.settings
            self._syncer = TopicSyncer(
                KafkaAdminOps(self.ctx.client("source", "admin")),
                KafkaAdminOps(self.ctx.client("target", "admin")),
                self.ctx.should_replicate,
                self.ctx.remote_topic,
                config_filter=ConfigPropertyFilter(
                    s.config_properties_exclude, s.use_defaults_from
                ),
                replication_factor=s.replication_factor,
                sync_acls_enabled=s.sync_topic_acls,
            )
        return self._syncer

    # -- planning --------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        if self._initial is None:
            self._initial = self._plan(None, first=True)
        return self._initial

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict:
        if start is None:
            start = self._position or self.initialOffset()
        end = self._plan(start, first=False)
        return end

    def _plan(self, start: dict[str, Any] | None, *, first: bool) -> dict[str, Any]:
        ctx = self.ctx
        s = ctx.settings
        if not self._internal_ready:
            self._ensure_internal()
        counts = {
            t: n
            for t, n in list_topic_partitions(self._admin("source")).items()
            if ctx.should_replicate(t)
        }
        target_counts = self._ensure_remote(counts)
        ids = topic_ids(self._admin("source"), counts)
        tps = [(t, p) for t, n in counts.items() for p in range(n)]
        bounds = partition_bounds(self._admin("source"), tps)
        previous = (start or {}).get("topics", {})
        known = positions(start)
        begin: dict[tuple[str, int], int] = {}
        for (topic, p), (lo, hi) in bounds.items():
            if p >= target_counts.get(ctx.remote_topic(topic), 0):
                continue  # remote partition not there yet: plan it once it exists
            old = previous.get(topic)
            pos = known.get((topic, p))
            if old is not None and old.get("id") not in (None, ids.get(topic)):
                pos = self._gap(topic, p, pos, lo, hi, "topic was deleted and re-created")
            elif pos is None:
                latest = first and (s.starting_offsets or self._reset_policy()) == "latest"
                pos = hi if latest else lo
            elif pos < lo:
                pos = self._gap(topic, p, pos, lo, hi, "records were deleted (retention)")
            elif pos > hi:
                pos = self._gap(topic, p, pos, lo, hi, "partition was truncated or re-created")
            begin[(topic, p)] = pos
        moved = {tp for tp, b in begin.items() if known.get(tp) != b}
        ends = dict(begin)
        if not first:
            backlog = {tp: bounds[tp][1] - b for tp, b in begin.items()}
            grant = allocate(backlog, s.batch_max_records, s.batch_max_bytes)
            ends = {tp: b + grant.get(tp, 0) for tp, b in begin.items()}
        topics: dict[str, dict[str, Any]] = {}
        for (topic, p), end in sorted(ends.items()):
            entry = topics.setdefault(topic, {"id": ids.get(topic), "p": {}})
            entry["p"][str(p)] = end
            if (topic, p) in moved and not first:
                entry.setdefault("s", {})[str(p)] = begin[(topic, p)]
        for topic, entry in previous.items():
            if topic not in topics:  # vanished for now: remember it to detect a re-creation
                topics[topic] = {"id": entry.get("id"), "p": dict(entry["p"])}
        return _offsets(topics)

    def _reset_policy(self) -> str:
        consumer = self.ctx.config.cluster(self.ctx.source).consumer
        return consumer.get("auto.offset.reset", "earliest").strip().lower()

    def _gap(self, topic: str, p: int, pos: int | None, lo: int, hi: int, reason: str) -> int:
        ctx = self.ctx
        action = ctx.settings.on_gap
        event = events.gap_event(ctx, topic, p, pos, lo, hi, reason, action)
        events.publish(ctx, [event])
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

    def _ensure_internal(self) -> None:
        """Create the metrics and offset-syncs topics once per run (idempotent, as MM2 §2.3)."""
        from mirror_lib.admin import KafkaAdminOps, NewTopicSpec

        ctx = self.ctx
        s = ctx.settings
        target = KafkaAdminOps(ctx.client("target", "admin"))
        target.create_topics(
            [
                NewTopicSpec(
                    ctx.metrics_topic,
                    1,
                    s.offset_syncs_replication_factor,
                    {"cleanup.policy": "delete"},
                )
            ]
        )
        if s.emit_offset_syncs:
            side = "target" if ctx.offset_syncs_on_target else "source"
            admin = target if side == "target" else KafkaAdminOps(ctx.client(side, "admin"))
            admin.create_compacted_topic(ctx.offset_syncs_topic, s.offset_syncs_replication_factor)
        self._internal_ready = True

    def _ensure_remote(self, counts: dict[str, int]) -> dict[str, int]:
        """Create remote topics on first sight; grow partitions and sync configs/ACLs on refresh."""
        ctx = self.ctx
        s = ctx.settings
        syncer = self._topic_syncer()
        target = list_topic_partitions(self._admin("target"))
        missing = [t for t in counts if ctx.remote_topic(t) not in target]
        grow = [t for t, n in counts.items() if 0 < target.get(ctx.remote_topic(t), 0) < n]
        now = time.monotonic()
        if missing:
            syncer.create_missing(missing)
        if grow and (
            now - self._last_refresh["partitions"] >= s.refresh_topics_interval
            or set(grow) - self._known_topics
        ):
            syncer.sync_partitions()
            self._last_refresh["partitions"] = now
        self._known_topics = set(grow) | self._known_topics
        if s.sync_topic_configs and now - self._last_refresh["configs"] >= (
            s.sync_topic_configs_interval
        ):
            self._last_refresh["configs"] = now
            _best_effort(syncer.sync_configs, "topic config sync")
        if s.sync_topic_acls and now - self._last_refresh["acls"] >= s.sync_topic_acls_interval:
            self._last_refresh["acls"] = now
            _best_effort(syncer.sync_acls, "topic ACL sync")
        if missing or grow:
            target = list_topic_partitions(self._admin("target"))
        return {ctx.remote_topic(t): target.get(ctx.remote_topic(t), 0) for t in counts}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self._position = end
        slots: dict[int, list[tuple[str, int, int, int]]] = {}
        tasks = self.ctx.settings.tasks
        for topic, p, first, stop in batch_ranges(start, end):
            slots.setdefault(stable_slot(topic, p, tasks), []).append((topic, p, first, stop))
        return [SlotWork(slot, ranges) for slot, ranges in sorted(slots.items())]

    def read(self, partition: SlotWork) -> Iterator[tuple[str, int, int, int, int]]:
        for topic, p, first, stop in partition.ranges:
            yield (topic, p, first, stop, partition.slot)

    def commit(self, end: dict[str, Any]) -> None:
        self._position = end


def _best_effort(call: Any, what: str) -> None:
    from mirror_lib.errors import BrokerError

    try:
        call()
    except BrokerError as exc:
        log.warning("%s skipped: %s", what, exc)
