"""Fan-out: enabled flows from one source that set ``mirror.fanout.enabled`` share one read.

Each flow stays an MM2 flow ``A->B`` with its own settings, remote topics, offset syncs,
checkpoints, heartbeats and delivery ledger; only the reading is shared (one consumer per source
partition, one transactional producer per target). The flows of a group must agree on what
shapes the read: its task slots, slice length and trigger interval.
"""

from __future__ import annotations

from collections.abc import Iterable

from mirror_lib.config.model import FlowConfig
from mirror_lib.errors import ConfigError

ENABLED_KEY = "mirror.fanout.enabled"
#: Settings that shape the shared read: (key, attribute of FlowSettings).
SHARED = (
    ("tasks.max", "tasks"),
    ("mirror.slots.shared.below.records.per.second", "slots_shared_below"),
    ("mirror.batch.duration.seconds", "batch_duration"),
    ("mirror.trigger.interval.seconds", "trigger_interval"),
    ("refresh.topics.enabled", "refresh_topics"),  # the shared read looks for new topics or not
)


def group_name(flows: Iterable[FlowConfig]) -> str:
    """``A->B,C`` for a group of flows from A to B and C; ``A->B`` for one flow."""
    flows = list(flows)
    return f"{flows[0].source}->{','.join(f.target for f in flows)}"


def read_groups(flows: Iterable[FlowConfig]) -> list[tuple[FlowConfig, ...]]:
    """``flows`` grouped by shared read, in the order given: the enabled fan-out flows of one
    source form one group (at the position of the first), every other flow is a group alone."""
    groups: list[list[FlowConfig]] = []
    by_source: dict[str, list[FlowConfig]] = {}
    for flow in flows:
        if flow.enabled and flow.settings.fanout:
            if flow.source in by_source:
                by_source[flow.source].append(flow)
                continue
            by_source[flow.source] = [flow]
            groups.append(by_source[flow.source])
        else:
            groups.append([flow])
    for group in groups:
        check_group(group)
    return [tuple(g) for g in groups]


def check_group(flows: list[FlowConfig], origin: str | None = None) -> None:
    """Refuse a fan-out group whose flows disagree on a setting of the shared read."""
    first = flows[0]
    for flow in flows[1:]:
        for key, attr in SHARED:
            mine, theirs = getattr(flow.settings, attr), getattr(first.settings, attr)
            if mine != theirs:
                raise ConfigError(
                    f"{flow.name}.{key}",
                    str(mine),
                    f"{theirs}, as for {first.name}: flows from {first.source} with "
                    f"{ENABLED_KEY} = true share one read, and with it {key}",
                    origin,
                )
