"""Read-only offset and metadata look-ups over confluent-kafka (no topic changes here)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.admin import future_result, lookup_error
from mirror_lib.mm2.formats import TP

#: What a broker that is up answers for a partition it does not lead (yet): a topic just
#: created, a leader just elected. Kafka's own clients look the leader up again and ask again.
LEADER_MOVED = frozenset({
    "NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE",
})  # fmt: skip
#: How long a look-up asks again while leaders move; any other error fails it at once.
LEADER_MOVED_S = 5.0
#: How often :func:`settled_bounds` lists the last stable offsets again.
SETTLE_POLL_S = 0.05


def named(admin: Any, what: str) -> str:
    """``what`` plus the cluster and flow an AdminClient made by ``FlowContext.admin`` serves."""
    where = getattr(admin, "mirror_where", "")
    return f"{what} on {where}" if where else what


def wait_futures(futures: dict[Any, Any], what: str, timeout_s: float = 35) -> dict[Any, Any]:
    """Results of confluent-kafka admin futures by key; failures become BrokerError."""
    return {key: future_result(fut, what, timeout_s) for key, fut in futures.items()}


def list_topic_partitions(admin: AdminClient, timeout_s: float = 30) -> dict[str, int]:
    """Topic -> partition count of every topic the cluster reports without error."""
    try:
        md = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise lookup_error(f"{named(admin, 'listing topics')} failed", exc) from exc
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


def topic_ids(admin: AdminClient, topics: Iterable[str], timeout_s: float = 30) -> dict[str, str]:
    """Topic -> topic id (changes when a topic is deleted and re-created)."""
    names = sorted(set(topics))
    if not names:
        return {}
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s)
    described = wait_futures(futures, named(admin, "describing topics"), timeout_s + 5)
    return {name: str(desc.topic_id) for name, desc in described.items()}


def partition_bounds(
    admin: AdminClient, partitions: Iterable[TP], timeout_s: float = 30, *, committed: bool = True
) -> dict[TP, tuple[int, int]]:
    """(earliest, last stable offset) per partition: the range a read_committed reader sees.

    ``committed=False``: (earliest, high watermark), past the records of open transactions.
    The end is never below the start: Kafka lists a last stable offset below the log start
    when records deleted (retention, DeleteRecords) began a transaction that is still open, and
    such a partition holds nothing readable yet, which is an end at its start.
    """
    starts = _offsets_at(admin, partitions, OffsetSpec.earliest(), timeout_s, committed)
    ends = _offsets_at(admin, starts, OffsetSpec.latest(), timeout_s, committed)
    return {tp: (starts[tp], max(starts[tp], ends[tp])) for tp in sorted(starts)}


def settled_bounds(
    admin: AdminClient, partitions: Iterable[TP], settle_s: float, timeout_s: float = 30
) -> dict[TP, tuple[int, int]]:
    """:func:`partition_bounds`, once each last stable offset reached the high watermark listed
    first, or after ``settle_s``.

    A transaction's commit returns before the broker has written its markers, so right after a
    run's last commit its records can still lie past the last stable offset: a read to the end
    listed then would leave them out. A transaction still open after ``settle_s`` (another
    writer's) is left for the next read.
    """
    tps = sorted(set(partitions))
    highs = _offsets_at(admin, tps, OffsetSpec.latest(), timeout_s, committed=False)
    bounds = partition_bounds(admin, tps, timeout_s)
    deadline = time.monotonic() + settle_s
    waiting = [tp for tp, (_lo, end) in bounds.items() if end < highs.get(tp, 0)]
    while waiting and time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_S)
        ends = _offsets_at(admin, waiting, OffsetSpec.latest(), timeout_s, committed=True)
        for tp, end in ends.items():
            bounds[tp] = (bounds[tp][0], max(bounds[tp][0], end))
        waiting = [tp for tp in waiting if bounds[tp][1] < highs[tp]]
    return bounds


def partition_ends(
    admin: AdminClient, partitions: Iterable[TP], timeout_s: float = 30
) -> dict[TP, int]:
    """Last stable offset per partition, in one listing: what a lag is measured against, where
    :func:`partition_bounds` lists every partition twice."""
    return _offsets_at(admin, partitions, OffsetSpec.latest(), timeout_s, committed=True)


def _offsets_at(
    admin: AdminClient, partitions: Iterable[TP], spec: Any, timeout_s: float, committed: bool
) -> dict[TP, int]:
    tps = sorted(set(partitions))
    if not tps:
        return {}
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    return _list_offsets(admin, tps, spec, level, timeout_s, named(admin, "listing offsets"))


def _list_offsets(
    admin: AdminClient, tps: list[TP], spec: Any, level: Any, timeout_s: float, what: str
) -> dict[TP, int]:
    """ListOffsets at ``spec``; partitions answered with :data:`LEADER_MOVED` are asked again
    for up to :data:`LEADER_MOVED_S` (librdkafka's admin client does not)."""
    deadline = time.monotonic() + min(timeout_s, LEADER_MOVED_S)
    found: dict[TP, int] = {}
    pause_s = 0.1
    while tps:
        futures = admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in tps}, isolation_level=level,
            request_timeout=timeout_s,
        )  # fmt: skip
        moved = []
        for tp, fut in futures.items():
            key = (tp.topic, tp.partition)
            try:
                found[key] = max(int(future_result(fut, what, timeout_s + 5).offset), 0)
            except BrokerError as exc:
                if getattr(exc, "kafka_error", None) not in LEADER_MOVED:
                    raise
                if time.monotonic() > deadline:
                    raise
                moved.append(key)
        if moved:
            time.sleep(pause_s)
            pause_s = min(2 * pause_s, 0.5)
        tps = moved
    return found


def positions(offset: dict[str, Any] | None, key: str = "p") -> dict[TP, int]:
    """Per (topic, partition) values of a source offset ``{"topics": {t: {"p": {"0": n}}}}``.

    ``key="s"`` gives the explicit batch starts of partitions first seen or moved past a gap.
    """
    return {
        (topic, int(p)): int(value)
        for topic, entry in (offset or {}).get("topics", {}).items()
        for p, value in entry.get(key, {}).items()
    }


def batch_ranges(start: dict[str, Any], end: dict[str, Any]) -> list[tuple[str, int, int, int]]:
    """The non-empty ``(topic, partition, first, stop)`` ranges of a batch from start to end."""
    begin, starts = positions(start), positions(end, "s")
    ranges = []
    for tp, stop in sorted(positions(end).items()):
        first = starts.get(tp, begin.get(tp, stop))
        if stop > first:
            ranges.append((tp[0], tp[1], first, stop))
    return ranges
