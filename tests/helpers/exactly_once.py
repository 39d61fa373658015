"""Exactly-once checks on the committed view computed by the raw reader, and, on Apache Kafka,
on the broker's own ``read_committed`` view as well: the two must agree.

The raw view is computed from the log's batches and transaction markers
(:mod:`tests.helpers.kafka_raw`), so it holds on tansu, whose ``read_committed`` also returns
aborted records. Apache Kafka's ``read_committed`` is what a user's consumer sees.
"""

from __future__ import annotations

import time
from collections import Counter

import confluent_kafka as ck

from mirror_lib.testing.clusters import broker_kind
from mirror_lib.testing.kafka_io import consume_all
from tests.helpers.kafka_raw import RawKafkaError, committed_records

Rows = dict[int, list[tuple[bytes | None, bytes | None]]]


def committed_rows(bootstrap: str, topic: str, partitions: int) -> Rows:
    """(key, value) per partition in offset order, as a correct read_committed reader sees them."""
    return {
        p: [(r.key, r.value) for r in recs]
        for p, recs in committed_records(bootstrap, topic, partitions).items()
    }


def committed_so_far(bootstrap: str, topic: str, partitions: int) -> Rows:
    """:func:`committed_rows`, or none while the topic does not exist yet."""
    try:
        return committed_rows(bootstrap, topic, partitions)
    except (RawKafkaError, OSError):
        return {}


def committed_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Committed records of ``topic`` (0 while it does not exist yet)."""
    return sum(len(v) for v in committed_so_far(bootstrap, topic, partitions).values())


def exactly_once_problems(source: Rows, target: Rows) -> list[str]:
    """What differs between the source's and the target's partitions (empty: exactly once)."""
    problems = []
    for p in sorted(source):
        want, got = source[p], target.get(p, [])
        if want == got:
            continue
        dupes = sum(n - 1 for n in Counter(got).values() if n > 1)
        missing = len(set(want) - set(got))
        order = " (same records, other order)" if not dupes and not missing else ""
        problems.append(
            f"partition {p}: {len(got)} records on the target for {len(want)} on the source "
            f"({dupes} duplicates, {missing} missing){order}"
        )
    return problems


def wait_exactly_once(
    source_bootstrap: str,
    topic: str,
    target_bootstrap: str,
    remote: str,
    partitions: int,
    timeout_s: float,
    alive: object = None,
) -> None:
    """Wait until the target's committed view holds every source record, then assert that it
    holds each exactly once and in order per partition. ``alive()`` is asserted while waiting."""
    source = committed_rows(source_bootstrap, topic, partitions)
    total = sum(len(v) for v in source.values())
    deadline = time.monotonic() + timeout_s
    seen = 0
    target: Rows = {}  # the read that saw every record, checked as it is
    ends = ListedEnds(target_bootstrap, remote, partitions) if broker_kind() == "kafka" else None
    try:
        while time.monotonic() < deadline:
            if callable(alive):
                alive()
            if ends is None or ends.moved_past(total):
                rows = committed_so_far(target_bootstrap, remote, partitions)
                seen = sum(len(v) for v in rows.values())
                if seen >= total:
                    target = rows
                    break
            time.sleep(0.5)
    finally:
        if ends is not None:
            ends.close()
    target = target or committed_rows(target_bootstrap, remote, partitions)
    problems = exactly_once_problems(source, target) + broker_view_problems(
        target_bootstrap, remote, target
    )
    assert not problems, f"not exactly once after {timeout_s:.0f}s ({seen}/{total}): {problems}"


class ListedEnds:
    """The sum of a topic's high watermarks as Apache Kafka lists them: every committed record
    lies below it, and a commit's marker moves it. The committed view (0.5 CPU-s for 60,000
    records) is read again only when this sum reached the count awaited and moved since the
    last read; read every 0.5 s, it took half a core beside the copy the fault tests time.
    Not on tansu, which lists less than it holds."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.consumer = ck.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "mirror-test-ends"}
        )
        self.parts = [ck.TopicPartition(topic, p) for p in range(partitions)]
        self.last = -1

    def moved_past(self, count: int) -> bool:
        """Whether the listed ends reach ``count`` and moved since the last True."""
        try:
            now = sum(self.consumer.get_watermark_offsets(tp, timeout=5)[1] for tp in self.parts)
        except ck.KafkaException:  # no topic yet, or its leaders are moving
            return False
        if now < count or now == self.last:
            return False
        self.last = now
        return True

    def close(self) -> None:
        self.consumer.close()


def broker_view_problems(bootstrap: str, topic: str, raw: Rows) -> list[str]:
    """Where the broker's ``read_committed`` view differs from the raw committed view ``raw``.

    Empty on tansu, whose ``read_committed`` view cannot be trusted (it shows aborted records).
    """
    if broker_kind() != "kafka":
        return []
    seen: Rows = {p: [] for p in raw}
    for record in consume_all(bootstrap, topic, sorted(raw), timeout_s=60):
        seen[record.partition].append((record.key, record.value))
    return [
        f"partition {p}: read_committed sees {len(seen[p])} records, the raw committed view "
        f"{len(raw[p])}"
        for p in sorted(raw)
        if seen[p] != raw[p]
    ]


def assert_exactly_once(
    source_bootstrap: str, topic: str, target_bootstrap: str, remote: str, partitions: int
) -> None:
    """Every committed source record is on the target once, in order, in its partition; on
    Apache Kafka the broker's ``read_committed`` view of the target agrees with the raw one."""
    source = committed_rows(source_bootstrap, topic, partitions)
    target = committed_rows(target_bootstrap, remote, partitions)
    problems = exactly_once_problems(source, target)
    problems += broker_view_problems(target_bootstrap, remote, target)
    assert not problems, problems
