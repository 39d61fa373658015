"""The one runner: brokers, and for every run the same start, meter, stop, verify and record.

``Runner.launched`` starts a process in its own group under a ``Meter`` and stops the group
afterwards (every run, steady ones included); ``Runner.copy`` runs any copy method of a case
(``bench.methods`` says what differs) and verifies the copy against the source.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import idle as idle_flow
from bench import steady as steady_load
from bench.cases import STEADY_TRIGGER, Case, Method, SteadyRun, peers
from bench.kafka_data import (
    PARTITIONS,
    Scan,
    create_topic,
    high_watermark,
    produce_bulk,
    read_metrics,
    scan,
    wipe,
)
from bench.measure import MB, Measure, Meter, proc_stat
from bench.methods import (
    Site,
    Started,
    mirror_cmd,
    mirror_config,
    mm2_job_command,
    prepare,
    spark_kafka_job_command,
)
from bench.peers import mm2_command
from bench.procs import (
    REPLICATION_ENV,
    Lines,
    log,
    popen,
    stop_all_groups,
    stop_group,
    write_props,
)
from bench.roll import Roll


def jvm_archive_present() -> bool:
    """Whether the engine's local JVM class-data archive exists, or a run has just written it
    (``spark-*.jsa.<pid>.partial``, which the next run checks and takes; ``mirror_lib.spark.jvm``).
    """
    from mirror_lib.spark.jvm import cache_folder  # the engine's, after a --engine-ref export

    folder = cache_folder()
    return folder is not None and any(folder.glob("spark-*.jsa*"))


@dataclass
class Row:
    """One row of the throughput table: a method's copy of a case."""

    case: str
    method: str
    records: int
    bytes: int
    m: Measure
    ok: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        """Records per second of wall time."""
        return self.records / self.m.wall_s if self.m.wall_s else 0.0

    @property
    def mbps(self) -> float:
        """MB (10^6 bytes of key+value) per second of wall time."""
        return self.bytes / MB / self.m.wall_s if self.m.wall_s else 0.0


@dataclass
class Launched:
    """A running process under a meter."""

    proc: subprocess.Popen
    out: Lines
    meter: Meter
    started: Started

    def wait(self, timeout_s: float) -> int:
        """Its exit code (-1 after ``timeout_s``); the measured wall time ends here."""
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return -1
        finally:
            self.meter.mark_end()

    def wait_until(self, done: Callable[[], bool], timeout_s: float) -> int:
        """For a process that does not exit by itself: 0 once ``done()`` (the measured wall time
        ends there; the caller then stops it), -1 after ``timeout_s``, and its exit code (or -2)
        if it exited first."""
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return self.proc.returncode or -2
                if done():
                    return 0
                time.sleep(0.25)
            return -1
        finally:
            self.meter.mark_end()


class Runner:
    """Runs the cases and steady runs on two clusters and keeps their results."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.rows: list[Row] = []
        self.steady: list[dict[str, Any]] = []
        self.memory: list[dict[str, Any]] = []
        self.keep: set[int] = set()  # our child processes that Popen objects own
        self.warmup: dict[str, Any] = {}
        self.idle: dict[str, Any] | None = None
        self.idle_mm2: dict[str, Any] | None = None
        self.failover: dict[str, Any] | None = None

    # -- plumbing ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the source and target brokers."""
        from mirror_lib.testing.clusters import BROKER_ENV, start_clusters  # after --engine-ref

        kind, count = self.args.broker, getattr(self.args, "brokers", 1)
        os.environ[BROKER_ENV] = kind  # the report's facts name it
        self.brokers = start_clusters(("source", "target"), self.workdir / kind, kind, count)
        # every topic of the run, ours and MM2's, at the clusters' replication factor
        os.environ[REPLICATION_ENV] = str(self.brokers.replication_factor)
        self.src, self.tgt = self.brokers.bootstraps["source"], self.brokers.bootstraps["target"]
        self.site = Site(self.src, self.tgt, self.workdir)
        self.broker_pids = [b.pid for b in self.brokers.handles]  # type: ignore[attr-defined]
        self.keep = set(self.broker_pids)
        log(
            f"{kind} brokers: source {self.src} (pid {self.broker_pids[0]}), target {self.tgt} "
            f"(pid {self.broker_pids[1]}); logs in {self.workdir}"
        )

    def stop(self) -> None:
        """Stop every process group still running, then the brokers."""
        stop_all_groups()
        if getattr(self, "brokers", None):
            self.brokers.stop()

    def warm_up(self, records: int = 10_000) -> None:
        """One small ``mirror run --once`` before anything is measured.

        A machine's first run writes the JVM's class-data archive as its JVM exits (some 10-20
        CPU-s, ``mirror_lib.spark.jvm``) and reads every jar and module from disk; a scheduled job
        pays that once, so the measured runs should not."""
        topic = "warmup"
        create_topic(self.src, topic)
        produce_bulk(self.src, topic, records, 200)
        had_archive = jvm_archive_present()
        cfg = mirror_config(self.site, "mm2-warmup.properties", topic, {})
        log(f"warm-up: mirror run {cfg.name} --once ({records:,} records)")
        with self.launched(mirror_cmd(cfg, "--once", "--timeout", "300"), "warmup.err") as run:
            rc = run.wait(420)
        self.warmup = {
            "records": records,
            "rc": rc,
            "seconds": round(run.meter.m.wall_s, 1),
            "archive_before": had_archive,
            "archive_after": jvm_archive_present(),
        }
        if "spark-kafka" in peers(self.args):
            # the connector's first run fetches its jars (spark.jars.packages) into the Ivy cache
            create_topic(self.tgt, f"spark.{topic}")
            cmd = spark_kafka_job_command(
                self.site, "spark-warmup", topic, f"spark.{topic}", "availableNow"
            )
            log("warm-up: Spark's Kafka connector, availableNow (fetches its jars once)")
            with self.launched(cmd, "spark-warmup.err") as run:
                self.warmup["spark_kafka_rc"] = run.wait(600)
            self.warmup["spark_kafka_seconds"] = round(run.meter.m.wall_s, 1)
        log(f"warm-up: {self.warmup}")
        wipe(self.src)
        self.clean_target()

    def note_memory(self, when: str) -> None:
        """Record MemAvailable and the brokers' RSS at this point of the run."""
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) for line in f}
        rss = [round((st[3] if (st := proc_stat(p)) else 0) / MB) for p in self.broker_pids]
        entry = {
            "when": when,
            "avail_gb": round(info["MemAvailable"] / 1e6, 1),
            "broker_rss_mb": rss,
        }
        self.memory.append(entry)
        log(f"memory {when}: MemAvailable {entry['avail_gb']} GB, broker RSS {rss} MB")

    def clean_target(self) -> None:
        """Delete the target's topics and the ledger groups, so each copy starts on an empty B."""
        ledgers = tuple(f"__mirror_ledger.A->B.{slot}" for slot in range(8))
        wipe(self.tgt, groups=(*ledgers, "A-mm2"))  # and MM2's Connect worker group

    @contextlib.contextmanager
    def launched(
        self,
        cmd: list[str],
        log_name: str,
        echo: str | None = None,
        stop_signal: int = signal.SIGTERM,
        grace_s: float = 30,
    ) -> Iterator[Launched]:
        """Start ``cmd`` under a meter; on leaving, stop its process group with ``stop_signal``
        (SIGKILL after ``grace_s``), read its output to the end and close the meter. Its stdout
        is echoed with the prefix ``echo``, or else written to ``<log_name stem>.out``."""
        with Meter.with_background(self.broker_pids, self.keep) as meter:
            t0, t0_epoch_ms = time.monotonic(), time.time() * 1000
            proc = popen(cmd, self.workdir / log_name)
            self.keep.add(proc.pid)
            meter.attach(proc.pid)
            out = Lines(proc.stdout, echo, (self.workdir / log_name).with_suffix(".out"))
            try:
                yield Launched(proc, out, meter, Started(out, t0, t0_epoch_ms))
            finally:
                stop_group(proc, stop_signal, grace=grace_s)
            out.join()

    # -- a case -----------------------------------------------------------------------------
    def run_case(self, case: Case) -> None:
        """Load the case's topic on the source, copy it with each method, clean up."""
        n, size, topic = case.records, case.size, case.topic
        gb = n * size / 1e9
        log(f"=== case {case.name}: {n:,} records x {size} B into {topic} ({gb:.2f} GB)")
        create_topic(self.src, topic)
        t0 = time.monotonic()
        produce_bulk(self.src, topic, n, size)
        log(f"loaded {topic} in {time.monotonic() - t0:.1f} s")
        hw = {p: high_watermark(self.src, topic, p) for p in range(PARTITIONS)}
        source = scan(self.src, topic)
        log(f"source verified: {source.records:,} records, {source.bytes / MB:.0f} MB, HW {hw}")
        if source.records != n or sum(hw.values()) != n:
            raise RuntimeError(f"source has {source.records} records (HW {hw}), expected {n}")
        self.note_memory(f"{case.name} loaded")
        for method in case.methods:
            self.rows.append(self.copy(case, method, source))
            if method.kind == "mirror":
                self.note_memory(f"{case.name} after {method.label}")
            self.clean_target()
        wipe(self.src)
        self.note_memory(f"{case.name} cleaned")

    def copy(self, case: Case, method: Method, source: Scan) -> Row:
        """Run one method on the loaded case and verify the copy: one row."""
        timeout = self.args.mirror_timeout or max(300, case.records / 2_000)
        job = prepare(self.site, case, method, len(self.rows), timeout)
        with self.launched(job.cmd, job.log_name, echo=job.echo) as run:
            rc = (
                run.wait(job.wait_s) if job.until is None else run.wait_until(job.until, job.wait_s)
            )
        copied = scan(self.tgt, job.dest)
        ok = rc == 0 and copied.counts == source.counts and copied.crcs == source.crcs
        extra = job.details(run.started)
        started, done = extra.get("started_s"), extra.get("caught_up_s")
        if "steady_rps" not in extra and started is not None and done and done > started:
            extra["steady_rps"] = round(source.records / (done - started))
            extra["steady_mbps"] = round(source.bytes / MB / (done - started), 1)
        log(
            f"{job.tag}: rc={rc} {copied.records:,} records in {run.meter.m.wall_s:.1f} s; "
            f"verified={ok}; {extra}"
        )
        return Row(case.name, method.label, source.records, source.bytes, run.meter.m, ok, extra)

    # -- steady load ------------------------------------------------------------------------
    def run_steady(self, run: SteadyRun) -> None:
        """A fixed-rate load while `mirror run --duration` (or a peer) runs: latency, CPU,
        memory."""
        a = self.args
        topic = "steady"
        seconds = a.roll_seconds if run.roll else a.steady_seconds
        log(f"=== steady load ({run.label}): {a.rate} records/s x 200 B for {seconds} s")
        create_topic(self.src, topic)
        n = len(self.steady)
        cmd, remote, stop_signal, echo = self.steady_command(run, topic, n)
        roll = Roll(self.brokers.clusters["target"], self.keep) if run.roll else None
        with self.launched(cmd, f"steady-{n}.err", echo, stop_signal, 60) as proc:
            try:
                load = steady_load.drive(
                    self.src,
                    self.tgt,
                    topic,
                    remote,
                    a.rate,
                    seconds,
                    proc.proc,
                    proc.meter,
                    proc.started.t0,
                    a.warm_load_seconds,
                    None if roll is None else roll.start,
                )
            finally:
                if roll is not None:
                    roll.join()
        metrics = [
            e
            for e in read_metrics(self.tgt)
            if e.get("type") == "batch"
            and e.get("remote_topic") == remote
            and e["ts_ms"] > load.start_ms
        ]
        queries = (  # the mirror's queries; a peer's is not counted
            sum(1 for _t, line in proc.out.lines if line.startswith("started "))
            if run.kind == "mirror"
            else None
        )
        result = steady_load.summarize(
            run.label, load, metrics, queries, a.rate, proc.meter.m.peak_rss_mb
        )
        result["kind"] = run.kind
        if roll is not None:
            result["roll"] = roll.report(load.start_ms)
            result["ok"] = result["ok"] and roll.error is None
        self.steady.append(result)
        log(f"steady: {result}")
        wipe(self.src)
        self.clean_target()

    def steady_command(
        self, run: SteadyRun, topic: str, n: int
    ) -> tuple[list[str], str, int, str | None]:
        """What a steady run starts: its command, the topic its copy lands in, the signal that
        stops it and the prefix its output is echoed with (None: kept in a file)."""
        a = self.args
        if run.kind == "mm2":
            cmd = mm2_job_command(self.site, f"mm2-steady-{n}", topic, run.overrides, run.mm2_eos)
            return cmd, f"A.{topic}", signal.SIGTERM, None
        if run.kind == "spark-kafka":
            dest = f"spark.{topic}"
            create_topic(self.tgt, dest)
            seconds = float(STEADY_TRIGGER["mirror.trigger.interval.seconds"])
            trigger = f"{round(seconds * 1000)} milliseconds"  # the mirror's trigger interval
            cmd = spark_kafka_job_command(self.site, f"spark-steady-{n}", topic, dest, trigger)
            return cmd, dest, signal.SIGTERM, None
        overrides = {**STEADY_TRIGGER, **run.overrides}
        cfg = mirror_config(self.site, f"mm2-steady-{n}.properties", topic, overrides)
        cmd = mirror_cmd(cfg, "--duration", str(a.steady_seconds + 300))
        return cmd, f"A.{topic}", signal.SIGINT, "  mirror"  # SIGINT ends `--duration` early

    # -- idle flow --------------------------------------------------------------------------
    def run_idle(self) -> None:
        """`mirror run` with every part on an empty topic, then MM2 with its defaults (with
        ``--peers mm2``) for as long: each tree's CPU and memory at rest."""
        a = self.args
        log(f"=== idle flow: mirror run for {a.idle_seconds} s, sampled after {a.idle_warm_up} s")
        pids = tuple(self.broker_pids)
        self.idle = idle_flow.measure(
            self.src, self.tgt, self.workdir / "idle", a.idle_seconds, a.idle_warm_up, pids
        )
        log(f"idle: {idle_flow.line(self.idle)}")
        wipe(self.src)
        self.clean_target()
        if "mm2" not in peers(a):
            return
        log(f"=== idle MM2: MirrorMaker 2 for {a.idle_seconds} s, sampled after {a.idle_warm_up} s")
        self.idle_mm2 = idle_flow.measure_mm2(
            self.src, self.tgt, self.workdir / "idle-mm2", a.idle_seconds, a.idle_warm_up, pids
        )
        log(f"idle MM2: {idle_flow.line(self.idle_mm2)}")
        wipe(self.src)
        self.clean_target()

    # -- failover accuracy ------------------------------------------------------------------
    def run_failover(self) -> None:
        """MM2 and `mirror run --once` over the same groups; then each group moved to B at the
        offsets each tool's checkpoints give: records re-read and skipped (per tool)."""
        from mirror_lib.testing import failover as fo  # the engine's, after --engine-ref

        log(f"=== failover: {len(fo.GROUPS)} groups x {fo.PARTITIONS} partitions, MM2 and ours")
        work = self.workdir / "failover"
        work.mkdir(parents=True, exist_ok=True)
        create_topic(self.src, fo.TOPIC, fo.PARTITIONS)
        mm2 = mm2_command(fo.mm2_properties(self.src, self.tgt), work / "mm2")
        result: dict[str, Any] = {}
        with self.launched(mm2, "failover-mm2.err") as run:
            dataset = fo.make_dataset(self.src)
            props = fo.ours_properties(self.src, self.tgt, str(work / "state"))
            cfg = write_props(work / "ours.properties", props)
            cmd = mirror_cmd(cfg, "--once", "--timeout", "300")
            with self.launched(cmd, "failover-ours.err", "  mirror") as ours:
                result["ours_rc"] = ours.wait(420)
            # MM2 sends the syncs of the last records at its offset flush (60 s by default)
            result["mm2_settled"] = fo.wait_for(lambda: fo.mm2_settled(self.src, dataset), 180)
            figures: list[dict[str, Any]] = [{}]

            def settled() -> bool:  # MM2's checkpoints follow its syncs within seconds
                now = fo.failover_figures(self.tgt, dataset)
                same, figures[0] = now == figures[0], now
                return same and now["mm2"]["untranslated"] == 0

            result["mm2_checkpoints_settled"] = fo.wait_for(settled, 60)
            result.update(figures[0])
            result["mm2_running"] = run.proc.poll() is None
        result["ok"] = result["ours_rc"] == 0 and result["mm2_settled"] and bool(result.get("ours"))
        self.failover = result
        log(f"failover: {result}")
        wipe(self.src, groups=tuple(fo.GROUPS))
        wipe(self.tgt, groups=tuple(fo.GROUPS))
        self.clean_target()
