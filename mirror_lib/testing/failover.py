"""Failover accuracy, measured: MM2's checkpoints against ours, for the tests and the bench.

Many consumer groups stand at random positions of one topic on the source A (``orders``, with
keys, headers and a third of it written in transactions, so that offsets have gaps). MirrorMaker 2
replicates A->B under the aliases A/B; our flow replicates the same topic between the same brokers
under the aliases C/D. :func:`failover_figures` then moves every group to B at the offsets each
tool's checkpoints translate it to and counts the records the group would read again and the
records it would skip. tests/integration/test_mm2_interop.py asserts ours are zero;
``bench/replication.py --cases failover`` reports both.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer, TopicPartition

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.mirror_client import MirrorClient
from mirror_lib.mm2.formats import OffsetSync
from mirror_lib.mm2.policy import DefaultReplicationPolicy
from mirror_lib.testing.kafka_io import Record, commit_group, consume_all
from mirror_lib.testing.mm2 import single_node_settings

TOPIC, PARTITIONS, PER_PARTITION = "orders", 3, 400
GROUPS = [f"grp-{i:02d}" for i in range(16)]


@dataclass
class DataSet:
    """``orders`` on A and where each group stands: ``committed[group][partition]``."""

    records: list[Record]
    committed: dict[str, dict[int, int]]

    def partition(self, p: int) -> list[Record]:
        return [r for r in self.records if r.partition == p]


def mm2_properties(source: str, target: str, *topics: str) -> dict[str, str]:
    """MM2 replicating ``orders`` (and ``topics``) A->B with MM2's defaults for everything that
    moves data; checkpoints, group sync and group discovery every second or two, so that its
    checkpoints follow the groups quickly."""
    return {
        "clusters": "A, B",
        "A.bootstrap.servers": source,
        "B.bootstrap.servers": target,
        "A->B.enabled": "true",
        "A->B.topics": ", ".join((TOPIC, *topics)),
        "B->A.enabled": "false",
        **single_node_settings(),
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "refresh.groups.interval.seconds": "2",
    }


def ours_properties(source: str, target: str, state: str) -> dict[str, str]:
    """Our flow C->D over the same brokers as MM2's A->B (C is A, D is B)."""
    return {
        "clusters": "C, D",
        "C.bootstrap.servers": source,
        "D.bootstrap.servers": target,
        "C->D.enabled": "true",
        "C->D.topics": TOPIC,
        "C->D.groups": "grp-.*",
        "D->C.emit.heartbeats.enabled": "false",
        **single_node_settings(),
        "emit.checkpoints.interval.seconds": "1",
        "mirror.state.dir": state,
        "mirror.tables.enabled": "false",
    }


def produce_orders(bootstrap: str) -> list[Record]:
    """400 records per partition, with keys, headers and CreateTime; a third of them in
    committed transactions, so that upstream offsets have gaps (the commit markers)."""
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "orders-txn"})
    txn.init_transactions(30)
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            args: dict[str, Any] = {
                "topic": TOPIC,
                "partition": p,
                "key": f"k{i % 37}".encode(),
                "value": f"{TOPIC}-{p}-{i}".encode(),
                "headers": [("n", str(i).encode())] if i % 3 else None,
            }
            if (i // 20) % 3 == 1:  # runs of 20 records in transactions of 20
                if i % 20 == 0 and p == 0:
                    txn.begin_transaction()
                txn.produce(**args)
                if i % 20 == 19 and p == PARTITIONS - 1:
                    txn.commit_transaction(30)
            else:
                plain.produce(**args)
        plain.flush(30)
    if plain.flush(30) != 0:
        raise RuntimeError(f"producing {TOPIC} to {bootstrap}: records left unsent")
    return consume_all(bootstrap, TOPIC)


def commit_offsets(bootstrap: str, group: str, offsets: dict[int, int], metadata: str) -> None:
    """Commit ``offsets`` for ``group`` on ``TOPIC`` without joining the group."""
    tps = [TopicPartition(TOPIC, p, off, metadata=metadata) for p, off in offsets.items()]
    commit_group(bootstrap, group, tps)


def make_dataset(bootstrap: str, seed: int = 41) -> DataSet:
    """``orders`` produced on A, then every group committed at random positions (each
    partition: anywhere from 0 to the end; metadata on every other group)."""
    records = produce_orders(bootstrap)
    ends = {p: max(r.offset for r in records if r.partition == p) + 1 for p in range(PARTITIONS)}
    rng = random.Random(seed)
    committed: dict[str, dict[int, int]] = {}
    for n, group in enumerate(GROUPS):
        offsets = {p: rng.choice([0, ends[p], *(rng.randrange(ends[p]) for _ in range(6))])
                   for p in range(PARTITIONS)}  # fmt: skip
        commit_offsets(bootstrap, group, offsets, f"meta-{group}" if n % 2 else "")
        committed[group] = offsets
    return DataSet(records, committed)


def mm2_syncs(source: str) -> list[dict[str, Any]]:
    """MM2's offset syncs of ``orders`` (on A: MM2's default offset-syncs.topic.location)."""
    out = []
    for r in consume_all(source, "mm2-offset-syncs.B.internal"):
        d = OffsetSync.decode(r.key, r.value)
        if d.topic == TOPIC:
            row = {"topic": d.topic, "partition": d.partition, "upstream": d.upstream_offset,
                   "downstream": d.downstream_offset}  # fmt: skip
            out.append({"offset": r.offset, **row})
    return out


def mm2_settled(source: str, dataset: DataSet) -> bool:
    """MM2 wrote the sync of every partition's last record: it sends these delayed syncs at
    each Connect offset flush (offset.flush.interval.ms, 60 s by default)."""
    last = {p: max(r.offset for r in dataset.partition(p)) for p in range(PARTITIONS)}
    try:
        synced = {(s["partition"], s["upstream"]) for s in mm2_syncs(source)}
    except BrokerError:  # the syncs topic is not there yet
        return False
    return all((p, u) in synced for p, u in last.items())


def wait_for(check: Callable[[], Any], timeout_s: float) -> bool:
    """Whether ``check()`` became true within ``timeout_s`` (checked every half second)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def client(bootstrap: str) -> MirrorClient:
    """MM2's client view of a target cluster (default replication policy)."""
    return MirrorClient({"bootstrap.servers": bootstrap}, DefaultReplicationPolicy(), timeout_s=30)


def failover_counts(
    dataset: DataSet, remote: list[Record], translated: dict[str, dict[tuple[str, int], int]]
) -> dict[str, int]:
    """Records each group would read again and skip if it moved to B at its translated offsets.

    Re-read: records on B at or after the translated offset that the group had consumed on A.
    Skipped: records the group had not consumed on A that lie on B before the translated offset.
    A partition without a translation counts as not failed over (``untranslated``).
    """
    upstream = {r.value: r.offset for r in dataset.records}
    counts = {"reread": 0, "skipped": 0, "untranslated": 0, "partitions": 0}
    for group, offsets in dataset.committed.items():
        for p, c in offsets.items():
            remote_topic = next(iter({t for t, _ in translated[group]} or {""}))
            t = translated[group].get((remote_topic, p))
            counts["partitions"] += 1
            if t is None:
                counts["untranslated"] += 1
                continue
            for r in remote:
                if r.partition != p:
                    continue
                consumed = upstream[r.value] < c
                if r.offset >= t and consumed:
                    counts["reread"] += 1
                elif r.offset < t and not consumed:
                    counts["skipped"] += 1
    return counts


def failover_figures(target: str, dataset: DataSet) -> dict[str, Any]:
    """Both tools' :func:`failover_counts` for every group, from the checkpoints on B as MM2's
    client reads them: ``{"mm2": ..., "ours": ..., "groups": n}``."""
    b = client(target)
    figures: dict[str, Any] = {}
    for name, alias in (("mm2", "A"), ("ours", "C")):
        translated = b.consumer_offsets_all_groups(alias, groups=GROUPS)
        translated = {g: translated.get(g, {}) for g in GROUPS}
        remote = consume_all(target, f"{alias}.{TOPIC}")
        figures[name] = failover_counts(dataset, remote, translated)
    figures["groups"] = len(GROUPS)
    return figures
