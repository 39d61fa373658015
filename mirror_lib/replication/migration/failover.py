"""Failover of a consumer group from a source cluster to a target: look up, check, commit.

``translate_group`` reads the latest checkpoints of the group on the target (MirrorClient
semantics); ``failover_group`` shows them next to the group's current offsets on the target and,
with ``apply``, commits them - refusing a group that has active members there, and keeping an
offset the target already has at or past the translated one (as group sync and cutover do)
unless ``rewind`` says to move it back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError, MirrorRuntimeError
from mirror_lib.kafka.admin import admin_client
from mirror_lib.kafka.clients import client_config
from mirror_lib.kafka.lookups import wait_futures
from mirror_lib.kafka.mirror_client import MirrorClient
from mirror_lib.kafka.reach import check_flow_clusters
from mirror_lib.mm2.formats import TP
from mirror_lib.offsets.checkpoints import KEPT, is_idle_group, moves_forward
from mirror_lib.tables.location import tables_root

#: what an applied action became
_DONE = {"would commit": "committed", "would rewind": "rewound"}


@dataclass(frozen=True)
class TranslatedOffset:
    """One partition of a group on the target: translated offset, the current one, the commit
    metadata of the checkpoint, and what :func:`failover_group` does with it (``action``:
    would commit | committed | would rewind | rewound | kept (...))."""

    topic: str
    partition: int
    offset: int
    current: int | None = None
    metadata: str = ""
    action: str = ""

    def as_dict(self) -> dict[str, int | str]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


def translate_group(
    config: MirrorConfig, group: str, source: str, target: str
) -> list[TranslatedOffset]:
    """Translated offsets of ``group`` on ``target`` for the flow source->target, per partition.

    Reads the target only (the checkpoints are there), so it answers while the source is down;
    an unreachable target fails within 10 s, naming it."""
    flow = config.flow(f"{source}->{target}")
    check_flow_clusters(config, [flow.name], ("target",), kept="nothing was read or changed")
    client = MirrorClient.from_config(config, target, flow.policy())
    checkpoints = client.remote_checkpoints(group, flow.mm2_source)
    return [
        TranslatedOffset(t, p, cp.downstream_offset, metadata=cp.metadata)
        for (t, p), cp in sorted(checkpoints.items())
    ]


def _admin(config: MirrorConfig, alias: str) -> AdminClient:
    return admin_client(client_config(config.cluster(alias), "admin"))


def failover_group(
    config: MirrorConfig,
    group: str,
    source: str,
    target: str,
    *,
    apply: bool = False,
    confirm: str | None = None,
    rewind: bool = False,
) -> list[TranslatedOffset]:
    """The translated offsets next to the current ones on ``target``; ``apply`` commits them.

    A partition where the target's offset is at or past the translated one is kept, never moved
    back, unless ``rewind``. Refuses (MirrorRuntimeError) when the group has active members on
    the target or when there is no checkpoint for it; nothing is changed then. ``confirm``
    (notebooks): when given, it must repeat the group id before anything is committed.
    """
    if not group.strip():
        raise ConfigError("group", group, "a consumer group id")
    if apply and confirm is not None and confirm.strip() != group:
        raise ConfigError(
            "confirm_group", confirm, f"the group id {group!r} typed again to commit its offsets"
        )
    offsets = translate_group(config, group, source, target)
    if not offsets:
        raise MirrorRuntimeError(
            f"no checkpoints for group {group} in {source}->{target}: nothing to fail over "
            "(is the checkpoint job running and has the group committed offsets on "
            f"{source}?); nothing was changed"
        )
    admin = _admin(config, target)
    (desc,) = wait_futures(
        admin.describe_consumer_groups([group]), f"describing group {group}"
    ).values()
    (current,) = wait_futures(
        admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]),
        f"offsets of group {group}",
    ).values()
    now = {(tp.topic, tp.partition): tp.offset for tp in current.topic_partitions if tp.offset >= 0}
    rows = [_planned(o, now.get((o.topic, o.partition)), rewind) for o in offsets]
    if not apply:
        return rows
    state = desc.state.name if desc.state is not None else None
    if not is_idle_group(state, len(desc.members)):
        raise MirrorRuntimeError(
            f"group {group} is {state} with active member(s) on {target} "
            f"({len(desc.members)} listed): stop its consumers first; no offsets were changed"
        )
    todo = [r for r in rows if r.action in _DONE]
    if todo:
        request = ConsumerGroupTopicPartitions(
            group,
            [TopicPartition(r.topic, r.partition, r.offset, metadata=r.metadata) for r in todo],
        )
        wait_futures(
            admin.alter_consumer_group_offsets([request]),
            f"committing offsets of group {group} on {target}",
        )
    return [replace(r, action=_DONE.get(r.action, r.action)) for r in rows]


def _planned(o: TranslatedOffset, current: int | None, rewind: bool) -> TranslatedOffset:
    if moves_forward(current, o.offset):
        action = "would commit"
    elif rewind and current != o.offset:  # past it: moves_forward said no
        action = "would rewind"
    else:
        action = KEPT
    return replace(o, current=current, action=action)


def format_failover(rows: list[TranslatedOffset], group: str, target: str, applied: bool) -> str:
    """One line on what :func:`failover_group` did (``applied``) or would do, naming the
    partitions it keeps."""
    moved = [r for r in rows if r.action != KEPT]
    back = sum(r.action in ("rewound", "would rewind") for r in rows)
    text = f"{'committed' if applied else 'would commit'} {len(moved)} offsets for group {group}"
    text += f" on {target}" + (f", {back} of them moved back (rewind)" if back else "")
    text += "" if applied else " (dry run; add --apply)"
    kept = [f"{r.topic}[{r.partition}] at {r.current} (translated {r.offset})" for r in rows
            if r.action == KEPT]  # fmt: skip
    if kept:
        text += (f"; kept {len(kept)} where the target is at or past the translated offset "
                 f"(mirror failover --rewind moves them back): {', '.join(kept)}")  # fmt: skip
    return text


def translate_group_as_of(
    config: MirrorConfig,
    group: str,
    source: str,
    target: str,
    *,
    version: int | None = None,
    timestamp: str | None = None,
) -> list[TranslatedOffset]:
    """What ``translate_group`` would have answered at a past table version or time.

    Reads the materialized ``checkpoints`` Delta table as of ``version`` or ``timestamp``
    (ISO-8601, e.g. "2026-11-21T02:13:00Z"): "what would a failover at 02:13 have given us".
    """
    import pyarrow.dataset as ds  # lazy: pyarrow

    from mirror_lib.tables.delta_rs import read_table  # lazy: deltalake, pyarrow

    mine = (ds.field("group_id") == group) & (ds.field("source") == source)
    mine &= ds.field("target") == target
    table = read_table(
        tables_root(config), "checkpoints", version=version, timestamp=timestamp, where=mine
    )
    latest: dict[TP, dict[str, Any]] = {}
    for row in table.to_pylist():
        key = (row["topic"], row["partition"])
        if key not in latest or row["kafka_offset"] > latest[key]["kafka_offset"]:
            latest[key] = row
    return [
        TranslatedOffset(t, p, row["downstream_offset"], metadata=row["metadata"] or "")
        for (t, p), row in sorted(latest.items())
    ]
