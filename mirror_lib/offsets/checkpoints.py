"""Checkpoint emission and group-offset sync decisions, as MM2 makes them
(docs/mm2-reference.md#checkpoints, #group-offset-sync).

* :class:`CheckpointStore`: latest checkpoint per (group, target topic, partition).
* :func:`compute_checkpoints`: MirrorCheckpointTask's per-group checkpoint rules.
* :func:`group_offsets_to_sync`: which target group offsets to write (KIP-545).
* :func:`checkpoints_monotonic`: MM2's monotonicity invariant
  (docs/mm2-reference.md#checkpoint-invariants).
* :func:`accept_group`: which source groups are checkpointed.

Pure logic: no Kafka, no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Protocol

from mirror_lib.mm2.formats import TP, Checkpoint
from mirror_lib.mm2.policy import ReplicationPolicy, checkpoint_topic_name

__all__ = [
    "IDLE_GROUP_STATES",
    "INTERNAL_GROUP_PREFIX",
    "CheckpointStore",
    "GroupFilterLike",
    "accept_group",
    "checkpoints_monotonic",
    "compute_checkpoints",
    "group_offsets_to_sync",
    "is_idle_group",
    "is_more_recent",
]

INTERNAL_GROUP_PREFIX = "__mirror"
"""Our own consumer groups; never checkpointed, whatever ``groups`` says."""

IDLE_GROUP_STATES = frozenset({"EMPTY", "DEAD", "UNKNOWN"})
"""Target group states (upper-cased) that count as idle when the group also has 0 members.

Java MM2 syncs only ``EMPTY`` groups. tansu reports ``UNKNOWN`` or ``EMPTY`` for idle groups (it
does not track the classic group state machine), so ``UNKNOWN`` with no members is idle too.
"""


class CheckpointStore:
    """Latest :class:`Checkpoint` per (group, topic, partition); ``topic`` is the target name.

    Mirrors MM2's CheckpointStore: it is loaded by reading the checkpoints topic to the end, so a
    later record for the same key overwrites an earlier one.
    """

    def __init__(self, checkpoints: Iterable[Checkpoint] = ()) -> None:
        self._by_group: dict[str, dict[TP, Checkpoint]] = {}
        self.load(checkpoints)

    def load(
        self, checkpoints: Iterable[Checkpoint], *, groups: Container[str] | None = None
    ) -> None:
        """Apply ``checkpoints`` in order (last one wins); only ``groups`` if given."""
        for cp in checkpoints:
            if groups is None or cp.group in groups:
                self.update(cp)

    def update(self, cp: Checkpoint) -> None:
        """Store ``cp`` as the latest for its (group, topic, partition)."""
        self._by_group.setdefault(cp.group, {})[(cp.topic, cp.partition)] = cp

    def get(self, group: str, topic: str, partition: int) -> Checkpoint | None:
        """The latest checkpoint for the key, or None."""
        return self._by_group.get(group, {}).get((topic, partition))

    def latest(self, group: str) -> dict[TP, Checkpoint]:
        """A copy of the group's latest checkpoints keyed by (target topic, partition)."""
        return dict(self._by_group.get(group, {}))

    def groups(self) -> set[str]:
        """Groups with at least one checkpoint."""
        return {g for g, cps in self._by_group.items() if cps}

    def __len__(self) -> int:
        return sum(len(cps) for cps in self._by_group.values())

    def __iter__(self) -> Iterator[Checkpoint]:
        for cps in self._by_group.values():
            yield from cps.values()


def is_more_recent(cp: Checkpoint, previous: Checkpoint | None) -> bool:
    """MM2's emission test: no previous, an upstream rewind, or a larger downstream offset."""
    return (
        previous is None
        or cp.upstream_offset < previous.upstream_offset
        or cp.downstream_offset > previous.downstream_offset
    )


def compute_checkpoints(
    *,
    group: str,
    committed: Mapping[TP, tuple[int, str | None] | None],
    translate: Callable[[str, int, int], int | None],
    policy: ReplicationPolicy,
    source_alias: str,
    target_alias: str,
    should_replicate_topic: Callable[[str], bool],
    store: CheckpointStore,
) -> list[Checkpoint]:
    """Checkpoints to emit for one group's committed source offsets; updates ``store``.

    ``committed`` maps source (topic, partition) to (offset, metadata), None for a null
    OffsetAndMetadata. ``translate(topic, partition, upstream)`` gives the downstream offset or
    None when there is no translation (e.g. no offset syncs yet). Returns the emitted
    checkpoints sorted by (target topic, partition).
    """
    emitted: list[Checkpoint] = []
    for (topic, partition), entry in committed.items():
        if entry is None or not should_replicate_topic(topic):
            continue
        upstream, metadata = entry
        if upstream < 0:
            continue
        downstream = translate(topic, partition, upstream)
        if downstream is None or downstream < 0:
            continue
        cp = Checkpoint(
            group=group,
            topic=checkpoint_topic_name(policy, source_alias, target_alias, topic),
            partition=partition,
            upstream_offset=upstream,
            downstream_offset=downstream,
            metadata=metadata or "",
        )
        if is_more_recent(cp, store.get(group, cp.topic, partition)):
            store.update(cp)
            emitted.append(cp)
    emitted.sort(key=lambda c: (c.topic, c.partition))
    return emitted


#: A target group's partition left where it is: it is at or past the translated offset, and
#: nothing here moves a group backwards unasked (group sync, failover, cutover).
KEPT = "kept (the target is at or past it)"


def moves_forward(current: int | None, translated: int) -> bool:
    """Whether a target group's offset ``current`` (None or negative: it has none) is moved to
    ``translated``: only forward, never back (group sync, failover, cutover keep the rest)."""
    return current is None or current < 0 or current < translated


def is_idle_group(state: str | None, members: int) -> bool:
    """True if the target group may be written: no members, and absent or an idle state."""
    if members > 0:
        return False
    return state is None or state.strip().upper() in IDLE_GROUP_STATES


def group_offsets_to_sync(
    *,
    checkpoints: Mapping[TP, Checkpoint],
    target_state: str | None,
    target_members: int,
    target_offsets: Mapping[TP, int],
) -> dict[TP, int]:
    """Target offsets to write for one group from its latest checkpoints (KIP-545).

    Stricter than MM2: a group with active members (``target_members > 0`` or a state other than
    absent (None) / EMPTY / DEAD / UNKNOWN) gives ``{}``; we never race live consumers. tansu
    reports ``UNKNOWN`` or ``EMPTY`` for idle groups. Otherwise a partition is written when the
    target has no offset, a negative one, or one strictly below the checkpoint's downstream
    offset; a target offset >= downstream is never rewound.
    """
    if not is_idle_group(target_state, target_members):
        return {}
    out: dict[TP, int] = {}
    for tp, cp in checkpoints.items():
        downstream = cp.downstream_offset
        if downstream < 0:
            continue
        if moves_forward(target_offsets.get(tp), downstream):
            out[tp] = downstream
    return out


def checkpoints_monotonic(checkpoints: Iterable[Checkpoint]) -> bool:
    """True if, per (group, topic, partition) in order, downstream never decreases unless
    upstream decreased at the same step (MM2's invariant, with the group's own deliberate
    rewinds)."""
    last: dict[tuple[str, str, int], Checkpoint] = {}
    for cp in checkpoints:
        key = (cp.group, cp.topic, cp.partition)
        prev = last.get(key)
        if (
            prev is not None
            and cp.downstream_offset < prev.downstream_offset
            and cp.upstream_offset >= prev.upstream_offset
        ):
            return False
        last[key] = cp
    return True


class GroupFilterLike(Protocol):
    """Anything with ``should_replicate_group(group) -> bool`` (e.g. ``GroupFilter``)."""

    def should_replicate_group(self, group: str) -> bool: ...


def accept_group(group: str, group_filter: GroupFilterLike) -> bool:
    """The filter accepts ``group`` and it is not one of our internal ``__mirror*`` groups."""
    return not group.startswith(INTERNAL_GROUP_PREFIX) and group_filter.should_replicate_group(
        group
    )
