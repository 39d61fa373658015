"""What the benchmark runs, as data: the cases, the copy methods per case, the steady-load runs.

A case is a topic loaded once on the source; each of its methods copies it to the target and
becomes one row of the throughput table. The steady-load runs measure latency under a fixed rate.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Method:
    """One way of copying a case's topic: a row of the throughput table."""

    label: str  # the row's method column
    # "baseline" | "tuned" | "copier" (internal subcommands) | "mirror" (`mirror run`)
    # | "mm2" (MirrorMaker 2) | "spark-kafka" (Spark's Kafka connector)
    kind: str
    # flow properties (kind mirror), mm2.properties (kind mm2), added over the bench's own
    overrides: dict[str, str] = field(default_factory=dict)
    variant: str = ""  # the variant `--no-<variant>` leaves out ("" = always run)
    peer: str = ""  # the peer (bench.peers.PEERS) the row is run with ("" = always run)
    mm2_eos: bool = False  # kind mm2: with Connect's exactly-once source support


ALO = {"mirror.delivery": "at_least_once"}
BASELINE = Method("baseline loop (a)", "baseline")
# (a) with the engine's two prefetch settings (replication/copy/source_reader.py make_consumer):
# librdkafka's 1 s fetch-queue backoff slows any loop that ever fills its consume queue; and
# produce() with positional arguments, as the engine's writer calls it
TUNED = Method("tuned loop (a')", "tuned", variant="tuned")
COPIER = Method("engine copier, no Spark (c)", "copier", variant="copier")
MIRROR_EOS = Method("mirror EOS (b)", "mirror")  # the engine's defaults: no tuning at all
MIRROR_ALO = Method("mirror ALO (b')", "mirror", ALO, "alo")
MIRROR_TASKS4 = Method("mirror EOS tasks.max=4 (b'')", "mirror", {"tasks.max": "4"}, "tasks4")
# MM2's default slot count, so that the pair compares the same tasks.max
MIRROR_TASKS1 = Method("mirror EOS tasks.max=1 (b1)", "mirror", {"tasks.max": "1"}, "", "mm2")
MM2_DEFAULTS = Method("MM2 defaults, tasks.max=1 (m)", "mm2", {}, "", "mm2")
MM2_TASKS4 = Method("MM2 tasks.max=4 (m'')", "mm2", {"tasks.max": "4"}, "tasks4", "mm2")
MM2_EOS = Method("MM2 EOS tasks.max=1 (m-eos)", "mm2", {}, "", "mm2", mm2_eos=True)
SPARK_KAFKA = Method("Spark Kafka connector (s)", "spark-kafka", {}, "", "spark-kafka")
METHODS = (  # the order of the rows
    BASELINE,
    TUNED,
    COPIER,
    MIRROR_EOS,
    MIRROR_ALO,
    MIRROR_TASKS1,
    MIRROR_TASKS4,
    MM2_DEFAULTS,
    MM2_TASKS4,
    MM2_EOS,
    SPARK_KAFKA,
)


@dataclass(frozen=True)
class Case:
    """A topic of ``records`` records of ``size`` bytes, copied by each of ``methods``."""

    name: str
    topic: str
    records: int
    size: int
    methods: tuple[Method, ...]


@dataclass(frozen=True)
class SteadyRun:
    """A steady-load latency run of ``kind`` (as :class:`Method`: mirror, mm2, spark-kafka) with
    these properties."""

    label: str
    overrides: dict[str, str] = field(default_factory=dict)
    kind: str = "mirror"
    peer: str = ""
    mm2_eos: bool = False
    variant: str = ""  # as Method.variant
    roll: bool = False  # a rolling restart of B during the load (``--brokers 3``)


STEADY_TRIGGER = {"mirror.trigger.interval.seconds": "0.5"}  # every steady run
STEADY_DEFAULT = SteadyRun("default: all queries of `mirror run`")
STEADY_LEAN = SteadyRun(
    "replication query only (checkpoints, heartbeats off)",
    {"emit.checkpoints.enabled": "false", "emit.heartbeats.enabled": "false"},
)
STEADY_ALO = SteadyRun(
    "at least once (`mirror.delivery = at_least_once`), as MM2's default", ALO, variant="alo"
)
# at MM2's default slot count, so that the pairs with MM2 compare the same tasks.max: at a low
# rate each slot adds its own fetches, produce requests and commits to the brokers' load
STEADY_TASKS1 = SteadyRun("exactly once, tasks.max=1", {"tasks.max": "1"}, peer="mm2")
STEADY_ALO_TASKS1 = SteadyRun(
    "at least once, tasks.max=1", {**ALO, "tasks.max": "1"}, peer="mm2", variant="alo"
)
STEADY_MM2 = SteadyRun("MM2 defaults, tasks.max=1", {}, "mm2", "mm2")
STEADY_MM2_EOS = SteadyRun("MM2 EOS, tasks.max=1", {}, "mm2", "mm2", mm2_eos=True)
# on three-broker clusters (``--brokers 3``): each broker of B restarted in turn under the load
STEADY_ROLL = SteadyRun("exactly once, rolling restart of B", roll=True)
STEADY_MM2_EOS_ROLL = SteadyRun(
    "MM2 EOS, tasks.max=1, rolling restart of B", {}, "mm2", "mm2", mm2_eos=True, roll=True
)
STEADY_SPARK_KAFKA = SteadyRun(
    "Spark Kafka connector, processingTime 0.5 s", {}, "spark-kafka", "spark-kafka"
)


def variants(args: argparse.Namespace) -> list[str]:
    """The optional methods this run includes, in the order alo, tasks4, copier, tuned."""
    off = {
        "alo": args.no_alo,
        "tasks4": args.no_tasks4,
        "copier": args.no_copier,
        "tuned": args.no_tuned,
    }
    return [name for name, skipped in off.items() if not skipped]


def peers(args: argparse.Namespace) -> list[str]:
    """The peers this run compares with (``--peers`` less ``--no-mm2`` / ``--no-spark-kafka``),
    in the order of bench.peers.PEERS; an unknown name is an error."""
    from bench.peers import PEERS

    named = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in named if p not in PEERS]
    if unknown:
        raise ValueError(f"--peers {args.peers!r}: unknown {unknown}; valid: {', '.join(PEERS)}")
    off = {"mm2": args.no_mm2, "spark-kafka": args.no_spark_kafka}
    return [p for p in PEERS if p in named and not off[p]]


def plan(args: argparse.Namespace) -> tuple[list[Case], list[SteadyRun]]:
    """The cases and steady runs that ``--cases``, ``--peers`` and the ``--no-*`` flags select."""
    chosen = {c.strip() for c in args.cases.split(",")}
    on, with_peers = set(variants(args)), set(peers(args))

    def methods(allowed: set[str]) -> tuple[Method, ...]:
        return tuple(
            m
            for m in METHODS
            if (not m.variant or m.variant in allowed) and (not m.peer or m.peer in with_peers)
        )

    cases = []
    if "200B" in chosen:
        cases.append(Case("200B", "bench200", args.records, 200, methods(on)))
    if "10KB" in chosen:  # tasks.max=4 for 10 KB records only beside MM2's
        allowed = on if "mm2" in with_peers else on - {"tasks4"}
        cases.append(Case("10KB", "bench10k", args.big_records, 10_240, methods(allowed)))
    steady = []
    if "steady" in chosen:
        steady.append(STEADY_DEFAULT)
        if not args.no_steady_lean:
            steady.append(STEADY_LEAN)
        runs = (
            STEADY_ALO,
            STEADY_TASKS1,
            STEADY_ALO_TASKS1,
            STEADY_MM2,
            STEADY_MM2_EOS,
            STEADY_SPARK_KAFKA,
        )
        if getattr(args, "brokers", 1) > 1:
            runs += (STEADY_ROLL, STEADY_MM2_EOS_ROLL)
        if getattr(args, "rolls_only", False):
            steady, runs = [], (STEADY_ROLL, STEADY_MM2_EOS_ROLL)
        steady += [
            r
            for r in runs
            if (not r.variant or r.variant in on) and (not r.peer or r.peer in with_peers)
        ]
    return cases, steady
