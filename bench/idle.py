"""Memory and CPU of an idle flow: `mirror run` with every part on an empty topic.

Usage: ``.venv/bin/python bench/idle.py [--seconds 150] [--warm-up 60]``. Starts two embedded
brokers, runs `mirror run` (tables enabled) for ``--seconds``, and after ``--warm-up`` samples the
process tree every second: peak RSS, peak PSS (shared pages counted once), the number of processes,
and the CPU the tree used per second of wall time (finished processes included, through their
parents' reaped-children times). Prints one line, and the tree's processes with
their PSS once near the end. The full benchmark runs the same measurement as its ``idle`` case.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engine import subprocess_env
from bench.measure import descendants, pss, reaped_cpu_s
from bench.procs import mirror_props, write_props


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")[:150]
    except OSError:
        return "?"


def measure(source: str, target: str, work: Path, seconds: float, warm_up: float) -> dict[str, Any]:
    """Run an idle `mirror run` for ``seconds`` against two running brokers and sample its tree
    after ``warm_up``: ``rc``, ``cpu_pct`` (of one core; None without samples), peak RSS and PSS
    in MB, the most processes at once, the seconds sampled."""
    from mirror_lib.testing.kafka_io import create_topic  # the engine's, after --engine-ref

    work.mkdir(parents=True, exist_ok=True)
    create_topic(source, "idle", 2)
    props = mirror_props(
        source, target, work / "state", "idle", **{"mirror.tables.enabled": "true"}
    )
    config = write_props(work / "mm2.properties", props)
    cmd = [sys.executable, "-m", "mirror_lib.app.cli", "run", str(config)]
    with open(work / "run.log", "wb") as out:
        proc = subprocess.Popen(
            [*cmd, "--duration", str(seconds)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=subprocess_env(),
        )
        started, shown = time.monotonic(), False
        first: tuple[float, float] | None = None
        last: tuple[float, float] | None = None
        peak_rss = peak_pss = processes = 0
        try:
            while proc.poll() is None:
                tree = descendants(proc.pid)
                elapsed = time.monotonic() - started
                cpu = sum(c for _comm, c, _rss in tree.values())
                cpu += sum(reaped_cpu_s(pid) for pid in tree)  # finished workers count too
                if elapsed > warm_up:
                    peak_rss = max(peak_rss, sum(r for _c, _cpu, r in tree.values()))
                    peak_pss = max(peak_pss, sum(pss(pid) for pid in tree))
                    processes = max(processes, len(tree))
                    first = first or (elapsed, cpu)
                    if elapsed < seconds - 5:  # not the shutdown
                        last = (elapsed, cpu)
                if not shown and elapsed > seconds - 20:
                    shown = True
                    for pid in tree:
                        print(f"{pid:>8} {pss(pid) / 2**20:6.0f} MB  {command_line(pid)}")
                if elapsed > seconds + 120:
                    proc.kill()
                time.sleep(1)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    sampled = last[0] - first[0] if first and last else 0.0
    return {
        "rc": proc.returncode,
        "cpu_pct": round((last[1] - first[1]) / sampled * 100, 1)
        if first and last and sampled > 0
        else None,
        "peak_rss_mb": round(peak_rss / 2**20),
        "peak_pss_mb": round(peak_pss / 2**20),
        "processes": processes,
        "sampled_s": round(sampled),
        "warm_up_s": warm_up,
        "log": str(work / "run.log"),
    }


def sampled(result: dict[str, Any]) -> bool:
    """Whether :func:`measure` had samples after the warm-up (else it measured nothing)."""
    return result["cpu_pct"] is not None


def line(result: dict[str, Any]) -> str:
    """The one-line summary of :func:`measure`."""
    if not sampled(result):
        return f"no samples after the warm-up (exit {result['rc']}); see {result['log']}"
    return (
        f"exit {result['rc']}; after {result['warm_up_s']:.0f} s:"
        f" peak RSS {result['peak_rss_mb']} MB, peak PSS {result['peak_pss_mb']} MB,"
        f" {result['processes']} processes,"
        f" CPU {result['cpu_pct']:.1f} % of a core over {result['sampled_s']} s"
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
