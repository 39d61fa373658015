"""Memory and CPU of an idle flow: `mirror run` with every part on an empty topic.

Usage: ``.venv/bin/python bench/idle.py [--seconds 150] [--warm-up 60]``. Starts two embedded
brokers, runs `mirror run` (tables enabled) for ``--seconds``, and after ``--warm-up`` samples the
process tree every second: peak RSS, peak PSS (shared pages counted once), the number of processes,
and the CPU the tree used per second of wall time (finished processes included, see
``bench.measure.TreeCpu``). Prints one line, and the tree's processes with their PSS once near
the end. The full benchmark runs the same measurement as its ``idle`` case.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engine import subprocess_env
from bench.measure import TreeCpu, broker_cpu_s, pss
from bench.procs import mirror_props, stop_group, write_props


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")[:150]
    except OSError:
        return "?"


def measure(
    source: str,
    target: str,
    work: Path,
    seconds: float,
    warm_up: float,
    broker_pids: tuple[int, ...] = (),
) -> dict[str, Any]:
    """Run an idle `mirror run` for ``seconds`` against two running brokers and sample its tree
    after ``warm_up``: ``rc``, ``cpu_pct`` (of one core; None without samples), peak RSS and PSS
    in MB, the most processes at once, the seconds sampled, and the CPU of ``broker_pids`` over
    the same samples (``broker_cpu_pct``)."""
    from mirror_lib.testing.kafka_io import create_topic  # the engine's, after --engine-ref

    work.mkdir(parents=True, exist_ok=True)
    create_topic(source, "idle", 2)
    props = mirror_props(
        source, target, work / "state", "idle", **{"mirror.tables.enabled": "true"}
    )
    config = write_props(work / "mm2.properties", props)
    cmd = [sys.executable, "-m", "mirror_lib.app.cli", "run", str(config)]
    cmd += ["--duration", str(seconds)]
    return sample_tree(cmd, work / "run.log", seconds, warm_up, broker_pids)


def measure_mm2(
    source: str,
    target: str,
    work: Path,
    seconds: float,
    warm_up: float,
    broker_pids: tuple[int, ...] = (),
) -> dict[str, Any]:
    """The same for MirrorMaker 2 with its defaults on a new empty topic ``idle``; stopped by
    its process group (SIGTERM) after ``seconds``."""
    from bench.peers import mm2_command, mm2_properties
    from mirror_lib.testing.kafka_io import create_topic

    work.mkdir(parents=True, exist_ok=True)
    create_topic(source, "idle", 2)
    cmd = mm2_command(mm2_properties(source, target, "idle"), work)
    return sample_tree(cmd, work / "run.log", seconds, warm_up, broker_pids, stop_after=True)


def sample_tree(
    cmd: list[str],
    log_path: Path,
    seconds: float,
    warm_up: float,
    broker_pids: tuple[int, ...] = (),
    stop_after: bool = False,
) -> dict[str, Any]:
    """Run ``cmd`` (output to ``log_path``) and sample its process tree every second after
    ``warm_up``; it ends by itself after ``seconds``, or with ``stop_after`` is stopped then."""
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=subprocess_env(), start_new_session=True
        )
        started, shown = time.monotonic(), False
        first: tuple[float, float, float] | None = None
        last: tuple[float, float, float] | None = None
        peak_rss = peak_pss = processes = 0
        try:
            sampler = TreeCpu(proc.pid)
            while proc.poll() is None:
                tree = sampler.sample()
                elapsed = time.monotonic() - started
                cpu = sampler.total  # finished workers count too
                if elapsed > warm_up:
                    peak_rss = max(peak_rss, sum(r for _c, _cpu, r in tree.values()))
                    peak_pss = max(peak_pss, sum(pss(pid) for pid in tree))
                    processes = max(processes, len(tree))
                    brokers = broker_cpu_s(list(broker_pids))
                    first = first or (elapsed, cpu, brokers)
                    if elapsed < seconds - 5:  # not the shutdown
                        last = (elapsed, cpu, brokers)
                if not shown and elapsed > seconds - 20:
                    shown = True
                    for pid in tree:
                        print(f"{pid:>8} {pss(pid) / 2**20:6.0f} MB  {command_line(pid)}")
                if stop_after and elapsed > seconds:
                    stop_group(proc)
                if elapsed > seconds + 120:
                    proc.kill()
                time.sleep(1)
        finally:
            if proc.poll() is None:
                stop_group(proc, signal.SIGKILL, grace=5)
            proc.wait()
    sampled = last[0] - first[0] if first and last else 0.0
    return {
        # a process we stop (MM2) ends by its signal: that is its normal end
        "rc": 0 if stop_after and proc.returncode in (-signal.SIGTERM, 143) else proc.returncode,
        "cpu_pct": round((last[1] - first[1]) / sampled * 100, 1)
        if first and last and sampled > 0
        else None,
        "broker_cpu_pct": round((last[2] - first[2]) / sampled * 100, 1)
        if first and last and sampled > 0 and broker_pids
        else None,
        "peak_rss_mb": round(peak_rss / 2**20),
        "peak_pss_mb": round(peak_pss / 2**20),
        "processes": processes,
        "sampled_s": round(sampled),
        "warm_up_s": warm_up,
        "log": str(log_path),
    }


def sampled(result: dict[str, Any]) -> bool:
    """Whether :func:`measure` had samples after the warm-up (else it measured nothing)."""
    return result["cpu_pct"] is not None


def line(result: dict[str, Any]) -> str:
    """The one-line summary of :func:`measure`."""
    if not sampled(result):
        return f"no samples after the warm-up (exit {result['rc']}); see {result['log']}"
    brokers = result.get("broker_cpu_pct")
    return (
        f"exit {result['rc']}; after {result['warm_up_s']:.0f} s:"
        f" peak RSS {result['peak_rss_mb']} MB, peak PSS {result['peak_pss_mb']} MB,"
        f" {result['processes']} processes,"
        f" CPU {result['cpu_pct']:.1f} % of a core over {result['sampled_s']} s"
        + (f" (brokers meanwhile: {brokers:.1f} %)" if brokers is not None else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=150)
    parser.add_argument("--warm-up", type=float, default=60)
    parser.add_argument("--broker", choices=("kafka", "tansu"), default="kafka")
    args = parser.parse_args(argv)
    from mirror_lib.testing.clusters import start_clusters

    work = Path(tempfile.mkdtemp(prefix="mirror-idle-"))
    brokers = start_clusters(("source", "target"), work / "brokers", args.broker)
    try:
        source, target = brokers.bootstraps["source"], brokers.bootstraps["target"]
        result = measure(source, target, work, args.seconds, args.warm_up)
        print(line(result))
        return 0 if sampled(result) else 1
    finally:
        brokers.stop()


if __name__ == "__main__":
    raise SystemExit(main())
