"""What differs between the copy methods: the topics each needs, its command, its row details.

``prepare(site, case, method, index, timeout_s)`` returns a ``Job``; the runner starts, meters,
verifies and records every job the same way (``bench.runner``).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.cases import Case, Method
from bench.engine import SCRIPT
from bench.kafka_data import PARTITIONS, TailWatch, create_topic, last_records, read_metrics
from bench.measure import MB
from bench.peers import (
    MM2_TASKS_STARTED,
    mm2_command,
    mm2_eos,
    mm2_properties,
    spark_kafka_command,
)
from bench.procs import Lines, log, mirror_props, write_props

METRICS_TOPIC = "mm2-metrics.A.internal"


@dataclass(frozen=True)
class Site:
    """Where the runs happen: the source and target brokers and the work folder."""

    src: str
    tgt: str
    workdir: Path


@dataclass(frozen=True)
class Started:
    """What a finished process left for its row: its output lines and when it started."""

    out: Lines
    t0: float  # time.monotonic() at the start
    t0_epoch_ms: float  # time.time() in milliseconds at the start


@dataclass(frozen=True)
class Job:
    """One method's run of a case: what to start, where the copy lands, how long it may take."""

    tag: str  # the log prefix
    cmd: list[str]
    dest: str  # the topic on the target that must then equal the source topic
    log_name: str  # its stderr, in the work folder
    wait_s: float
    details: Callable[[Started], dict[str, Any]]  # the row's extra columns
    echo: str | None = None  # echo its stdout lines with this prefix
    # for a process that does not exit by itself (MM2): the copy is over once this is true
    until: Callable[[], bool] | None = None


def mirror_config(site: Site, name: str, topic: str, overrides: dict[str, str]) -> Path:
    """A flow config file for ``topic`` with a fresh state folder."""
    state = Path(tempfile.mkdtemp(prefix="state-", dir=site.workdir))
    props = {**mirror_props(site.src, site.tgt, state, topic), **overrides}
    return write_props(site.workdir / name, props)


def mm2_job_command(
    site: Site, name: str, topic: str, overrides: dict[str, str], eos: bool
) -> list[str]:
    """MirrorMaker 2 replicating ``topic`` (files in the work folder's ``name``)."""
    props = {**mm2_properties(site.src, site.tgt, topic), **overrides}
    if eos:
        props.update(mm2_eos())
    return mm2_command(props, site.workdir / name)


def spark_kafka_job_command(
    site: Site, name: str, topic: str, dest: str, trigger: str
) -> list[str]:
    """Spark's Kafka connector copying ``topic`` to ``dest`` (checkpoint in a fresh folder)."""
    checkpoint = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=site.workdir))
    return spark_kafka_command(site.src, site.tgt, topic, dest, checkpoint, trigger)


def mirror_cmd(config: Path, *flags: str) -> list[str]:
    """``python -m mirror_lib.app.cli run CONFIG FLAGS``."""
    return [sys.executable, "-m", "mirror_lib.app.cli", "run", str(config), *flags]


def loop_cmd(site: Site, subcommand: str, topic: str, *flags: str) -> list[str]:
    """The benchmark's own internal subcommand ``baseline`` or ``copier`` on ``topic``."""
    base = [sys.executable, str(SCRIPT), subcommand, "--source", site.src, "--target", site.tgt]
    return [*base, "--topic", topic, *flags]


def loop_details(run: Started) -> dict[str, Any]:
    """The copy loop's own time (the JSON line it prints last)."""
    result = json.loads(run.out.lines[-1][1]) if run.out.lines else {}
    return {"inner_s": round(result.get("seconds", 0.0), 2)}


def prepare(site: Site, case: Case, method: Method, index: int, timeout_s: float) -> Job:
    """Create what ``method`` needs on the target and say how to run it (``index``: row number)."""
    topic = case.topic
    if method.kind in ("baseline", "tuned"):
        dest, tag = f"{method.kind}.{topic}", "(a)" if method.kind == "baseline" else "(a')"
        create_topic(site.tgt, dest)
        log(f"{tag} {method.kind} copy loop {topic} -> {dest}")
        flags = ["--tuned"] if method.kind == "tuned" else []
        cmd = loop_cmd(site, "baseline", topic, "--dest", dest, *flags)
        return Job(tag, cmd, dest, f"{method.kind}-{case.name}.err", timeout_s, loop_details)
    remote = f"A.{topic}"
    if method.kind == "copier":
        for name, n in ((remote, PARTITIONS), (METRICS_TOPIC, 1)):
            create_topic(site.tgt, name, n)
        create_topic(site.tgt, "mm2-offset-syncs.A.internal", 1)
        state = Path(tempfile.mkdtemp(prefix="state-", dir=site.workdir))
        log(f"(c) engine copy loop without Spark: copy_slice {topic} -> {remote}")
        cmd = loop_cmd(site, "copier", topic, "--state", str(state))
        return Job("(c)", cmd, remote, f"copier-{case.name}.err", timeout_s, loop_details)
    if method.kind == "mm2":
        name = f"mm2-{case.name}-{index}"
        cmd = mm2_job_command(site, name, topic, method.overrides, method.mm2_eos)
        how = ", ".join(f"{k}={v}" for k, v in method.overrides.items()) or "defaults"
        log(f"{method.label}: MirrorMaker 2 {topic} -> {remote} ({how}, EOS {method.mm2_eos})")
        return copy_until_complete(site, topic, remote, cmd, name, timeout_s, method.label)
    if method.kind == "spark-kafka":
        dest = f"spark.{topic}"
        create_topic(site.tgt, dest)
        name = f"spark-kafka-{case.name}-{index}"
        log(f"{method.label}: Spark's Kafka connector, availableNow, {topic} -> {dest}")
        cmd = spark_kafka_job_command(site, name, topic, dest, "availableNow")

        def spark_details(run: Started) -> dict[str, Any]:
            return exit_details(run, "started query", run.out.first("done"))

        return Job(
            method.label, cmd, dest, f"{name}.err", timeout_s + 120, spark_details, "  spark"
        )
    if method.kind != "mirror":
        raise ValueError(
            f"method kind {method.kind!r}: expected baseline, tuned, copier, mirror, mm2 or"
            " spark-kafka"
        )
    cfg = mirror_config(site, f"mm2-{case.name}-{index}.properties", topic, method.overrides)
    how = ", ".join(f"{k}={v}" for k, v in method.overrides.items()) or "defaults"
    log(f"{method.label}: mirror run {cfg.name} --once ({how})")
    cmd = mirror_cmd(cfg, "--once", "--timeout", str(int(timeout_s)))

    def details(run: Started) -> dict[str, Any]:
        return mirror_details(site.tgt, remote, run)

    log_name = f"mirror-{case.name}-{index}.err"
    return Job(method.label, cmd, remote, log_name, timeout_s + 120, details, "  mirror")


def mirror_details(target: str, remote: str, run: Started) -> dict[str, Any]:
    """Start-up times from the CLI's output, steady rate and slots from the metrics topic."""
    started, caught_up = run.out.first("started replication"), run.out.first("caught up")
    metrics = [
        e
        for e in read_metrics(target)
        if e.get("type") == "batch" and e.get("remote_topic") == remote
    ]
    extra: dict[str, Any] = {
        "started_s": round(started - run.t0, 1) if started else None,
        "caught_up_s": round(caught_up - run.t0, 1) if caught_up else None,
        "slots": sorted({e.get("slot") for e in metrics}),
        "chunks": len(metrics),
        "batches": len({e.get("batch_id") for e in metrics}),
    }
    if metrics:
        ts = sorted(e["ts_ms"] for e in metrics)
        first, last = ts[0], ts[-1]
        extra["first_metrics_s"] = round((first - run.t0_epoch_ms) / 1000, 1)
        after = [e for e in metrics if e["ts_ms"] > first + 100]
        if last - first > 1000:
            seconds = (last - first) / 1000
            extra["steady_rps"] = round(sum(e["records"] for e in after) / seconds)
            extra["steady_mbps"] = round(sum(e["bytes"] for e in after) / MB / seconds, 1)
        extra["metrics_records"] = sum(e["records"] for e in metrics)
    return extra


def copy_until_complete(
    site: Site,
    topic: str,
    dest: str,
    cmd: list[str],
    name: str,
    timeout_s: float,
    tag: str,
) -> Job:
    """MirrorMaker 2's job: it copies ``topic`` to ``dest`` and never exits by itself; it is
    over once ``dest`` holds the source's last record of every partition (then stopped by the
    runner). Its output (MM2's log) goes to the file ``<name>.out``."""
    watch = TailWatch(site.tgt, dest, last_records(site.src, topic))
    seen: dict[str, float] = {}

    def until() -> bool:
        if watch.complete():
            seen["at"] = time.monotonic()
            return True
        return False

    def details(run: Started) -> dict[str, Any]:
        watch.close()
        return exit_details(run, MM2_TASKS_STARTED, seen.get("at"))

    return Job(tag, cmd, dest, f"{name}.err", timeout_s, details, None, until)


def exit_details(run: Started, started_text: str, done: float | None) -> dict[str, Any]:
    """Start-up of a peer: ``started_s`` when its output first says ``started_text``,
    ``caught_up_s`` when the copy was complete (``done``); the runner adds the rate between the
    two (the peer's steady state, start-up left out)."""
    started = run.out.first(started_text)
    return {
        "started_s": round(started - run.t0, 1) if started else None,
        "caught_up_s": round(done - run.t0, 1) if done else None,
    }
