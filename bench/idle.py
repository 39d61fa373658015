"""Memory and CPU of an idle flow: `mirror run` with every part on an empty topic.

Usage: ``.venv/bin/python bench/idle.py [--seconds 150] [--warm-up 60]``. Starts two embedded
brokers, runs `mirror run` (tables enabled) for ``--seconds``, and after ``--warm-up`` samples the
process tree every second: peak RSS, peak PSS (shared pages counted once), the number of processes,
and the CPU the tree used per second of wall time (finished processes included, through their
parents' reaped-children times). Prints one line, and the tree's processes with
their PSS once near the end.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engine import subprocess_env
from bench.measure import descendants, pss, reaped_cpu_s
from bench.procs import mirror_props, write_props
from mirror_lib.testing.embedded import start_brokers, stop_brokers
from mirror_lib.testing.kafka_io import create_topic


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")[:150]
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=150)
    parser.add_argument("--warm-up", type=float, default=60)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="mirror-idle-"))
    brokers = start_brokers(2, workdir=work / "brokers")
    try:
        source, target = (f"127.0.0.1:{b.port}" for b in brokers)
        create_topic(source, "idle", 2)
        props = mirror_props(
            source, target, work / "state", "idle", **{"mirror.tables.enabled": "true"}
        )
        config = write_props(work / "mm2.properties", props)
        cmd = [sys.executable, "-m", "mirror_lib.app.cli", "run", str(config)]
        with open(work / "run.log", "wb") as out:
            proc = subprocess.Popen(
                [*cmd, "--duration", str(args.seconds)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=subprocess_env(),
            )
            started, shown = time.monotonic(), False
            first: tuple[float, float] | None = None
            last: tuple[float, float] | None = None
            peak_rss = peak_pss = processes = 0
            while proc.poll() is None:
                tree = descendants(proc.pid)
                elapsed = time.monotonic() - started
                cpu = sum(c for _comm, c, _rss in tree.values())
                cpu += sum(reaped_cpu_s(pid) for pid in tree)  # finished workers count too
                if elapsed > args.warm_up:
                    peak_rss = max(peak_rss, sum(r for _c, _cpu, r in tree.values()))
                    peak_pss = max(peak_pss, sum(pss(pid) for pid in tree))
                    processes = max(processes, len(tree))
                    first = first or (elapsed, cpu)
                    if elapsed < args.seconds - 5:  # not the shutdown
                        last = (elapsed, cpu)
                if not shown and elapsed > args.seconds - 20:
                    shown = True
                    for pid in tree:
                        print(f"{pid:>8} {pss(pid) / 2**20:6.0f} MB  {command_line(pid)}")
                time.sleep(1)
        if first is None or last is None or last[0] <= first[0]:
            print(f"no samples after the warm-up (exit {proc.returncode}); see {work}/run.log")
            return 1
        idle = (last[1] - first[1]) / (last[0] - first[0])
        rss, pss_mb = peak_rss / 2**20, peak_pss / 2**20
        print(
            f"exit {proc.returncode}; after {args.warm_up:.0f} s: peak RSS {rss:.0f} MB, "
            f"peak PSS {pss_mb:.0f} MB, {processes} processes, "
            f"CPU {idle * 100:.1f} % of a core over {last[0] - first[0]:.0f} s"
        )
        return 0
    finally:
        stop_brokers(brokers)


if __name__ == "__main__":
    raise SystemExit(main())
