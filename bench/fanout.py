"""The fan-out case (``--cases fanout``): one target vs two targets sharing one read of A.

Three tansu brokers: A behind a counting TCP proxy (``tests/helpers/proxy.py`` ``CountingProxy``:
every byte A sends to a client, as a cross-datacenter link from A would carry it), B and C.
``--fanout-records`` records x 200 B over 4 partitions are loaded on A once; then
``mirror run CONFIG --once`` copies them to B alone, and again (fresh state, targets wiped) to B
and C with ``mirror.fanout.enabled = true``. Each copy is verified against the source (counts and
CRC32 chains per partition). A row per target: bytes A sent during the run, wall time, records/s
of wall time and the steady rate from that target's own metrics topic.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.kafka_data import PARTITIONS, create_topic, produce_bulk, scan, wipe
from bench.measure import MB, Meter
from bench.methods import Started, mirror_cmd, mirror_details
from bench.procs import Lines, log, mirror_props, popen, stop_group, write_props

MARK_BEGIN, MARK_END = "<!-- bench:fanout:begin -->", "<!-- bench:fanout:end -->"
TOPIC, REMOTE, SIZE = "fanout200", "A.fanout200", 200
RUNS = (("one target (A->B)", ("B",)), ("fan-out (A->B,C)", ("B", "C")))


@dataclass
class Copy:
    """One target's copy in a run."""

    alias: str
    records: int  # verified on the target (0 if the copy differs from the source)
    ok: bool
    steady_rps: float | None  # from the target's own metrics topic


@dataclass
class FanoutRun:
    """One ``mirror run --once`` of the fan-out case."""

    label: str
    records: int  # on the source
    payload: int  # key+value bytes on the source
    read_from_a: int  # bytes A sent through the proxy during the run
    wall_s: float
    rc: int
    copies: list[Copy] = field(default_factory=list)
    cpu_s: float = 0.0  # the mirror process tree

    @property
    def ok(self) -> bool:
        return self.rc == 0 and all(c.ok for c in self.copies)


def fanout_props(
    bootstrap: dict[str, str], state: Path, targets: tuple[str, ...]
) -> dict[str, str]:
    """The bench's flow properties (``procs.mirror_props``) with C and fan-out; tables off."""
    props = mirror_props(bootstrap["A"], bootstrap["B"], state, TOPIC)
    props.update({
        "clusters": "A, B, C",
        "C.bootstrap.servers": bootstrap["C"],
        "A->C.enabled": "true" if "C" in targets else "false",
        "mirror.fanout.enabled": "true",
        "mirror.tables.enabled": "false",  # the copy only: materialization reads B and C
    })  # fmt: skip
    return props


def run_fanout(args: argparse.Namespace, workdir: Path) -> list[FanoutRun]:
    """Start A (proxied), B and C, load the data, run both configurations; stop the brokers."""
    from mirror_lib.testing.embedded import start_brokers, stop_brokers
    from tests.helpers.proxy import CountingProxy, bootstrap, proxied_broker

    n = args.fanout_records
    runs: list[FanoutRun] = []
    with contextlib.ExitStack() as stack:
        broker_a, proxy = stack.enter_context(
            proxied_broker("A", workdir / "tansu-fanout-a", CountingProxy)
        )
        assert isinstance(proxy, CountingProxy)
        others = start_brokers(2, ("B", "C"), workdir=workdir / "tansu-fanout")
        stack.callback(stop_brokers, others)
        servers = {"A": bootstrap(proxy), "B": others[0].bootstrap_servers}
        servers["C"] = others[1].bootstrap_servers
        pids = [broker_a.pid, *(b.pid for b in others)]
        where = f"A {servers['A']} (proxy of {broker_a.bootstrap_servers})"
        log(f"=== fanout: {where}, B {servers['B']}, C {servers['C']}; {n:,} records x {SIZE} B")
        create_topic(servers["A"], TOPIC)
        produce_bulk(servers["A"], TOPIC, n, SIZE)
        source = scan(servers["A"], TOPIC)
        if source.records != n:
            raise RuntimeError(f"fanout: the source has {source.records} records, expected {n}")
        timeout = args.mirror_timeout or max(300, n / 2_000)
        for label, targets in RUNS:
            for alias in ("B", "C"):  # a fresh start on every target
                groups = tuple(f"__mirror_ledger.A->{alias}.{slot}" for slot in range(8))
                wipe(servers[alias], groups=groups)
            state = Path(tempfile.mkdtemp(prefix="state-fanout-", dir=workdir))
            cfg = write_props(
                workdir / f"mm2-fanout-{len(targets)}.properties",
                fanout_props(servers, state, targets),
            )
            log(f"{label}: mirror run {cfg.name} --once")
            proxy.reset()
            keep = set(pids)  # processes a Popen object owns: never reaped as orphans
            with Meter(pids, keep) as meter:
                t0, t0_epoch_ms = time.monotonic(), time.time() * 1000
                proc = popen(
                    mirror_cmd(cfg, "--once", "--timeout", str(int(timeout))),
                    workdir / f"mirror-fanout-{len(targets)}.err",
                )
                keep.add(proc.pid)
                meter.attach(proc.pid)
                out = Lines(proc.stdout, echo="  mirror")
                try:
                    rc = proc.wait(timeout + 120)
                except subprocess.TimeoutExpired:
                    rc = -1
                finally:
                    meter.mark_end()
                    stop_group(proc)
                out.join()
            read = proxy.reset()
            run = FanoutRun(label, n, source.bytes, read, meter.m.wall_s, rc)
            run.cpu_s = meter.m.copier_cpu_s
            started = Started(out, t0, t0_epoch_ms)
            for alias in targets:
                copied = scan(servers[alias], REMOTE)
                ok = copied.counts == source.counts and copied.crcs == source.crcs
                steady = mirror_details(servers[alias], REMOTE, started).get("steady_rps")
                run.copies.append(Copy(alias, copied.records if ok else 0, ok, steady))
            log(
                f"{label}: rc={rc} {meter.m.wall_s:.1f} s, {read / MB:.1f} MB read from A "
                f"({read / source.bytes:.2f}x the payload); "
                + ", ".join(f"{c.alias} verified={c.ok} steady={c.steady_rps}" for c in run.copies)
            )
            runs.append(run)
    return runs


def render(runs: list[FanoutRun], command: str, started: str, facts: dict[str, str]) -> str:
    """The fan-out results block of bench/README.md."""
    one = next((r for r in runs if len(r.copies) == 1), None)
    lines = [
        f"Run {started}. Command (from the repository root):",
        "",
        "```",
        command,
        "```",
        "",
        "Machine and software: " + "; ".join(f"{k} {v}" for k, v in facts.items()),
        "",
        f"Data: {runs[0].records:,} records x {SIZE} B over {PARTITIONS} partitions on A"
        f" ({runs[0].payload / MB:.0f} MB of key+value). Read from A = bytes A sent to its"
        " clients through the counting proxy during the run (Fetch responses, metadata, offsets);"
        " wall = process start to exit (JVM and Spark start-up included); rec/s = verified"
        " records / wall; steady rec/s = from that target's own `mm2-metrics.A.internal`"
        " (records after the first chunk / first-to-last chunk time).",
        "",
        "| run | target | read from A MB | read / payload | read vs one target | wall s "
        "| rec/s (wall) | steady rec/s | mirror CPU-s | verified |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in runs:
        vs = f"{r.read_from_a / one.read_from_a:.2f}x" if one and one.read_from_a else ""
        for c in r.copies:
            rps = c.records / r.wall_s if r.wall_s else 0.0
            steady = f"{c.steady_rps:,.0f}" if c.steady_rps else ""
            lines.append(
                f"| {r.label} | {c.alias} | {r.read_from_a / MB:.1f} | "
                f"{r.read_from_a / r.payload:.2f} | {vs} | {r.wall_s:.1f} | {rps:,.0f} | "
                f"{steady} | {r.cpu_s:.1f} | {'yes' if c.ok and r.rc == 0 else 'NO'} |"
            )
    return "\n".join(lines) + "\n"


def write_block(path: Path, block: str) -> None:
    """Replace the fan-out block of ``path`` (appended under a heading if it has none)."""
    body = f"{MARK_BEGIN}\n{block}{MARK_END}\n"
    text = path.read_text() if path.exists() else ""
    if MARK_BEGIN in text and MARK_END in text:
        head, rest = text.split(MARK_BEGIN, 1)
        path.write_text(head + body + rest.split(MARK_END, 1)[1])
    else:
        path.write_text(text.rstrip("\n") + "\n\n## Fan-out results\n\n" + body)


def summary(runs: list[FanoutRun]) -> dict[str, Any]:
    """The headline numbers (for the log line at the end)."""
    one = next((r for r in runs if len(r.copies) == 1), None)
    two = next((r for r in runs if len(r.copies) == 2), None)
    if one is None or two is None or not one.read_from_a:
        return {}
    return {
        "read_ratio": round(two.read_from_a / one.read_from_a, 2),
        "one_target_mb": round(one.read_from_a / MB, 1),
        "two_targets_mb": round(two.read_from_a / MB, 1),
    }
