"""Reading a long metrics topic: the whole topic against reading back only what offsets need.

Usage: ``.venv/bin/python bench/metrics_topic.py [--commits 200000] [--partitions 4]
[--readers whole,back 1000,job]``. Starts two embedded brokers and fills the flow's metrics
topic on the target as the copier does: per
commit and partition a ``batch`` and a ``segments`` event (100 records each; a commit marker
after each). Then each reader runs in its own process (its peak RSS is its own):

- ``whole``: :func:`~mirror_lib.replication.translate.load_segments`, the whole topic (what
  `mirror verify` reads, and what every checkpoint round, `mirror translate` and `mirror cutover`
  read before they read back);
- ``back N``: :func:`~mirror_lib.replication.translate.scan_segments` for groups N records
  behind the head;
- ``job``: three checkpoint cycles of :class:`~mirror_lib.replication.segment_view.SegmentView`
  with a busy group 1,000 records behind the head that moves 500 records per cycle and an idle
  group at offset 5,000: the first cycle reads back to the idle group, the next ones only what is
  new.

Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.procs import mirror_props
from mirror_lib.config.parse import parse_config
from mirror_lib.replication.context import FlowContext
from mirror_lib.testing.embedded import start_brokers, stop_brokers
from mirror_lib.testing.kafka_io import create_topic

TOPIC, PER_COMMIT = "orders", 100


def _ctx(source: str, target: str) -> FlowContext:
    props = mirror_props(source, target, Path(tempfile.mkdtemp()), TOPIC)
    return FlowContext.create(parse_config(props), "A->B")


def fill(ctx: FlowContext, target: str, commits: int, partitions: int) -> float:
    """The metrics events of ``commits`` transactions per partition; seconds taken."""
    from confluent_kafka import Producer

    create_topic(target, ctx.metrics_topic, 1)
    producer = Producer({"bootstrap.servers": target, "linger.ms": 50, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    started = time.monotonic()
    common = {"flow": "A->B", "source": "A", "target": "B", "ts_ms": 1, "topic": TOPIC,
              "remote_topic": f"A.{TOPIC}"}  # fmt: skip
    for c in range(commits):
        us, ds = c * PER_COMMIT, c * (PER_COMMIT + 1)
        for p in range(partitions):
            batch = {"type": "batch", **common, "partition": p, "batch_id": c, "slot": 0,
                     "records": PER_COMMIT, "bytes": 200 * PER_COMMIT, "upstream_first": us,
                     "upstream_last": us + PER_COMMIT - 1, "downstream_first": ds,
                     "downstream_last": ds + PER_COMMIT - 1, "lag": 0, "latency_ms": 12.5,
                     "age_ms": 3.0, "latency_ms_buckets": [0, 5, 90, 5, 0, 0, 0, 0], "txn": c,
                     "aborted": 0}  # fmt: skip
            segs = {"type": "segments", **common, "partition": p, "batch_id": c,
                    "segments": [[us, us + PER_COMMIT - 1, ds, ds + PER_COMMIT - 1]]}  # fmt: skip
            for event in (batch, segs):
                producer.produce(ctx.metrics_topic, json.dumps(event, separators=(",", ":")))
        producer.poll(0)
        while len(producer) > 500_000:
            producer.poll(0.1)
    producer.flush(120)
    return time.monotonic() - started


def measure(method: str, source: str, target: str, commits: int, partitions: int) -> dict:
    """One reader, in this process."""
    from mirror_lib.replication import translate  # an engine without scan_segments: whole only

    ctx = _ctx(source, target)
    head = commits * PER_COMMIT
    tps = [(TOPIC, p) for p in range(partitions)]
    started = time.monotonic()
    out: dict = {"method": method}
    if method == "whole":
        indexes = translate.load_segments(ctx, timeout_s=600)
        out["segments"] = sum(len(i.segments) for i in indexes.values())
    elif method.startswith("back"):
        behind = int(method.split()[1])
        scan = translate.scan_segments(
            ctx, {tp: max(head - behind, 0) for tp in tps}, timeout_s=600
        )
        out["segments"] = sum(len(i) for i in scan.indexes.values())
    else:
        from mirror_lib.replication.segment_view import SegmentView

        view, cycles = SegmentView(), []
        for cycle in range(3):
            offsets = {("busy", tp): head - 1000 + 500 * cycle for tp in tps}
            offsets |= {("idle", tp): 5000 for tp in tps}
            t0 = time.monotonic()
            view.update(ctx, offsets)
            view.settle(offsets)
            cycles.append(f"{time.monotonic() - t0:.2f}")
        out["segments"] = sum(len(i) for i in view.indexes.values())
        out["cycles"] = " / ".join(cycles)
    out["seconds"] = time.monotonic() - started
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument(
        "--readers",
        default="whole,back 1000,back 100000,back 1000000,job",
        help="comma-separated, of: whole, back N, job",
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: one reader
    parser.add_argument("--bootstrap", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        src, tgt = args.bootstrap
        print(json.dumps(measure(args.measure, src, tgt, args.commits, args.partitions)))
        return 0
    brokers = start_brokers(2)
    try:
        src, tgt = (b.bootstrap_servers for b in brokers)
        records = args.commits * args.partitions * 2
        took = fill(_ctx(src, tgt), tgt, args.commits, args.partitions)
        print(f"metrics topic: {records:,} records ({args.commits:,} commits x "
              f"{args.partitions} partitions x 2 events), written in {took:.1f} s\n")  # fmt: skip
        print("| reader | seconds | segments held | peak RSS MB | cycles s |")
        print("| --- | ---: | ---: | ---: | --- |")
        for method in args.readers.split(","):
            sizes = ["--commits", str(args.commits), "--partitions", str(args.partitions)]
            cmd = [sys.executable, __file__, "--measure", method, "--bootstrap", src, tgt, *sizes]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
            if done.returncode != 0:
                print(f"| {method} | failed: {done.stderr.strip().splitlines()[-1:]} | | | |")
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"| {row['method']} | {row['seconds']:.1f} | {row['segments']:,} | "
                  f"{row['peak_rss_mb']:.0f} | {row.get('cycles', '')} |", flush=True)  # fmt: skip
    finally:
        stop_brokers(brokers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
