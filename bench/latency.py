#!/usr/bin/env python
"""Latency bench: end-to-end latency at a steady rate, MirrorMaker 2 beside `mirror run`, over
repetitions (`make bench-latency`; bench/README.md, "Latency").

Per repetition, every contestant gets a fresh pair of Apache Kafka brokers (source A, target B;
``mirror_lib.testing``, Kafka's own JVM options) and a topic ``probe`` of 4 partitions; MM2
and ours of a pair read the same ``mm2.properties`` (:data:`PAIRS`). Once the tool copies (a
record per partition is on B), ``bench.probe`` loads ``--rate`` records/s of ``--size`` bytes
for ``--warm`` + ``--seconds`` and times every record with its own one-record-a-poll
``read_committed`` consumer; both in processes of their own. The first ``--warm`` seconds are
left out. The probe's floor (load and consumer on one broker, nothing copied) runs in each
repetition too; ``--floor-loaded`` adds one on B while A takes the same load and a consumer
reads it, as in a contestant's run. Machine CPU, the tool's and the brokers' are taken over the
measured window (``bench.measure``). For ours, the copy task writes its timing log
(:mod:`mirror_lib.replication.copy.txn_timing`) and the records above the run's p99 are split
into stages (``bench.tail``). ``loop-eos1`` is no tool: a hand-written transactional
consume-produce loop (``bench.loops``, a commit every 20 ms), what the simplest exactly-once copy
gets from the same brokers on the same machine.

With ``--brokers 3`` each cluster is three KRaft nodes with replication factor 3 and
``min.insync.replicas = 2``; ``--roll`` restarts B's brokers one by one (``bench.roll``) from
:data:`ROLL_LEAD_S` into the measured window, so the figures, and the stages of the records
above the p99, are those of a rolling restart.

    .venv/bin/python bench/latency.py                       # 6 contestants + floor, 5 times
    .venv/bin/python bench/latency.py --reps 1 --seconds 15 --warm 5 --contestants ours,mm2
    .venv/bin/python bench/latency.py --brokers 3 --roll --seconds 120 --no-floor \
        --contestants ours-eos1,mm2-eos1 --reps 3
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import probe, tail
from bench.curves import table
from bench.engine import SCRIPT
from bench.kafka_data import PARTITIONS, TailWatch, create_topic, last_records, value_pool
from bench.measure import Meter, broker_cpu_s, cpu_canary_ms, machine_cpu_and_steal_s
from bench.methods import mirror_cmd
from bench.peers import mm2_command, mm2_eos, mm2_properties
from bench.procs import REPLICATION_ENV, Lines, log, popen, stop_group, write_props
from bench.roll import Roll
from bench.steady import send_singles

TOPIC = "probe"
REMOTE = f"A.{TOPIC}"
ALO = {"mirror.delivery": "at_least_once"}
ROLL_LEAD_S = 10.0  # from the measured window's start to the roll's first stop
ROLL_MIN_SECONDS = 90  # three brokers in turn take 60-90 s here (bench/README.md, "Latency")


@dataclass(frozen=True)
class Contestant:
    """One tool (``mm2``, ``mirror``, or the bench's own transactional ``loop``) on the
    properties of one of :data:`PAIRS` (the loop's are its own: it stands for the pair's
    guarantee)."""

    name: str  # its --contestants name
    label: str
    kind: str
    pair: str


#: the properties both tools of a pair read, over MM2's single-node defaults (``eos`` adds
#: Connect's exactly-once support, which ours ignores: it reads its own delivery setting)
PAIRS: dict[str, dict[str, str]] = {
    "defaults": {},
    "alo1": {"tasks.max": "1", **ALO},
    "eos1": {"tasks.max": "1"},
}
CONTESTANTS = (
    Contestant("mm2", "MM2 defaults (at least once, tasks.max = 1)", "mm2", "defaults"),
    Contestant("ours", "ours defaults (exactly once, 2 slots)", "mirror", "defaults"),
    Contestant("mm2-alo1", "MM2 at least once, tasks.max = 1", "mm2", "alo1"),
    Contestant("ours-alo1", "ours at least once, tasks.max = 1", "mirror", "alo1"),
    Contestant("mm2-eos1", "MM2 exactly once, tasks.max = 1", "mm2", "eos1"),
    Contestant("ours-eos1", "ours exactly once, tasks.max = 1", "mirror", "eos1"),
    Contestant(
        "loop-eos1", "a transactional consume-produce loop (bench.loops, eos-loop)", "loop", "eos1"
    ),
)
FLOOR = "floor"
FLOOR_LABEL = "probe floor (one broker, nothing copied)"
FLOOR_LABEL_3 = "probe floor (on B, A beside it, nothing copied)"
FLOOR_LOADED = "floor-loaded"
FLOOR_LOADED_LABEL = "probe floor (on B, A loaded beside it, nothing copied)"
FIGURES = (
    "p50_ms", "p99_ms", "max_ms", "machine_cores", "own_cores", "target_cores",
    "commits_per_s", "source_ack_p50_ms", "source_ack_p99_ms", "after_ack_p50_ms",
    "after_ack_p99_ms", "steal_cores", "canary_ms",
)  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    names = [c.name for c in CONTESTANTS]
    p.add_argument(
        "--contestants",
        default=",".join(names),
        help=f"comma-separated, of {', '.join(names)} (default: all)",
    )
    p.add_argument("--reps", type=int, default=5, help="repetitions of every contestant")
    p.add_argument("--rate", type=float, default=5_000, help="records/s of the load")
    p.add_argument("--size", type=int, default=200, help="bytes of each record's value")
    p.add_argument("--seconds", type=float, default=60, help="the measured window")
    p.add_argument("--warm", type=float, default=15, help="seconds of load left out first")
    p.add_argument("--no-floor", action="store_true", help="skip the probe's floor")
    p.add_argument(
        "--floor-loaded",
        action="store_true",
        help="also the probe's floor with A taking the same load and read meanwhile, as in a "
        "contestant's run (needs --brokers 3)",
    )
    p.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="brokers a cluster: 1, or 3 (replication factor 3, min.insync.replicas 2)",
    )
    p.add_argument(
        "--roll",
        action="store_true",
        help=f"restart B's brokers one by one from {ROLL_LEAD_S:g} s into the measured window "
        "(needs --brokers 3)",
    )
    p.add_argument("--keep", action="store_true", help="keep the brokers' data of every run")
    p.add_argument("--out", type=Path, default=None, help="results folder (default: a temp dir)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property over every contestant's (MM2 ignores mirror.* ones); repeatable",
    )
    args = p.parse_args(argv)
    chosen = [c.strip() for c in args.contestants.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in names]
    if unknown or not chosen:
        p.error(f"--contestants {args.contestants!r}: unknown {unknown}; valid: {', '.join(names)}")
    for flag in ("reps", "rate", "size", "seconds"):
        if getattr(args, flag) <= 0:
            p.error(f"--{flag} {getattr(args, flag)}: must be above 0")
    if args.warm < 0:
        p.error(f"--warm {args.warm}: must be 0 or more")
    _check_clusters(p, args)
    args.chosen = [c for c in CONTESTANTS if c.name in chosen]
    args.props = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            p.error(f"--set {item!r}: KEY=VALUE, e.g. mirror.commit.interval.ms=50")
        args.props[key.strip()] = value.strip()
    return args


def _check_clusters(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--brokers`` and what needs three of them: ``--roll`` (with a window that holds it) and
    ``--floor-loaded``."""
    if args.brokers not in (1, 3):
        p.error(f"--brokers {args.brokers}: must be 1 or 3")
    for flag, why in (("roll", "a rolling restart of one broker"), ("floor_loaded", "A beside B")):
        if getattr(args, flag) and args.brokers != 3:
            name = "--" + flag.replace("_", "-")
            p.error(f"{name} needs --brokers 3 ({why}); got {args.brokers}")
    if args.roll and args.seconds < ROLL_MIN_SECONDS:
        p.error(
            f"--seconds {args.seconds:g} with --roll: at least {ROLL_MIN_SECONDS}, so the "
            "window holds the whole roll"
        )


# -- the pure parts ---------------------------------------------------------------------------
def _load(args: argparse.Namespace) -> probe.Load:
    """The load every run of this bench produces, from its flags."""
    return probe.Load(TOPIC, PARTITIONS, args.rate, args.seconds, args.warm, args.size)


def spread(values: list[float | None]) -> dict[str, float | None]:
    """Median, min and max of the repetitions' values (None ones left out)."""
    kept = [v for v in values if v is not None]
    if not kept:
        return {"median": None, "min": None, "max": None}
    return {
        "median": round(statistics.median(kept), 2),
        "min": round(min(kept), 2),
        "max": round(max(kept), 2),
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per contestant (in the order of ``runs``): each figure's median and spread over its
    repetitions, and its tail records' stages pooled over them (``tail.quantiles``)."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["contestant"] for r in runs):
        mine = [r for r in runs if r["contestant"] == name]
        entry: dict[str, Any] = {
            "label": mine[0]["label"],
            "reps": len(mine),
            "complete": sum(1 for r in mine if r["received"] == r["records"]),
        }
        for fig in FIGURES:
            entry[fig] = spread([r.get(fig) for r in mine])
        for key, rows_key in (("tail", "tail_stages"), ("sample", "sample_stages")):
            rows = [row for r in mine for row in r.get(rows_key, [])]
            if rows:
                entry[key] = tail.quantiles(rows)
        rolls = [r["roll"] for r in mine if r.get("roll")]
        if rolls:
            entry["rolls"] = rolls
        out[name] = entry
    return out


def cell(s: dict[str, float | None], digits: int = 1) -> str:
    """``median (min-max)`` of a :func:`spread`."""
    if s["median"] is None:
        return "-"
    if s["min"] == s["max"]:
        return f"{s['median']:.{digits}f}"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def markdown(summary: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    """The results as Markdown: latency and CPU per contestant, then the tail's stages."""
    base = summary.get("mm2", {}).get("machine_cores", {}).get("median")
    rows = []
    for entry in summary.values():
        cores = entry["machine_cores"]
        ratio = f"{cores['median'] / base:.2f}x" if base and cores["median"] else "-"
        rows.append({
            "": entry["label"],
            "p50": cell(entry["p50_ms"]),
            "p99": cell(entry["p99_ms"]),
            "max": cell(entry["max_ms"], 0),
            "machine CPU (cores)": cell(cores, 2),
            "tool + brokers (cores)": cell(entry["own_cores"], 2),
            "target broker (cores)": cell(entry["target_cores"], 2),
            "commits/s a partition": cell(entry["commits_per_s"]),
            "/ MM2 defaults": ratio,
            "source ack p50 / p99": (
                f"{cell(entry['source_ack_p50_ms'])} / {cell(entry['source_ack_p99_ms'])}"
            ),
            "after the ack p50 / p99": (
                f"{cell(entry['after_ack_p50_ms'])} / {cell(entry['after_ack_p99_ms'])}"
            ),
            "host steal (cores)": cell(entry["steal_cores"], 2),
            "CPU canary (ms)": cell(entry["canary_ms"]),
            "runs complete": f"{entry['complete']}/{entry['reps']}",
        })  # fmt: skip
    if not rows:
        return "No run completed.\n"
    shape = (
        "three brokers a cluster (replication factor 3, min.insync.replicas 2)"
        if args.brokers == 3
        else "one broker a cluster"
    )
    if args.roll:
        shape += f", B restarted broker by broker from {ROLL_LEAD_S:g} s into the window"
    text = (
        f"Latency: {args.rate:g} records/s x {args.size} B over {PARTITIONS} partitions, "
        f"{args.warm:g} s left out, then {args.seconds:g} s measured; {args.reps} repetition(s), "
        f"fresh brokers for each run, {shape}. Milliseconds, median of the repetitions "
        "(min-max).\n\n" + table(rows, list(rows[0]))
    )
    text += stage_table(summary, "sample", "every 100th record", ("mean", "median"))
    text += stage_table(summary, "tail", "records above the p99", ("median", "p90"))
    return text + roll_lines(summary)


def roll_lines(summary: dict[str, dict[str, Any]]) -> str:
    """When each of B's brokers went down and was back in sync, per run (seconds from the
    measured window's start); "" without a roll."""
    lines = []
    for entry in summary.values():
        for i, roll in enumerate(entry.get("rolls", []), 1):
            steps = ", ".join(f"{what} {node} {at:g}" for what, node, at in roll["events"])
            lines.append(f"- {entry['label']}, run {i}: {steps}")
    if not lines:
        return ""
    return "\nThe roll of B (s from the window's start):\n\n" + "\n".join(lines) + "\n"


def stage_table(
    summary: dict[str, dict[str, Any]], key: str, first: str, figures: tuple[str, str]
) -> str:
    """Where the records of ``key`` (``sample`` or ``tail``) spent their time, two
    ``figures`` of each stage per contestant that has them; "" when none has."""
    pooled = {e["label"]: e[key] for e in summary.values() if e.get(key)}
    if not pooled:
        return ""
    stages = [s for s in tail.STAGES if any(s in t for t in pooled.values())]
    rows = []
    for label, t in pooled.items():
        row = {first: label}
        for s in stages:
            q = t.get(s)
            row[s] = f"{q[figures[0]]:.1f} / {q[figures[1]]:.1f}" if q else "-"
        row["records"] = str(max((q["records"] for q in t.values()), default=0))
        rows.append(row)
    what = {
        "sample": "every 100th record spent its time",
        "tail": "the records above each run's p99 spent their time",
    }[key]
    return (
        f"\nWhere {what} (ms, {' / '.join(figures)} over all repetitions; "
        'bench/README.md, "Latency"):\n\n' + table(rows, [first, *stages, "records"])
    )


# -- a run ------------------------------------------------------------------------------------
class CpuWindow:
    """Machine, tool and broker CPU between ``lead_s`` and ``lead_s + seconds`` after
    :meth:`start` (the probe's measured window), in cores, and what the host's hypervisor
    took from the machine meanwhile (steal)."""

    def __init__(
        self,
        meter: Meter | None,
        broker_pids: list[int],
        lead_s: float,
        seconds: float,
        target_pids: list[int] | None = None,
    ):
        self.meter, self.broker_pids = meter, broker_pids
        self.target_pids = target_pids or []
        self.lead_s, self.seconds = lead_s, seconds
        self.marks: list[tuple[float, float, float, float, float]] = []
        self.targets: list[float] = []  # the target broker's CPU at each mark
        self.epoch_ms: list[float] = []  # the wall clock at each mark
        self._thread = threading.Thread(target=self._run, name="cpu-window", daemon=True)
        self._stop = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def _mark(self) -> None:
        tool = self.meter.sampler.cpu_total() if self.meter else 0.0
        busy, steal = machine_cpu_and_steal_s()
        self.marks.append((time.monotonic(), busy, tool, broker_cpu_s(self.broker_pids), steal))
        self.targets.append(broker_cpu_s(self.target_pids))
        self.epoch_ms.append(time.time() * 1000.0)

    def _run(self) -> None:
        if self._stop.wait(self.lead_s):
            return
        self._mark()
        if not self._stop.wait(self.seconds):
            self._mark()

    def result(self) -> dict[str, float | None]:
        self._stop.set()
        if self._thread.ident is not None:  # not started when the probe failed first
            self._thread.join(5)
        if len(self.marks) < 2:
            return dict.fromkeys(
                ("machine_cores", "tool_cores", "broker_cores", "own_cores", "steal_cores")
                + (("target_cores",) if self.target_pids else ())
            )
        (t0, m0, c0, b0, s0), (t1, m1, c1, b1, s1) = self.marks
        span = t1 - t0
        target = {}
        if self.target_pids:
            target["target_cores"] = round((self.targets[1] - self.targets[0]) / span, 3)
        return {
            **target,
            "machine_cores": round((m1 - m0) / span, 3),
            "tool_cores": round((c1 - c0) / span, 3) if self.meter else None,
            "broker_cores": round((b1 - b0) / span, 3),
            # what the copy cost, whatever else ran on the machine (the probe's processes not)
            "own_cores": round((c1 - c0 + b1 - b0) / span, 3),
            "steal_cores": round((s1 - s0) / span, 3),
        }


def start_brokers(aliases: tuple[str, ...], work: Path, count: int) -> Any:
    """Fresh clusters of ``count`` brokers; every topic of the run, the tools' own included,
    at their replication factor."""
    from mirror_lib.testing.clusters import start_clusters

    started = start_clusters(aliases, work / "kafka", "kafka", count)
    os.environ[REPLICATION_ENV] = str(started.replication_factor)
    return started


def nodes_of(brokers: Any, alias: str | None = None) -> list[Any]:
    """The brokers of cluster ``alias`` (None: of every cluster), as started: a three-broker
    cluster's nodes, or its one broker."""
    if alias is None:
        return list(brokers.handles)
    if brokers.clusters:
        return list(brokers.clusters[alias].nodes)
    return [b for b in brokers.handles if b.alias == alias]


def pids_of(brokers: Any, alias: str | None = None) -> list[int]:
    """The broker processes of cluster ``alias`` (None: of every cluster), as started."""
    return [n.pid for n in nodes_of(brokers, alias)]


def run_floor(
    args: argparse.Namespace, work: Path, rep: int, *, loaded: bool = False
) -> dict[str, Any]:
    """The probe alone, nothing copied: on one fresh broker; on three-broker clusters, load and
    consumer both on B with A running beside it, and with ``--roll`` B restarted under them:
    what any client of B sees. ``loaded`` (``floor-loaded``): A takes the same load meanwhile,
    read by a consumer of its own, as in a contestant's run."""
    three = args.brokers > 1
    name, label = FLOOR, FLOOR_LABEL_3 if three else FLOOR_LABEL
    if loaded:
        name, label = FLOOR_LOADED, FLOOR_LOADED_LABEL
    brokers = start_brokers(("source", "target") if three else ("source",), work, args.brokers)
    try:
        boot = brokers.bootstraps["target" if three else "source"]
        pids = pids_of(brokers)
        keep = set(pids)
        create_topic(boot, TOPIC, PARTITIONS)
        beside = brokers.bootstraps["source"] if loaded else None
        if beside is not None:
            create_topic(beside, TOPIC, PARTITIONS)
        background = Meter.with_background(pids, keep).m.background_cores
        log(f"rep {rep + 1}: {label}")
        result, window = probe_window(
            args, brokers, CpuWindow(None, pids, args.warm, args.seconds), keep,
            lambda on_load: probe.floor(boot, _load(args), work / "probe", on_load, beside),
        )  # fmt: skip
        out = {"contestant": name, "label": label, **result.summary(), **window}
        return {**out, "background_cores": background}
    finally:
        brokers.stop()


def wait_copying(src: str, tgt: str, proc: Any, timeout_s: float = 300) -> float:
    """Send one record per partition and wait until the copy on B holds each: the tool copies.
    Returns the seconds it took."""
    started = time.monotonic()
    send_singles(src, TOPIC, value_pool(), "w")
    watch = TailWatch(tgt, REMOTE, last_records(src, TOPIC))
    try:
        while not watch.complete():
            if proc.poll() is not None:
                raise RuntimeError(f"the tool exited ({proc.returncode}) before it copied")
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"nothing copied to {REMOTE} within {timeout_s:.0f} s")
            time.sleep(0.5)
    finally:
        watch.close()
    return time.monotonic() - started


def contestant_command(
    c: Contestant, args: argparse.Namespace, src: str, tgt: str, work: Path
) -> tuple[list[str], int]:
    """The command that runs ``c`` on its pair's properties, and the signal that stops it."""
    props = {
        **mm2_properties(src, tgt, TOPIC),
        "mirror.state.dir": str(work / "state"),
        **PAIRS[c.pair],
        **(mm2_eos() if c.pair == "eos1" else {}),
        **args.props,
    }
    if c.kind == "mm2":
        return mm2_command(props, work / "mm2"), signal.SIGTERM
    if c.kind == "loop":
        flags = ["--source", src, "--target", tgt, "--topic", TOPIC, "--dest", REMOTE]
        return [sys.executable, str(SCRIPT), "eos-loop", *flags], signal.SIGTERM
    cfg = write_props(work / "mm2.properties", props)
    total_s = args.warm + args.seconds
    return mirror_cmd(cfg, "--duration", str(int(total_s + 600))), signal.SIGINT


def probe_window(
    args: argparse.Namespace,
    brokers: Any,
    cpu: CpuWindow,
    keep: set[int],
    run_probe: Callable[[Callable[[], None]], probe.Result],
) -> tuple[probe.Result, dict[str, Any]]:
    """``run_probe`` (given what to call as the load starts), with ``cpu`` over its measured
    part and, with ``--roll``, B's rolling restart from :data:`ROLL_LEAD_S` into it."""
    roll = Roll(brokers.clusters["target"], keep, args.warm + ROLL_LEAD_S) if args.roll else None
    loaded_ms: list[float] = []

    def on_load() -> None:
        loaded_ms.append(time.time() * 1000)
        cpu.start()
        if roll is not None:
            roll.start()

    result = run_probe(on_load)
    window: dict[str, Any] = dict(cpu.result())
    if roll is not None:
        roll.join()
        if roll.error is not None:
            raise RuntimeError(f"the rolling restart of B failed: {roll.error}")
        # a restarted broker is a new process: the brokers' CPU over the window is not known
        # from the pids they started with; the machine's is
        window.update(dict.fromkeys(("broker_cores", "own_cores", "target_cores")))
        window["roll"] = roll.report(loaded_ms[0] + args.warm * 1000)
    return result, window


def run_contestant(c: Contestant, args: argparse.Namespace, work: Path, rep: int) -> dict[str, Any]:
    """One contestant on fresh brokers: start it, wait until it copies, probe, stop."""
    from mirror_lib.replication.copy import txn_timing

    brokers = start_brokers(("source", "target"), work, args.brokers)
    txn_dir = work / "txn"
    proc = None
    try:
        src, tgt = brokers.bootstraps["source"], brokers.bootstraps["target"]
        pids = pids_of(brokers)
        keep = set(pids)  # a broker the roll starts again joins it (bench.roll)
        create_topic(src, TOPIC, PARTITIONS)
        cmd, stop_sig = contestant_command(c, args, src, tgt, work)
        log(f"rep {rep + 1}: {c.label}")
        # others' CPU use on the machine just before (3 s): the context of the run's figures
        with Meter.with_background(pids, keep) as meter:
            with _env(txn_timing.DIR_ENV, str(txn_dir) if c.kind == "mirror" else None):
                proc = popen(cmd, work / f"{c.name}.err")
            meter.sampler.keep.add(proc.pid)  # its Popen reaps it, not the sampler
            meter.attach(proc.pid)
            Lines(proc.stdout, None, work / f"{c.name}.out")
            took = wait_copying(src, tgt, proc)
            log(f"  copying after {took:.1f} s; probing {args.warm:g} + {args.seconds:g} s")
            cpu = CpuWindow(meter, pids, args.warm, args.seconds, pids_of(brokers, "target"))
            result, window = probe_window(
                args, brokers, cpu, keep,
                lambda on_load: probe.run(src, tgt, REMOTE, _load(args), work / "probe", on_load),
            )  # fmt: skip
            stop_group(proc, stop_sig, grace=60)
        out = {"contestant": c.name, "label": c.label, "started_s": round(took, 1)}
        out.update(result.summary())
        out.update(window)
        out["background_cores"] = meter.m.background_cores
        markers = target_markers(brokers)
        out["commits_per_s"] = commits_per_s(markers, cpu.epoch_ms)
        if c.kind == "mirror":
            out.update(tail_of(result, txn_dir, markers))
        return out
    finally:
        if proc is not None:
            stop_group(proc, signal.SIGKILL, grace=5)
        brokers.stop()


def target_markers(brokers: Any) -> dict[int, list[tuple[int, int]]]:
    """Per copied partition, the transaction markers in the target's log (``tail``): on three
    brokers, the first node's replica (a follower keeps the leader's batches as written)."""
    log_dir = Path(nodes_of(brokers, "target")[0].log_dir)
    return {p: tail.commit_markers(log_dir, REMOTE, p) for p in range(PARTITIONS)}


def commits_per_s(
    markers: dict[int, list[tuple[int, int]]], window_ms: list[float]
) -> float | None:
    """Transactions committed per second into each copied partition over the measured window
    (``window_ms``: its start and end), from the target's ``markers``: the rate the tool
    commits at, whichever tool. 0 without transactions."""
    if len(window_ms) < 2:
        return None
    start, end = window_ms
    counts = [sum(1 for _o, ts in markers[p] if start <= ts < end) for p in range(PARTITIONS)]
    return round(statistics.mean(counts) / ((end - start) / 1000.0), 1)


def tail_of(
    result: probe.Result, txn_dir: Path, markers: dict[int, list[tuple[int, int]]]
) -> dict[str, Any]:
    """The stages of the records above the run's p99, and of every 100th record
    (``bench.tail``)."""
    lat = result.by_record()
    records = tail.over_p99(lat, probe.pct(sorted(lat.values()), 99))
    txns = tail.read_txn_log(txn_dir) if txn_dir.is_dir() else {}
    rows = tail.breakdown(records, result, txns, markers, REMOTE, PARTITIONS)
    return {
        "tail_records": len(records),
        "tail_matched": sum(1 for r in rows if r["fetch"] is not None),
        "tail_stages": rows,
        "sample_stages": tail.breakdown(
            tail.every(lat, 100), result, txns, markers, REMOTE, PARTITIONS
        ),
        "transactions_logged": sum(len(v) for v in txns.values()),
    }


@contextlib.contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    """Set one environment variable (None: leave it alone) while a process is started."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def attempt(
    name: str, step: Callable[[Path, int], dict[str, Any]], work: Path, rep: int
) -> dict[str, Any]:
    """One run, and once more on fresh brokers if it failed (on a busy machine a broker can
    miss its start-up deadline); a run that failed twice is told as failed."""
    error = ""
    for n in (1, 2):
        canary = cpu_canary_ms()  # before the run's brokers start: the machine's own speed
        try:
            run = step(work if n == 1 else work.with_name(f"{work.name}-again"), rep)
            return {**run, "rep": rep + 1, "attempts": n, "canary_ms": canary}
        except Exception as exc:  # the next run goes on
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            log(f"rep {rep + 1} {name} failed (attempt {n}): {error}")
    return {"contestant": name, "error": error, "rep": rep + 1, "attempts": 2}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="mirror-latency-"))
    out = args.out or work / "results"
    out.mkdir(parents=True, exist_ok=True)
    log(f"latency: work folder {work}, results in {out}")
    stopping = {"now": False}

    def on_term(*_: Any) -> None:
        stopping["now"] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    runs: list[dict[str, Any]] = []
    steps: list[tuple[str, Callable[[Path, int], dict[str, Any]]]] = []
    if not args.no_floor:
        steps.append((FLOOR, functools.partial(run_floor, args)))
    if args.floor_loaded:
        steps.append((FLOOR_LOADED, functools.partial(run_floor, args, loaded=True)))
    steps += [(c.name, functools.partial(run_contestant, c, args)) for c in args.chosen]
    started = time.monotonic()
    try:
        for rep in range(args.reps):
            for name, step in steps:  # interleaved: a busy minute hits every contestant alike
                run = attempt(name, step, work / f"rep{rep + 1}-{name}", rep)
                runs.append(run)
                brief = {k: v for k, v in run.items() if not k.endswith("_stages")}
                log(f"  {brief}")
                (out / "runs.json").write_text(json.dumps(runs, indent=1))
                if not args.keep:
                    for folder in (f"rep{rep + 1}-{name}", f"rep{rep + 1}-{name}-again"):
                        shutil.rmtree(work / folder / "kafka", ignore_errors=True)
    except KeyboardInterrupt:
        log("stopped early; summarizing the runs done")
    ok = [r for r in runs if "error" not in r]
    summary = summarize(ok)
    text = markdown(summary, args)
    failed = [f"rep {r['rep']} {r['contestant']}: {r['error']}" for r in runs if "error" in r]
    if failed:
        text += "\nFailed runs: " + "; ".join(failed) + "\n"
    text += f"\n{time.monotonic() - started:.0f} s in all.\n"
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.md").write_text(text)
    print(text)
    log(f"results in {out}")
    return 1 if failed or stopping["now"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
