#!/usr/bin/env python
"""Replication benchmark: hand-written confluent-kafka copy loop vs. the mirror flow (Spark).

Starts two brokers (source A, target B) on 127.0.0.1 (Apache Kafka; ``--broker tansu``: tansu),
loads the same data once per case and times, on the same brokers and data:

(a)   a single-process consume->produce loop (``baseline`` subcommand, run as a subprocess),
(c)   the engine's copy loop without Spark (``copier`` subcommand, also a subprocess),
(b)   ``python -m mirror_lib.app.cli run CONFIG --once`` (exactly-once, the default),
(b')  the same with ``mirror.delivery = at_least_once``,
(b'') exactly-once with ``tasks.max = 4`` (200 B case only; see the README),

then a steady-load latency run (``mirror run --duration``, trigger interval 0.5 s).

Every copy is verified by reading the copied topic to end-of-partition (read_committed) and
comparing per-partition record counts and a CRC32 chain over key+value with the source.

    .venv/bin/python bench/replication.py            # whole run (~50 min): bench/results.md
    .venv/bin/python bench/replication.py --quick    # smoke run (~20 min), prints only

This file is the entry point only; the benchmark is the package ``bench`` (cases in
``bench/cases.py``, the one runner in ``bench/runner.py``; see bench/README.md "Files").
Everything started (brokers, mirror process groups, the baseline subprocess) is stopped on exit,
also on errors, Ctrl-C, SIGTERM and the ``--max-minutes`` watchdog. The benchmark process makes
itself a child subreaper, so processes orphaned by the JVM/pyspark are reaped and accounted here.
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, sys.path[0] is bench/: the repository root instead, so that `bench` is a
    # package and its modules do not shadow top-level ones.
    sys.path[0] = str(Path(__file__).resolve().parents[1])
    from bench.cli import main

    sys.exit(main())
