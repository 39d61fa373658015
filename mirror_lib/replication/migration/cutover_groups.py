"""Consumer groups in a cutover: translate A's committed offsets exactly, commit them on B.

Stricter than the periodic group sync: a group still active on A is refused (its offsets would
move after the cutover), as is one with members on B; an offset B already has at or past the
translated one is kept, never rewound.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror_lib.kafka.admin import admin_client, future_result
from mirror_lib.kafka.lookups import wait_futures
from mirror_lib.mm2.formats import TP
from mirror_lib.offsets.checkpoints import KEPT, is_idle_group, moves_forward
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.segment_view import SegmentView


@dataclass
class GroupMove:
    """One partition of one group: offset on A, the translated one on B, what happens."""

    group: str
    topic: str
    remote_topic: str
    partition: int
    source_offset: int
    offset: int
    current: int | None
    action: str  # would commit | committed | kept (...) | refused: ...


def _describe(admin: AdminClient, group: str) -> tuple[str | None, int]:
    (desc,) = wait_futures(admin.describe_consumer_groups([group]), f"describing {group}").values()
    return (desc.state.name if desc.state is not None else None), len(desc.members)


def _offsets(admin: AdminClient, group: str) -> dict[TP, int]:
    request = [ConsumerGroupTopicPartitions(group)]
    (res,) = wait_futures(admin.list_consumer_group_offsets(request), f"{group} offsets").values()
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def source_groups(ctx: FlowContext, admin: AdminClient, groups: Iterable[str] | None) -> list[str]:
    """The given groups, or every group on A the flow's group filter accepts."""
    if groups:
        return sorted(set(groups))
    listing = future_result(
        admin.list_consumer_groups(request_timeout=30), "listing consumer groups", 35
    )
    return sorted(g.group_id for g in listing.valid if ctx.should_checkpoint_group(g.group_id))


def plan_group_moves(
    ctx: FlowContext,
    groups: Iterable[str] | None,
    topics: set[str],
    segments: SegmentView,
) -> list[GroupMove]:
    """What committing each group's translated offsets on B would do (changes nothing).

    ``segments`` reads what the groups' offsets need (back from the metrics topic's end)."""
    admin_a = admin_client(ctx.client("source", "admin"))
    admin_b = admin_client(ctx.client("target", "admin"))
    explicit = bool(groups)
    moves: list[GroupMove] = []
    found = {
        group: {tp: o for tp, o in _offsets(admin_a, group).items() if tp[0] in topics}
        for group in source_groups(ctx, admin_a, groups)
    }
    segments.update(ctx, {(g, tp): u for g, c in found.items() for tp, u in c.items()})
    for group, committed in found.items():
        if not committed:
            if explicit:
                moves.append(GroupMove(group, "", "", -1, -1, -1, None,
                                       "refused: no committed offsets on the source"))  # fmt: skip
            continue
        state_a, members_a = _describe(admin_a, group)
        state_b, members_b = _describe(admin_b, group)
        current = _offsets(admin_b, group)
        for (topic, partition), upstream in sorted(committed.items()):
            remote = ctx.remote_topic(topic)
            down = segments.translate((topic, partition), upstream)
            now = current.get((remote, partition))
            if members_a:
                action = f"refused: {members_a} active member(s) on {ctx.source} ({state_a})"
            elif not is_idle_group(state_b, members_b):
                action = f"refused: {members_b} active member(s) on {ctx.target} ({state_b})"
            elif down is None:
                action = f"refused: {segments.why_unknown((topic, partition), upstream)}"
            elif moves_forward(now, down):
                action = "would commit"
            else:
                action = KEPT
            moves.append(GroupMove(group, topic, remote, partition, upstream,
                                   -1 if down is None else down, now, action))  # fmt: skip
    return moves


def commit_group_moves(ctx: FlowContext, moves: list[GroupMove]) -> list[GroupMove]:
    """Commit every ``would commit`` move on B, one request per group; nothing if one is refused."""
    if any(m.action.startswith("refused") for m in moves):
        return moves
    admin = admin_client(ctx.client("target", "admin"))
    out = list(moves)
    for group in sorted({m.group for m in moves if m.action == "would commit"}):
        todo = [i for i, m in enumerate(out) if m.group == group and m.action == "would commit"]
        request = ConsumerGroupTopicPartitions(
            group,
            [TopicPartition(out[i].remote_topic, out[i].partition, out[i].offset) for i in todo],
        )
        wait_futures(admin.alter_consumer_group_offsets([request]), f"committing {group}")
        for i in todo:
            out[i] = replace(out[i], action="committed")
    return out
