#!/usr/bin/env python
"""How long stopping a flow takes while its slice's copy task runs, by Spark's
``spark.python.task.killTimeout`` (the local session's 0 s against Spark's default 2 s).

A stop returns once the copy task has ended (:func:`~mirror_lib.spark.progress.stop_query`), and
a copy task ends only when Spark's monitor kills its Python worker: the monitor looks every 2 s
and then waits the kill timeout. Each timeout runs in a process of its own (its own local
session: the timeout is fixed when the session starts), against the same two single-node
Apache Kafka clusters; the order of the timeouts alternates between repetitions. Before each
start a record is written to the source; a stop is asked once the copy task has copied it (the
target's end moved) and is timed from the call to its return.

    .venv/bin/python bench/stopping.py                    # 0s and 2s, 3 repetitions of 5 stops
    .venv/bin/python bench/stopping.py --timeouts 0s,1s,2s --reps 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaException

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.curves import table
from bench.kafka_data import high_watermark
from bench.procs import log, mirror_props

TOPIC = "stopped"
WAIT_S = 120.0  # for a copy task to copy its record


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--timeouts", default="0s,2s", help="kill timeouts, comma-separated")
    p.add_argument("--reps", type=int, default=3, help="repetitions of every timeout")
    p.add_argument("--stops", type=int, default=5, help="stops in each repetition")
    p.add_argument("--child", nargs=3, metavar=("TIMEOUT", "A", "B"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.values = [t.strip() for t in args.timeouts.split(",") if t.strip()]
    if not args.values:
        p.error(f"--timeouts {args.timeouts!r}: one or more Spark times, e.g. 0s,2s")
    if args.reps < 1 or args.stops < 1:
        p.error(f"--reps {args.reps} --stops {args.stops}: each must be 1 or more")
    return args


def stop_times(timeout: str, a: str, b: str, stops: int) -> list[float]:
    """Start and stop one flow ``stops`` times on a session with this kill timeout."""
    from mirror_lib.config.parse import parse_config
    from mirror_lib.spark.flow_runner import FlowRunner
    from mirror_lib.spark.session import local_spark_session
    from mirror_lib.testing.kafka_io import produce_exact

    state = Path(tempfile.mkdtemp(prefix="stopping-"))
    extra = {"tasks.max": "1", "mirror.tables.enabled": "false"}
    config = parse_config(mirror_props(a, b, state, TOPIC, **extra))
    spark = local_spark_session("bench-stopping", **{"spark.python.task.killTimeout": timeout})
    took = []
    try:
        for _ in range(stops):
            before = _copied(b)
            produce_exact(a, TOPIC, [{"value": b"x", "partition": 0}])
            runner = FlowRunner.of(spark, config, "A->B")
            runner.start()
            deadline = time.monotonic() + WAIT_S
            while _copied(b) <= before:  # the copy task is in its loop
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the copy task copied nothing within {WAIT_S:g} s")
                time.sleep(0.05)
            started = time.monotonic()
            runner.stop()
            took.append(time.monotonic() - started)
    finally:
        spark.stop()
    return took


def _copied(b: str) -> int:
    """The end of the remote topic on B; -1 before it exists."""
    try:
        return high_watermark(b, f"A.{TOPIC}", 0)
    except KafkaException:
        return -1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        timeout, a, b = args.child
        print(json.dumps(stop_times(timeout, a, b, args.stops)), flush=True)
        return 0
    from mirror_lib.testing.clusters import start_clusters
    from mirror_lib.testing.kafka_io import create_topic

    clusters = start_clusters(["A", "B"], Path(tempfile.mkdtemp(prefix="stopping-")), "kafka")
    took: dict[str, list[float]] = {t: [] for t in args.values}
    try:
        a, b = clusters.bootstraps["A"], clusters.bootstraps["B"]
        create_topic(a, TOPIC, 1)
        for rep in range(args.reps):
            order = args.values if rep % 2 == 0 else list(reversed(args.values))
            for timeout in order:
                child = [sys.executable, __file__, "--stops", str(args.stops)]
                out = subprocess.run(
                    [*child, "--child", timeout, a, b],
                    capture_output=True, text=True, check=True, timeout=WAIT_S * 2 * args.stops,
                )  # fmt: skip
                seconds = json.loads(out.stdout.strip().splitlines()[-1])
                took[timeout] += seconds
                log(
                    f"rep {rep + 1}: killTimeout {timeout}: "
                    + " ".join(f"{s:.2f}" for s in seconds)
                )
    finally:
        clusters.stop()
    rows = [
        {
            "killTimeout": t,
            "stops": len(v),
            "median (s)": f"{statistics.median(v):.2f}",
            "min-max (s)": f"{min(v):.2f}-{max(v):.2f}",
        }
        for t, v in took.items()
    ]
    print(f"\nStopping a flow while its slice's task runs, {args.reps} repetitions:\n")
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
