"""A source and target cluster in memory for the slice planner
(:mod:`mirror_lib.replication.planning.slices`): topics, bounds and the ledger groups, so
planning can be tested without brokers or Spark."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError, RemoteTopicError
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.companions.topic_sync import refusal_error
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy import ledger as ledger_module
from mirror_lib.replication.copy.ledger import LedgerView
from mirror_lib.replication.copy.read_group import ReadGroup
from mirror_lib.replication.copy.source_gaps import GapPolicy, lost_entry
from mirror_lib.replication.planning import slices

if TYPE_CHECKING:
    from mirror_lib.spark.source import SliceReader


@dataclass
class Clusters:
    """What the planner sees; ``groups[group][(remote topic, partition)]`` is a ledger entry."""

    topics: dict[str, int] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    bounds: dict[TP, tuple[int, int]] = field(default_factory=dict)
    groups: dict[str, dict[TP, int]] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    #: remote topics of a target alias that differ from the source's counts
    short: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the topic ids the flow's newest ``segments`` events name (the metrics topic)
    recorded: dict[str, str | None] = field(default_factory=dict)
    #: what the planner asked the metrics topic and the source's end probe, in order
    asked_recorded: list[set[str]] = field(default_factory=list)
    #: where a partition really ends when its position is past the listed end (the probe)
    ends: dict[TP, int] = field(default_factory=dict)
    #: the slots the planner fenced, in order: (flow, number of slots)
    fenced: list[tuple[str, int]] = field(default_factory=list)
    #: flows whose target refuses the fence (it does not answer)
    unfenceable: set[str] = field(default_factory=set)

    def remote_counts(self, alias: str = "B") -> dict[str, int]:
        return {f"A.{t}": n for t, n in self.topics.items()} | self.short.get(alias, {})


class _Admin:
    def __init__(self, side: str, alias: str) -> None:
        self.side, self.alias = side, alias


class _LedgerConsumer:
    def __init__(self, clusters: Clusters, group: str) -> None:
        self.clusters, self.group = clusters, group

    def committed(self, tps: list[Any], timeout: float = 0) -> list[Any]:
        entries = self.clusters.groups.get(self.group, {})
        for tp in tps:
            tp.offset = entries.get((tp.topic, tp.partition), -1001)
        return tps

    def commit(self, offsets: list[Any], asynchronous: bool = False) -> None:
        entries = self.clusters.groups.setdefault(self.group, {})
        for tp in offsets:
            entries[(tp.topic, tp.partition)] = tp.offset

    def close(self) -> None:
        pass


class _Syncer:
    def __init__(self, refused: dict[str, Any]) -> None:
        self.refused = refused  # what the target refused, by remote topic

    def create_missing(self, topics: list[str]) -> None:
        pass

    def sync_partitions(self) -> None:
        pass

    def sync_configs(self) -> None:
        pass

    def sync_acls(self) -> None:
        pass


class _Guard:
    """The remote topics' write protection: records the topics of each refresh."""

    def __init__(self) -> None:
        self.refreshed: list[list[str]] = []

    def refresh(self, topics: list[str]) -> list[Any]:
        self.refreshed.append(sorted(topics))
        return []


_CURRENT: Clusters | None = None  # the clusters fake_clusters set up for the running test


def fake_clusters(monkeypatch: pytest.MonkeyPatch, clusters: Clusters) -> None:
    """Point the planners made by :func:`planner` (their listings, look-ups, ledger reads and
    event writes) at ``clusters``."""

    def listing(admin: _Admin, timeout_s: float = 30) -> dict[str, int]:
        if admin.side == "source":
            return dict(clusters.topics)
        return clusters.remote_counts(admin.alias)

    def former(view: Any, partitions: Any, timeout_s: float = 30) -> dict[TP, int]:
        wanted = {(view.ctx.remote_topic(t), p): (t, p) for t, p in partitions}
        out: dict[TP, int] = {}
        for entries in clusters.groups.values():
            for rtp, offset in entries.items():
                if rtp in wanted:
                    out[wanted[rtp]] = max(offset, out.get(wanted[rtp], -1))
        return out

    monkeypatch.setattr(slices, "list_topic_partitions", listing)
    ids = lambda _a, topics, *_x: {t: clusters.ids[t] for t in topics}  # noqa: E731
    bounds = lambda _a, tps, *_x: {tp: clusters.bounds[tp] for tp in tps}  # noqa: E731
    monkeypatch.setattr(slices, "topic_ids", ids)
    monkeypatch.setattr(slices, "partition_bounds", bounds)
    monkeypatch.setattr(
        ledger_module,
        "ledger_consumer",
        lambda ctx, slot, stable=True: _LedgerConsumer(clusters, ctx.ledger_group(slot)),
    )
    monkeypatch.setattr(ledger_module.LedgerView, "former_positions", former)
    monkeypatch.setattr(
        slices.events, "publish", lambda ctx, evs, *a, **k: clusters.events.extend(evs)
    )
    monkeypatch.setattr(slices.events, "ensure_internal_topics", lambda ctx: None)
    monkeypatch.setattr(slices.events, "_told_left_out", set())
    monkeypatch.setattr(sys.modules[__name__], "_CURRENT", clusters)


class FakeParts:
    """The planner's collaborators (:class:`~mirror_lib.replication.planning.slices.PlanningParts`)
    over ``clusters``: the real ledger view (over faked consumers), gap policy, lost-entry rule
    and refusal check; faked admins, topic sync, write protection, metrics topic and source
    probe; no MirrorMaker 2 ran these flows (the take-over has tests of its own)."""

    def __init__(
        self, clusters: Clusters, group: ReadGroup, refused: dict[str, dict[str, Any]]
    ) -> None:
        self.clusters, self.group = clusters, group
        self.syncers = {c.flow.name: _Syncer(refused.get(c.flow.name, {})) for c in group}
        self.guards = {c.flow.name: _Guard() for c in group}
        self.ledgers = {c.flow.name: LedgerView(c) for c in group}
        self.gaps = GapPolicy()

    def admin(self, ctx: FlowContext, side: str) -> Any:
        return _Admin(side, ctx.target)

    def syncer(self, ctx: FlowContext) -> Any:
        return self.syncers[ctx.flow.name]

    def guard(self, ctx: FlowContext) -> _Guard:
        return self.guards[ctx.flow.name]

    def ledger(self, ctx: FlowContext) -> LedgerView:
        return self.ledgers[ctx.flow.name]

    def gap(
        self, ctx: FlowContext, topic: str, p: int, pos: int | None, lo: int, hi: int, reason: str
    ) -> int:
        return self.gaps.handle(ctx, topic, p, pos, lo, hi, reason)

    def lost_entry(self, ctx: FlowContext, topic: str, p: int, planned: int | None) -> int | None:
        return lost_entry(ctx, topic, p, planned)

    def recorded_topic_ids(self, ctx: FlowContext, topics: set[str]) -> dict[str, str | None]:
        self.clusters.asked_recorded.append(set(topics))
        return {t: self.clusters.recorded[t] for t in topics if t in self.clusters.recorded}

    def ends_before(
        self, ctx: FlowContext, positions: dict[TP, int], bounds: dict[TP, tuple[int, int]]
    ) -> dict[TP, int]:
        ends = self.clusters.ends
        return {tp: ends[tp] for tp, pos in positions.items() if tp in ends and ends[tp] < pos}

    def after_mm2(
        self, ctx: FlowContext, fresh: list[TP], earliest: dict[TP, int]
    ) -> dict[TP, int]:
        return {}

    def fence(self, ctx: FlowContext, slots: range) -> None:
        if ctx.flow.name in self.clusters.unfenceable:
            raise BrokerError(f"fencing on {ctx.where('target')} failed: timed out", transient=True)
        self.clusters.fenced.append((ctx.flow.name, len(slots)))

    def refusal_error(
        self, ctx: FlowContext, counts: dict[str, int], target_counts: dict[str, int]
    ) -> RemoteTopicError | None:
        return refusal_error(
            ctx.label, ctx.where("target"), counts, target_counts, ctx.remote_topic,
            self.syncers[ctx.flow.name].refused,
        )  # fmt: skip


def planner(
    props: dict[str, str], name: str = "A->B", refused: dict[str, dict[str, Any]] | None = None
) -> slices.SlicePlanner:
    """A planner of flow (or fan-out group) ``name`` over the clusters of
    :func:`fake_clusters`; ``refused[flow][remote topic]`` is what its target refused."""
    assert _CURRENT is not None, "fake_clusters first"
    group = ReadGroup.create(parse_config(props), name)
    return slices.SlicePlanner(FakeParts(_CURRENT, group, refused or {}), {})


def spark_reader(plan: slices.SlicePlanner) -> SliceReader:
    """Spark's stream reader over ``plan`` (its slots per slice), without a Spark session."""
    from mirror_lib.spark.source import SliceReader  # lazy: pyspark, for the adapter's tests

    reader = SliceReader.__new__(SliceReader)
    reader.options, reader.planner = {}, plan
    return reader
