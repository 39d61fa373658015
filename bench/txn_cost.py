#!/usr/bin/env python
"""What a target broker pays for exactly-once: its CPU at a steady rate, by how often the
producers commit and what each transaction carries (issue 53; bench/README.md, "Latency").

Per variant, a fresh Apache Kafka broker (``mirror_lib.testing``, Kafka's own JVM options), a
topic of 4 partitions, and one process per slot that writes its share of ``--rate`` records/s
of ``--size`` bytes to its partitions, as the copy's slots do: in transactions committed
``commits`` times a second, with the ledger's ``send_offsets_to_transaction`` or without, or
(the floor) without transactions, idempotent and flushed as often. The broker's CPU is taken
over ``--seconds`` after a few seconds of the same load left out.

    .venv/bin/python bench/txn_cost.py                      # every variant, 30 s each
    .venv/bin/python bench/txn_cost.py --variants floor,eos-50x2 --seconds 10
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.curves import table
from bench.kafka_data import create_topic
from bench.measure import broker_cpu_s
from bench.procs import log

TOPIC = "probe"
PARTITIONS = 4
WARM_S = 8.0


@dataclass(frozen=True)
class Variant:
    """``slots`` producers, each committing ``commits`` transactions a second (``txn`` off:
    flushing as often, without transactions), with the ledger's offsets or without."""

    name: str
    label: str
    slots: int
    commits: float
    txn: bool = True
    ledger: bool = True

    def parts(self, slot: int) -> list[int]:
        """The partitions of ``slot``: the copy's stable owners, split evenly."""
        return [p for p in range(PARTITIONS) if p % self.slots == slot]


VARIANTS = (
    Variant("floor", "no transactions, 2 producers flushing 50 times a second", 2, 50, txn=False),
    Variant("eos-100x2", "2 slots committing every 10 ms", 2, 100),
    Variant("eos-50x2", "2 slots committing every 20 ms (our defaults)", 2, 50),
    Variant(
        "eos-50x2-noledger", "as our defaults, without the ledger's offsets", 2, 50, ledger=False
    ),
    Variant("eos-25x2", "2 slots committing every 40 ms", 2, 25),
    Variant("eos-50x1", "1 slot committing every 20 ms", 1, 50),
    Variant("eos-10x2", "2 slots committing every 100 ms", 2, 10),
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    names = [v.name for v in VARIANTS]
    p.add_argument("--variants", default=",".join(names), help=f"of {', '.join(names)}")
    p.add_argument("--rate", type=float, default=5_000, help="records/s over all slots")
    p.add_argument("--size", type=int, default=200, help="bytes of each record's value")
    p.add_argument("--seconds", type=float, default=30, help="the measured window")
    p.add_argument("--reps", type=int, default=1, help="repetitions of every variant")
    args = p.parse_args(argv)
    chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in names]
    if unknown or not chosen:
        p.error(f"--variants {args.variants!r}: unknown {unknown}; valid: {', '.join(names)}")
    for flag in ("rate", "size", "seconds", "reps"):
        if getattr(args, flag) <= 0:
            p.error(f"--{flag} {getattr(args, flag)}: must be above 0")
    args.chosen = [v for v in VARIANTS if v.name in chosen]
    return args


def records_per_commit(v: Variant, rate: float) -> int:
    """Records each of ``v``'s commits carries at ``rate`` records/s over all slots."""
    return max(1, round(rate / v.slots / v.commits))


def _slot(boot: str, v: Variant, slot: int, args: argparse.Namespace, secs: float, q: Any) -> None:
    """One slot's producer: its share of the load for ``secs``; puts (commits, own CPU s)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = {
        "bootstrap.servers": boot, "linger.ms": 1, "acks": "all", "enable.idempotence": True,
        "max.in.flight.requests.per.connection": 1,
    }  # fmt: skip
    if v.txn:
        conf["transactional.id"] = f"txn-cost-{slot}"
    producer = Producer(conf)
    group: Any = None
    if v.txn:
        producer.init_transactions(30)
        ledger = Consumer({"bootstrap.servers": boot, "group.id": f"txn-cost-ledger-{slot}"})
        group = ledger.consumer_group_metadata()
    value, parts, n = b"x" * args.size, v.parts(slot), records_per_commit(v, args.rate)
    commits, started, cpu = 0, time.monotonic(), time.process_time()
    due = started
    while time.monotonic() - started < secs:
        if v.txn:
            producer.begin_transaction()
        for i in range(n):
            producer.produce(TOPIC, value, partition=parts[i % len(parts)])
        producer.flush(10)
        if v.txn:
            if v.ledger:
                offsets = [TopicPartition(TOPIC, p, commits) for p in parts]
                producer.send_offsets_to_transaction(offsets, group, 10)
            producer.commit_transaction(10)
        commits += 1
        due += 1.0 / v.commits
        time.sleep(max(due - time.monotonic(), 0.0))
    q.put((commits, time.process_time() - cpu))


def run_variant(v: Variant, args: argparse.Namespace) -> dict[str, Any]:
    """``v`` on a fresh broker: the load left out for WARM_S, then measured."""
    from mirror_lib.testing.clusters import start_clusters

    brokers = start_clusters(["target"], Path(tempfile.mkdtemp(prefix="txn-cost-")), "kafka")
    try:
        boot = brokers.bootstraps["target"]
        create_topic(boot, TOPIC, PARTITIONS)
        pids = [b.pid for b in brokers.handles]  # type: ignore[attr-defined]
        q: Any = mp.Queue()
        procs = [
            mp.Process(target=_slot, args=(boot, v, s, args, WARM_S + args.seconds, q))
            for s in range(v.slots)
        ]
        for p in procs:
            p.start()
        time.sleep(WARM_S)  # the load's own start-up left out, as the latency bench does
        cpu0, t0 = broker_cpu_s(pids), time.monotonic()
        results = [q.get(timeout=WARM_S + args.seconds + 60) for _ in procs]
        span, cpu1 = time.monotonic() - t0, broker_cpu_s(pids)
        for p in procs:
            p.join(10)
        commits = sum(c for c, _ in results)
        return {
            "variant": v.name,
            "broker_cores": round((cpu1 - cpu0) / span, 3),
            "commits_per_s": round(commits / (WARM_S + args.seconds), 1),
            "producer_cores": round(sum(c for _, c in results) / (WARM_S + args.seconds), 3),
        }
    finally:
        brokers.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs = []
    for rep in range(args.reps):
        for v in args.chosen:
            log(f"rep {rep + 1}: {v.label}")
            runs.append(run_variant(v, args))
            log(f"  {runs[-1]}")
    floor = [r["broker_cores"] for r in runs if r["variant"] == "floor"]
    base = statistics.median(floor) if floor else None
    rows = []
    for v in args.chosen:
        mine = [r for r in runs if r["variant"] == v.name]
        cores = statistics.median(r["broker_cores"] for r in mine)
        commits = statistics.median(r["commits_per_s"] for r in mine)
        extra = f"{cores - base:.2f}" if base is not None and v.txn else "-"
        per = f"{(cores - base) / commits * 1000:.1f}" if base is not None and v.txn else "-"
        rows.append({
            "": v.label, "commits/s": f"{commits:.0f}",
            "records a commit": str(records_per_commit(v, args.rate)),
            "broker (cores)": f"{cores:.2f}", "over the floor": extra,
            "ms of broker CPU a commit": per,
        })  # fmt: skip
    print(
        f"Target broker CPU at {args.rate:g} records/s x {args.size} B over {PARTITIONS} "
        f"partitions, {args.seconds:g} s measured, median of {args.reps}:\n"
    )
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
