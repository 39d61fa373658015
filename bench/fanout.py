"""The fan-out case (``--cases fanout``): one target vs two targets sharing one read of A.

Three tansu brokers: A behind a counting TCP proxy (``tests/helpers/proxy.py`` ``CountingProxy``:
every byte A sends to a client, as a cross-datacenter link from A would carry it), B and C.
``--fanout-records`` records x 200 B over 4 partitions are loaded on A once; then
``mirror run CONFIG --once`` copies them to B alone, and again (fresh state, targets wiped) to B
and C with ``mirror.fanout.enabled = true``. Each copy is verified against the source (counts and
CRC32 chains per partition). A row per target: bytes A sent during the run, wall time, records/s
of wall time and the copy rate from that target's own metrics topic.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.kafka_data import PARTITIONS, create_topic, produce_bulk, read_metrics, scan, wipe
from bench.measure import MB, Meter
from bench.methods import mirror_cmd
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
    copy_rps: float | None  # from the target's own metrics topic


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
    bootstrap: dict[str, str], state: Path, targets: tuple[str, ...], max_lag: int | None = None
) -> dict[str, str]:
    """The bench's flow properties (``procs.mirror_props``) with C and fan-out; tables off;
    ``max_lag``: ``mirror.fanout.max.lag.records`` (None: the engine's default)."""
    props = mirror_props(bootstrap["A"], bootstrap["B"], state, TOPIC)
    props.update({
        "clusters": "A, B, C",
        "C.bootstrap.servers": bootstrap["C"],
        "A->C.enabled": "true" if "C" in targets else "false",
        "mirror.fanout.enabled": "true",
        "mirror.tables.enabled": "false",  # the copy only: materialization reads B and C
    })  # fmt: skip
    if max_lag is not None:
        props["mirror.fanout.max.lag.records"] = str(max_lag)
    return props


def run_fanout(args: argparse.Namespace, workdir: Path) -> list[FanoutRun]:
    """Start A (proxied), B and C, load the data, run both configurations; stop the brokers."""
    from mirror_lib.testing.clusters import BROKER_ENV, start_clusters
    from tests.helpers.proxy import CountingProxy, bootstrap, proxied_broker

    os.environ[BROKER_ENV] = args.broker  # proxied_broker starts A on the same kind

    n = args.fanout_records
    runs: list[FanoutRun] = []
    with contextlib.ExitStack() as stack:
        broker_a, proxy = stack.enter_context(
            proxied_broker("A", workdir / "fanout-a", CountingProxy)
        )
        assert isinstance(proxy, CountingProxy)
        others = start_clusters(("B", "C"), workdir / "fanout", args.broker)
        stack.callback(others.stop)
        servers = {"A": bootstrap(proxy), **others.bootstraps}
        pids = [broker_a.pid, *(b.pid for b in others.handles)]  # type: ignore[attr-defined]
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
                fanout_props(servers, state, targets, args.fanout_max_lag),
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
            for alias in targets:
                copied = scan(servers[alias], REMOTE)
                ok = copied.counts == source.counts and copied.crcs == source.crcs
                started = out.first("started replication")
                start_ms = None if started is None else t0_epoch_ms + (started - t0) * 1000
                rate = copy_rate(read_metrics(servers[alias]), start_ms)
                run.copies.append(Copy(alias, copied.records if ok else 0, ok, rate))
            log(
                f"{label}: rc={rc} {meter.m.wall_s:.1f} s, {read / MB:.1f} MB read from A "
                f"({read / source.bytes:.2f}x the payload); "
                + ", ".join(
                    f"{c.alias} verified={c.ok} copy rec/s={c.copy_rps}" for c in run.copies
                )
            )
            runs.append(run)
    return runs


def render(
    runs: list[FanoutRun],
    command: str,
    started: str,
    facts: dict[str, str],
    max_lag: int | None = None,
) -> str:
    """The fan-out results block of bench/results.md."""
    one = next((r for r in runs if len(r.copies) == 1), None)
    lines = [
        f"Fan-out (`--cases fanout`), run {started}. Command (from the repository root):",
        "",
        "```",
        command,
        "```",
        "",
        "Machine and software: " + "; ".join(f"{k} {v}" for k, v in facts.items()),
        "",
        f"Data: {runs[0].records:,} records x {SIZE} B over {PARTITIONS} partitions on A"
        f" ({runs[0].payload / MB:.0f} MB of key+value); mirror.fanout.max.lag.records ="
        f" {max_lag if max_lag is not None else 'default'}. Read from A = bytes A sent to its"
        " clients through the counting proxy during the run (Fetch responses, metadata, offsets);"
        " wall = process start to exit (JVM and Spark start-up included); rec/s = verified"
        " records / wall; copy rec/s = records in that target's own `mm2-metrics.A.internal`"
        " / time from the query's start (`started replication`, after JVM and session start-up)"
        " to the target's last transaction (so it includes the first plan and the start of the"
        " copy tasks).",
        "",
        "| run | target | read from A MB | read / payload | read vs one target | wall s "
        "| rec/s (wall) | copy rec/s | mirror CPU-s | verified |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in runs:
        vs = f"{r.read_from_a / one.read_from_a:.2f}x" if one and one.read_from_a else ""
        for c in r.copies:
            rps = c.records / r.wall_s if r.wall_s else 0.0
            steady = f"{c.copy_rps:,.0f}" if c.copy_rps else ""
            lines.append(
                f"| {r.label} | {c.alias} | {r.read_from_a / MB:.1f} | "
                f"{r.read_from_a / r.payload:.2f} | {vs} | {r.wall_s:.1f} | {rps:,.0f} | "
                f"{steady} | {r.cpu_s:.1f} | {'yes' if c.ok and r.rc == 0 else 'NO'} |"
            )
    return "\n".join(lines) + "\n"


def copy_rate(events: list[dict[str, Any]], start_ms: float | None) -> float | None:
    """Records/s a target received from the query's start (``start_ms``, epoch) to its last
    transaction of the case's topic (its batch events); None without either."""
    batches = [e for e in events if e.get("type") == "batch" and e.get("remote_topic") == REMOTE]
    if start_ms is None or not batches:
        return None
    last = max(e["ts_ms"] for e in batches)
    return sum(e["records"] for e in batches) / max((last - start_ms) / 1000, 1e-3)


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
