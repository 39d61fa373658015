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
    kind: str  # "baseline" | "tuned" | "copier" (internal subcommands) | "mirror" (`mirror run`)
    overrides: dict[str, str] = field(default_factory=dict)  # flow properties (kind mirror)
    variant: str = ""  # the variant `--no-<variant>` leaves out ("" = always run)


BASELINE = Method("baseline loop (a)", "baseline")
# (a) with the engine's two prefetch settings (replication/copy/source_reader.py make_consumer):
# librdkafka's 1 s fetch-queue backoff slows any loop that ever fills its consume queue; and
# produce() with positional arguments, as the engine's writer calls it
TUNED = Method("tuned loop (a')", "tuned", variant="tuned")
COPIER = Method("engine copier, no Spark (c)", "copier", variant="copier")
MIRROR_EOS = Method("mirror EOS (b)", "mirror")
MIRROR_ALO = Method("mirror ALO (b')", "mirror", {"mirror.delivery": "at_least_once"}, "alo")
MIRROR_TASKS4 = Method("mirror EOS tasks.max=4 (b'')", "mirror", {"tasks.max": "4"}, "tasks4")
METHODS = (BASELINE, TUNED, COPIER, MIRROR_EOS, MIRROR_ALO, MIRROR_TASKS4)  # the order of the rows


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
    """A steady-load latency run of `mirror run --duration` with these flow properties."""

    label: str
    overrides: dict[str, str] = field(default_factory=dict)


STEADY_TRIGGER = {"mirror.trigger.interval.seconds": "0.5"}  # every steady run
STEADY_DEFAULT = SteadyRun("default: all queries of `mirror run`")
STEADY_LEAN = SteadyRun(
    "replication query only (checkpoints, heartbeats off)",
    {"emit.checkpoints.enabled": "false", "emit.heartbeats.enabled": "false"},
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


def plan(args: argparse.Namespace) -> tuple[list[Case], list[SteadyRun]]:
    """The cases and steady runs that ``--cases`` and the ``--no-*`` flags select."""
    chosen = {c.strip() for c in args.cases.split(",")}
    on = set(variants(args))

    def methods(allowed: set[str]) -> tuple[Method, ...]:
        return tuple(m for m in METHODS if not m.variant or m.variant in allowed)

    cases = []
    if "200B" in chosen:
        cases.append(Case("200B", "bench200", args.records, 200, methods(on)))
    if "10KB" in chosen:  # tasks.max=4 only for 200 B records
        cases.append(Case("10KB", "bench10k", args.big_records, 10_240, methods(on - {"tasks4"})))
    steady = []
    if "steady" in chosen:
        steady.append(STEADY_DEFAULT)
        if not args.no_steady_lean:
            steady.append(STEADY_LEAN)
    return cases, steady
