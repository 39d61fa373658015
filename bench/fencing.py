#!/usr/bin/env python
"""How long the planner's fencing of every slot takes before a query's first slice, slot by slot
against all at once (``target_producer.fence_slots``), on a three-broker target.

A fence is ``init_transactions`` on a slot's ``transactional.id`` with the slot's own producer
settings. ``open``: each slot left a transaction open first (a copy task killed mid-commit, or a
query started again through an outage), which the coordinator aborts before the fence returns;
``idle``: nothing was open. The target is a :class:`~mirror_lib.testing.kafka_cluster.KafkaCluster`
of three combined nodes (replication factor 3, ``min.insync.replicas = 2``) with Kafka's own JVM
options; the two ways alternate within each repetition.

    .venv/bin/python bench/fencing.py                          # 4 and 16 slots, 5 repetitions
    .venv/bin/python bench/fencing.py --slots 32 --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.curves import table
from bench.kafka_data import create_topic
from bench.procs import log

TOPIC = "fenced"
FENCE_S = 30.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--slots", default="4,16", help="slot counts, comma-separated")
    p.add_argument("--reps", type=int, default=5, help="repetitions of every variant")
    args = p.parse_args(argv)
    try:
        args.counts = [int(s) for s in args.slots.split(",") if s.strip()]
    except ValueError:
        p.error(f"--slots {args.slots!r}: whole numbers separated by commas, e.g. 4,16")
    if not args.counts or min(args.counts) < 1:
        p.error(f"--slots {args.slots!r}: every count must be 1 or more")
    if args.reps < 1:
        p.error(f"--reps {args.reps}: must be 1 or more")
    return args


def open_transactions(ctx: Any, slots: int) -> list[Any]:
    """Each slot's own producer with a transaction left open on ``TOPIC`` (kept alive by the
    caller until the fence took over)."""
    from mirror_lib.replication.copy.target_producer import make_producer

    producers = []
    for slot in range(slots):
        producer, _timeout_ms = make_producer(ctx, slot, init_timeout_s=FENCE_S)
        producer.begin_transaction()
        producer.produce(TOPIC, b"left open", partition=slot % 4)
        producer.flush(FENCE_S)
        producers.append(producer)
    return producers


def timed(fence: Callable[[], object]) -> float:
    started = time.monotonic()
    fence()
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from mirror_lib.config.parse import parse_config
    from mirror_lib.replication.context import FlowContext
    from mirror_lib.replication.copy.target_producer import fence_slot, fence_slots
    from mirror_lib.testing.kafka_cluster import start_cluster
    from mirror_lib.testing.kafka_nodes import COMBINED

    cluster = start_cluster("B", Path(tempfile.mkdtemp(prefix="fencing-")), COMBINED)
    try:
        create_topic(cluster.bootstrap_servers, TOPIC, 4)
        props = {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",  # never asked: a fence is the target's
            "B.bootstrap.servers": cluster.bootstrap_servers,
            "A->B.enabled": "true",
        }
        ctx = FlowContext.create(parse_config(props), "A->B")
        ways: dict[str, Callable[[int], object]] = {
            "slot by slot": lambda n: [fence_slot(ctx, s, FENCE_S) for s in range(n)],
            "all at once": lambda n: fence_slots(ctx, range(n), FENCE_S),
        }
        fence_slots(ctx, range(max(args.counts)), FENCE_S)  # the coordinators' first load
        took: dict[tuple[int, str, str], list[float]] = {}
        for rep in range(args.reps):
            for n in args.counts:
                for state in ("idle", "open"):
                    order = list(ways) if rep % 2 == 0 else list(reversed(ways))
                    for way in order:
                        left = open_transactions(ctx, n) if state == "open" else []
                        seconds = timed(lambda: ways[way](n))  # noqa: B023
                        del left
                        took.setdefault((n, state, way), []).append(seconds)
                        log(f"rep {rep + 1}: {n} slots, {state}, {way}: {seconds:.2f} s")
        rows = []
        for (n, state, way), values in took.items():
            rows.append({
                "slots": n, "left open": state, "fenced": way,
                "median (s)": f"{statistics.median(values):.2f}",
                "min-max (s)": f"{min(values):.2f}-{max(values):.2f}",
            })  # fmt: skip
        print(f"\nFencing every slot on three combined nodes, {args.reps} repetitions:\n")
        print(table(rows, list(rows[0])))
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
