"""A source and target cluster in memory for the slice planner: topics, bounds and the ledger
groups, so planning can be tested without brokers or Spark."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.copy import ledger as ledger_module
from mirror_lib.replication.copy.read_group import ReadGroup
from mirror_lib.replication.migration import mm2_takeover
from mirror_lib.replication.planning import slices
from mirror_lib.spark import source as source_module


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


def fake_clusters(monkeypatch: pytest.MonkeyPatch, clusters: Clusters) -> None:
    """Point the planner's lookups, ledger reads and event writes at ``clusters``."""

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

    def recorded(ctx: Any, topics: Any, *_x: Any) -> dict[str, str | None]:
        clusters.asked_recorded.append(set(topics))
        return {t: clusters.recorded[t] for t in topics if t in clusters.recorded}

    def ends(ctx: Any, positions: dict[TP, int], *_x: Any) -> dict[TP, int]:
        return {tp: clusters.ends[tp] for tp, pos in positions.items()
                if tp in clusters.ends and clusters.ends[tp] < pos}  # fmt: skip

    monkeypatch.setattr(source_module, "recorded_topic_ids", recorded)
    monkeypatch.setattr(source_module, "ends_before", ends)
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
    # no MirrorMaker 2 ran these flows (the take-over has tests of its own)
    monkeypatch.setattr(mm2_takeover, "boundaries", lambda *_a, **_k: {})


def planner(
    props: dict[str, str], name: str = "A->B", refused: dict[str, dict[str, Any]] | None = None
) -> slices.SlicePlanner:
    """A planner of flow (or fan-out group) ``name`` over the faked clusters (see
    :func:`fake_clusters`); ``refused[flow][remote topic]`` is what its target refused."""
    group = ReadGroup.create(parse_config(props), name)
    parts = source_module.KafkaPlanningParts(group.to_options())
    parts._group = group
    parts.admin = lambda ctx, side: _Admin(side, ctx.target)  # type: ignore[method-assign,assignment,return-value]
    syncers = {c.flow.name: _Syncer((refused or {}).get(c.flow.name, {})) for c in group.contexts}
    parts.syncer = lambda ctx: syncers[ctx.flow.name]  # type: ignore[method-assign,assignment,return-value]
    guards = {c.flow.name: _Guard() for c in group.contexts}
    parts.guard = lambda ctx: guards[ctx.flow.name]  # type: ignore[method-assign,assignment,return-value]
    return slices.SlicePlanner(parts, {})


def spark_reader(plan: slices.SlicePlanner) -> source_module.SliceReader:
    """Spark's stream reader over ``plan`` (its slots per slice), without a Spark session."""
    reader = source_module.SliceReader.__new__(source_module.SliceReader)
    reader.options, reader.planner = {}, plan
    return reader
