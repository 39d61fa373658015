"""The benchmark's command line: flags, the watchdog and signals, the order of the runs, output.

The internal subcommands ``baseline``, ``copier`` and ``eos-loop`` run one copy loop
(``bench.loops``) in a subprocess of the benchmark (``eos-loop``: of bench/latency.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import fanout, plots
from bench import idle as idle_flow
from bench.cases import peers, plan
from bench.engine import ROOT, export_engine
from bench.loops import EOS_LOOP_TXN_MS, baseline_main, copier_main, eos_loop_main
from bench.measure import make_subreaper, reap_all_orphans
from bench.procs import log
from bench.report import (
    MLFLOW_EXPERIMENT,
    RESULTS,
    facts,
    log_mlflow,
    mlflow_experiment,
    render,
    write_block,
    write_json,
)
from bench.runner import Runner

DESCRIPTION = (
    "Replication benchmark: hand-written confluent-kafka copy loop vs. the mirror flow (Spark)."
)


DEFAULT_CASES = "200B,10KB,steady,idle,failover"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags; ``--quick`` lowers the defaults it finds unchanged."""
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command")
    base = sub.add_parser("baseline", help="(internal) the hand-written copy loop")
    for name in ("--source", "--target", "--topic", "--dest"):
        base.add_argument(name, required=True)
    base.add_argument(
        "--tuned", action="store_true", help="the engine's prefetch and positional produce()"
    )
    cop = sub.add_parser(
        "copier", help="(internal) mirror_lib.replication.copy.copier.copy_slice without Spark"
    )
    for name in ("--source", "--target", "--topic", "--state"):
        cop.add_argument(name, required=True)
    cop.add_argument("--delivery", default="exactly_once")
    eos = sub.add_parser(
        "eos-loop", help="(internal) a transactional consume-produce loop, until stopped"
    )
    for name in ("--source", "--target", "--topic", "--dest"):
        eos.add_argument(name, required=True)
    eos.add_argument("--txn-ms", type=int, default=EOS_LOOP_TXN_MS, help="a commit this often")
    parser.add_argument("--records", type=int, default=4_000_000, help="200 B records")
    parser.add_argument("--big-records", type=int, default=150_000, help="10 KB records")
    parser.add_argument("--steady-seconds", type=float, default=60)
    parser.add_argument("--rate", type=float, default=5_000, help="steady records/s")
    parser.add_argument(
        "--warm-load-seconds",
        type=float,
        default=0,
        help="before each steady load, this long at --rate, left out of the figures (fresh "
        "brokers stall in their first seconds of load)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 200k / 10k records, 10 s steady, no (b') / (b'')",
    )
    parser.add_argument("--no-alo", action="store_true", help="skip (b') at_least_once")
    parser.add_argument("--no-tasks4", action="store_true", help="skip (b'') tasks.max=4")
    parser.add_argument("--no-copier", action="store_true", help="skip (c) copier without Spark")
    parser.add_argument(
        "--no-tuned", action="store_true", help="skip (a') the loop with the engine's prefetch"
    )
    parser.add_argument(
        "--no-steady-lean",
        action="store_true",
        help="skip the second steady run with checkpoints and heartbeats disabled",
    )
    parser.add_argument(
        "--peers",
        default="mm2,spark-kafka",
        help="the tools compared with `mirror run` in the same run: mm2 (MirrorMaker 2),"
        " spark-kafka (Spark's Kafka connector); comma list, '' for none",
    )
    parser.add_argument("--no-mm2", action="store_true", help="leave MirrorMaker 2 out")
    parser.add_argument(
        "--no-spark-kafka", action="store_true", help="leave Spark's Kafka connector out"
    )
    parser.add_argument(
        "--cases",
        default=DEFAULT_CASES,
        help="comma list to run: 200B, 10KB, steady, idle, failover (MM2's checkpoints vs ours),"
        " fanout (three brokers, its own block)",
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=150, help="how long the idle flow's run lasts"
    )
    parser.add_argument(
        "--idle-warm-up", type=float, default=60, help="seconds of the idle run before sampling"
    )
    parser.add_argument(
        "--fanout-records", type=int, default=1_000_000, help="200 B records of the fanout case"
    )
    parser.add_argument(
        "--fanout-max-lag",
        type=int,
        default=None,
        help="mirror.fanout.max.lag.records of the fanout case (default: the engine's)",
    )
    parser.add_argument("--mirror-timeout", type=float, default=None, help="per copy, seconds")
    parser.add_argument("--max-minutes", type=float, default=90, help="watchdog for everything")
    parser.add_argument(
        "--results",
        default=None,
        help="write the results block here (default bench/results.md for a run of every case, "
        "or of the fanout case alone; none with --quick or for other partial runs)",
    )
    parser.add_argument(
        "--broker",
        choices=("kafka", "tansu"),
        default="kafka",
        help="the brokers: Apache Kafka (default; fetched once from Maven Central) or tansu",
    )
    parser.add_argument(
        "--brokers",
        type=int,
        choices=(1, 3),
        default=1,
        help="brokers per cluster: 1, or 3 combined KRaft nodes with replication factor 3 and "
        "min.insync.replicas 2 for every topic (Apache Kafka only); with 3 the steady runs add "
        "a rolling restart of B under the load, ours and MM2's (no results block is written)",
    )
    parser.add_argument(
        "--roll-seconds",
        type=float,
        default=150,
        help="the load of a rolling-restart steady run (long enough for three brokers in turn)",
    )
    parser.add_argument(
        "--rolls-only",
        action="store_true",
        help="with --brokers 3 and --cases steady: only the rolling-restart runs",
    )
    parser.add_argument("--json", default=None, help="also write raw results as JSON here")
    parser.add_argument(
        "--mlflow", action="store_true", help="log the results as MLflow runs (see --mlflow-uri)"
    )
    parser.add_argument(
        "--mlflow-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI")
        or f"sqlite:///{ROOT / 'bench' / 'mlflow.db'}",
        help="tracking URI for --mlflow (default: MLFLOW_TRACKING_URI, else bench/mlflow.db)",
    )
    parser.add_argument(
        "--engine-ref",
        default=None,
        help="benchmark mirror_lib as of this git commit (exported with `git archive` into the "
        "work folder) instead of the working tree, e.g. HEAD while others edit the tree",
    )
    args = parser.parse_args(argv)
    if args.quick:
        defaults = {
            "records": 4_000_000,
            "big_records": 150_000,
            "steady_seconds": 60,
            "fanout_records": 1_000_000,
            "idle_seconds": 150,
            "idle_warm_up": 60,
        }
        quick = {
            "records": 200_000,
            "big_records": 10_000,
            "steady_seconds": 10,
            "fanout_records": 200_000,
            "idle_seconds": 60,
            "idle_warm_up": 30,
        }
        for key, value in quick.items():
            if getattr(args, key) == defaults[key]:
                setattr(args, key, value)
        args.no_alo = args.no_tasks4 = True
    chosen = {c.strip() for c in args.cases.split(",")}
    whole = set(DEFAULT_CASES.split(",")) <= chosen or chosen == {"fanout"}
    if args.brokers > 1 and args.broker != "kafka":
        parser.error(f"--brokers {args.brokers}: several brokers need --broker kafka")
    # a partial run keeps the whole's block, and so does a run on three brokers
    if args.results is None and not args.quick and whole and args.brokers == 1:
        args.results = str(RESULTS)
    try:
        peers(args)
    except ValueError as e:
        parser.error(str(e))
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or an internal subcommand); 0 when every copy was verified."""
    args = parse_args(argv)
    if args.command == "baseline":
        return baseline_main(args)
    if args.command == "copier":
        return copier_main(args)
    if args.command == "eos-loop":
        return eos_loop_main(args)
    if args.mlflow:
        mlflow_experiment(args.mlflow_uri)  # a missing package or a bad store fails before the run
    make_subreaper()
    command = "cd /work/main && .venv/bin/python bench/replication.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    started_at = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    t_start = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    if args.engine_ref:
        folder = workdir / "engine"
        sha = export_engine(args.engine_ref, folder)
        log(f"benchmarking mirror_lib from git {sha} ({args.engine_ref}) exported to {folder}")
    runner = Runner(args, workdir)

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"benchmark watchdog: over {args.max_minutes} minutes")

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(int(args.max_minutes * 60))
    cases, steady_runs = plan(args)
    chosen = {c.strip() for c in args.cases.split(",")}
    idle = "idle" in chosen
    failover = "failover" in chosen and "mm2" in peers(args)
    if "failover" in chosen and not failover:
        log("the failover case compares MM2's checkpoints with ours: left out without --peers mm2")
    main_runs = bool(cases or steady_runs or idle or failover)
    fanout_runs: list[fanout.FanoutRun] = []
    try:
        if main_runs:
            runner.start()
            runner.note_memory("start")
            runner.warm_up()
        for case in cases:
            runner.run_case(case)
        for run in steady_runs:
            runner.run_steady(run)
        if idle:
            runner.run_idle()
        if failover:
            runner.run_failover()
        if "fanout" in chosen:
            fanout_runs = fanout.run_fanout(args, workdir)
    finally:
        signal.alarm(0)
        runner.stop()
        reap_all_orphans(set())
    took = time.monotonic() - t_start
    if main_runs:
        block = render(runner, args, command, started_at, took)
        print("\n" + block)
        if args.results:
            write_block(Path(args.results), block)
            log(f"wrote {args.results}")
            if Path(args.results).resolve() == RESULTS:  # the docs' charts show this block
                draw_charts()
        if args.json:
            write_json(Path(args.json), runner)
        if args.mlflow:
            parent = log_mlflow(args.mlflow_uri, runner, args, command, block)
            log(f"logged MLflow run {parent} (experiment {MLFLOW_EXPERIMENT}) to {args.mlflow_uri}")
    if fanout_runs:
        fblock = fanout.render(fanout_runs, command, started_at, facts(), args.fanout_max_lag)
        print("\n" + fblock)
        log(f"fanout: {fanout.summary(fanout_runs)}")
        if args.results:
            write_block(Path(args.results), fblock, (fanout.MARK_BEGIN, fanout.MARK_END))
            log(f"wrote the fan-out block of {args.results}")
    ok = (
        all(r.ok for r in runner.rows)
        and all(s["ok"] for s in runner.steady)
        and all(r.ok for r in fanout_runs)
        and (runner.idle is None or idle_flow.sampled(runner.idle))
        and (runner.idle_mm2 is None or idle_flow.sampled(runner.idle_mm2))
        and (runner.failover is None or runner.failover["ok"])
    )
    log(f"done in {took / 60:.1f} min; all verified: {ok}; work dir {workdir}")
    return 0 if ok else 1


def draw_charts() -> None:
    """Redraw the performance page's charts from the block just written; a failure (no
    Chromium for kaleido, say) is said, and the results stand."""
    try:
        for path in plots.write_charts():
            log(f"drew {path}")
    except Exception as exc:  # the run's results are written: say so, and go on
        log(f"charts not drawn ({type(exc).__name__}: {exc}); run: python -m bench.plots")
