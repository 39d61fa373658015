#!/usr/bin/env python
"""Scale bench: how our cost grows with partitions, consumer groups and flows, beside
MirrorMaker 2 on the same brokers (`make bench-scale`; bench/README.md, "Scale and soak").

Cases (``--cases``, each on two fresh Apache Kafka brokers, source A and target B):

- ``partitions`` (``--partitions 4,100,1000,4000``): N partitions as topics of 4 (8 from 4,000
  on: at most 500 topics), ``--records-per-partition`` 200 B records each. The first plan of
  the flow, timed in this process (``SlicePlanner.initial_offset``: list, look up, create the
  remote topics, write the start positions; then one steady re-plan); ``mirror run --once``
  copying the backlog: records/s of its wall time, time to the first record on B, CPU; then a
  continuous ``mirror run`` with every partition quiet: CPU per second and RSS per process
  role after ``--idle-warm-up``. Beside it MM2 (defaults) copies the same backlog (complete
  when B holds every source offset) and then idles as long.
- ``groups`` (``--groups 10,1000,5000``): groups each with an offset on the 10 partitions of
  one copied topic; the checkpoint round and the group-offset-sync round, timed in process with
  their admin calls counted (``bench.group_rounds``).
- ``new-topic``: a continuous ``mirror run`` on ``topics = new.*`` with default settings; a
  topic created while it runs, one record written to it: seconds until that record is on B.
  Beside it MM2 with its defaults (``refresh.topics.interval.seconds = 600``) within
  ``--new-topic-wait``.
- ``flows`` (``--flows 1,5,10``): that many flows from one source in one session (one
  ``mirror run``, tasks.max 1 each), and a fan-out from A to 3 targets, heartbeats on those
  flows only: backlog wall time, idle CPU and RSS.

Results: ``results.json``, ``summary.md`` and plots (``scale-*.html``, PNG with kaleido) in
``--out``.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import curves, state
from bench import group_rounds as gr
from bench.measure import TreeCpu, broker_cpu_s, machine_cpu_s
from bench.methods import mirror_cmd
from bench.peers import mm2_command, mm2_properties
from bench.procs import Lines, log, mirror_props, popen, stop_group, write_props

SIZE = 200


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="partitions,groups,new-topic,flows")
    p.add_argument("--partitions", default="4,100,1000,4000")
    p.add_argument("--records-per-partition", type=int, default=2000)
    p.add_argument("--groups", default="10,1000,5000")
    p.add_argument("--flows", default="1,5,10")
    p.add_argument("--idle-seconds", type=float, default=120)
    p.add_argument("--idle-warm-up", type=float, default=60)
    p.add_argument("--new-topic-wait", type=float, default=180, help="seconds MM2 gets")
    p.add_argument("--no-mm2", action="store_true", help="leave MirrorMaker 2 out")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument(
        "--engine-ref",
        default=None,
        help="measure mirror_lib as of this git commit (before/after a change)",
    )
    p.add_argument("--engine-sha", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


class Brokers:
    """Two fresh brokers for one case; stopped on leaving."""

    def __init__(self, work: Path, aliases: tuple[str, ...] = ("source", "target")) -> None:
        from mirror_lib.testing.clusters import start_clusters

        self.started = start_clusters(aliases, work / "kafka", "kafka")
        self.boot = self.started.bootstraps
        self.src, self.tgt = self.boot["source"], self.boot["target"]
        self.pids = [h.pid for h in self.started.handles]  # type: ignore[attr-defined]

    def __enter__(self) -> Brokers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.started.stop()


def layout(n: int) -> list[tuple[str, int]]:
    """(topic, partitions) of a case of ``n`` partitions: topics of 4, of 8 from 4,000 on."""
    per = 8 if n >= 4000 else 4 if n >= 4 else n
    return [(f"t{i:03d}", per) for i in range(max(1, n // per))]


def load_topics(bootstrap: str, topics: list[tuple[str, int]], per_partition: int) -> int:
    """Create the topics and write ``per_partition`` records of 200 B to every partition."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in topics]).values():
        f.result(120)
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "queue.buffering.max.messages": 1_000_000}
    )
    value = b"x" * (SIZE - 8)
    total = 0
    for t, n in topics:
        for p in range(n):
            for i in range(per_partition):
                while True:
                    try:
                        producer.produce(t, value, b"k%07d" % i, partition=p)
                        break
                    except BufferError:
                        producer.poll(0.1)
                total += 1
        producer.poll(0)
    if producer.flush(600):
        raise RuntimeError("loading the topics did not finish")
    return total


def ends(admin: Any, topics: list[tuple[str, int]]) -> int:
    """Sum of the last stable offsets of ``topics`` (0 for a topic not there yet), in one
    listing, through the probe's one admin client (``admin_for``): the probe asks it twice a
    second, and a client made each time outlived its brokers, retrying them in the log."""
    from mirror_lib.errors import BrokerError
    from mirror_lib.kafka.lookups import partition_ends

    existing = admin.list_topics(timeout=30).topics
    tps = [(t, p) for t, n in topics if t in existing for p in range(n)]
    try:
        return sum(partition_ends(admin, tps).values()) if tps else 0
    except BrokerError:  # a topic just created, its leader not known yet: nothing there yet
        return 0


def admin_for(bootstrap: str) -> Any:
    """The probe's admin client of ``bootstrap``."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def start(cmd: list[str], log_path: Path) -> subprocess.Popen:
    """Start ``cmd`` (stderr to ``log_path``) with its stdout written to ``<log_path>.out`` as it
    comes: MM2 logs to stdout, and stops once a pipe nobody reads holds 64 KB of its lines (at
    1,000 partitions, before it copied a record)."""
    proc = popen(cmd, log_path)
    Lines(proc.stdout, None, log_path.with_suffix(".out"))
    return proc


def run_until(cmd: list[str], log_path: Path, done: Any, timeout_s: float) -> dict[str, Any]:
    """Start ``cmd``; sample its tree's CPU until it exits or ``done()`` says True; stop it.
    ``done()`` may also say "first" (a record arrived) or "last" (every record did; go on)."""
    t0 = time.monotonic()
    proc = start(cmd, log_path)
    tree = TreeCpu(proc.pid)
    first: float | None = None
    last: float | None = None
    cpu = 0.0
    try:
        while time.monotonic() - t0 < timeout_s:
            cpu = max(cpu, tree.cpu_s())
            if proc.poll() is not None:
                break
            result = done()
            if result in ("first", "last") and first is None:
                first = time.monotonic() - t0
            if result == "last" and last is None:
                last = time.monotonic() - t0
            if result is True:
                last = time.monotonic() - t0
                break
            time.sleep(0.5)
        wall = time.monotonic() - t0
    finally:
        stop_group(proc, signal.SIGTERM, grace=30)
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "rc": proc.returncode,
        "first_record_s": None if first is None else round(first, 1),
        "last_record_s": None if last is None else round(last, 1),
    }


def idle(
    cmd: list[str],
    log_path: Path,
    seconds: float,
    warm_up: float,
    brokers: list[int] | None = None,
) -> dict[str, Any]:
    """CPU per second of wall time and RSS per role of ``cmd``'s tree after ``warm_up``; with
    ``brokers`` (the source's and the target's pids), also each broker's CPU and the whole
    machine's over the same window: an idle tool's cost is mostly the brokers answering its
    fetches (docs/performance.md)."""
    proc = start(cmd, log_path)
    tree = TreeCpu(proc.pid)
    pids = brokers or []

    def sample(elapsed: float) -> list[float]:
        return [elapsed, tree.cpu_s(), machine_cpu_s(), *(broker_cpu_s([p]) for p in pids)]

    t0 = time.monotonic()
    a = b = None
    rss: dict[str, float] = {}
    try:
        while time.monotonic() - t0 < seconds and proc.poll() is None:
            elapsed = time.monotonic() - t0
            if elapsed >= warm_up:
                now = sample(elapsed)
                a, b = a or now, now
                for group, v in state.processes(proc.pid).items():
                    rss[group] = max(rss.get(group, 0.0), v["rss_mb"])
            time.sleep(2)
    finally:
        stop_group(proc, signal.SIGTERM, grace=30)
    if not (a and b and b[0] > a[0]):
        return {"cpu_pct": None, "rss_mb": {k: round(v) for k, v in rss.items()}}
    pct = [round((y - x) / (b[0] - a[0]) * 100, 1) for x, y in zip(a[1:], b[1:], strict=True)]
    out: dict[str, Any] = {"cpu_pct": pct[0], "rss_mb": {k: round(v) for k, v in rss.items()}}
    if brokers:
        out |= {"machine_pct": pct[1], "source_broker_pct": pct[2], "target_broker_pct": pct[3]}
    return out


def time_to_plan(config: Path) -> dict[str, float]:
    """The flow's first plan and one re-plan, in this process."""
    from mirror_lib.config.parse import load_config
    from mirror_lib.replication.copy.read_group import ReadGroup
    from mirror_lib.replication.planning.slices import SlicePlanner
    from mirror_lib.spark.source import KafkaPlanningParts

    options = ReadGroup.create(load_config(str(config)), "A->B").to_options()
    planner = SlicePlanner(KafkaPlanningParts(options), {})
    t0 = time.monotonic()
    initial = planner.initial_offset()
    t1 = time.monotonic()
    planner.plan(initial, first=False)
    return {"first_plan_s": round(t1 - t0, 2), "replan_s": round(time.monotonic() - t1, 2)}


def copy_progress(target: str, remote: list[tuple[str, int]], total: int, stop: bool) -> Any:
    """``run_until``'s ``done``: "first" once a record of ``remote`` is on ``target``, then at the
    last record True (``stop``: the tool is stopped there, as MM2 never ends) or "last"."""

    admin = admin_for(target)

    def done() -> Any:
        got = ends(admin, remote)
        if got >= total:
            return True if stop else "last"
        return "first" if got > 0 else False

    return done


def case_partitions(n: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Each tool on brokers of its own: the one that ran second on shared brokers met them warmed
    by the first (their compilers, the source's pages)."""
    topics = layout(n)
    out: dict[str, Any] = {"partitions": n, "topics": len(topics)}
    regex = "t[0-9]+"
    remote = [(f"A.{t}", p) for t, p in topics]
    with Brokers(work / "ours") as b:
        total = load_topics(b.src, topics, args.records_per_partition)
        out["records"] = total
        cfg = write_props(
            work / "mm2.properties", mirror_props(b.src, b.tgt, work / "state", regex)
        )
        ours = run_until(
            mirror_cmd(cfg, "--once", "--timeout", "3600"),
            work / "once.err",
            copy_progress(b.tgt, remote, total, stop=False),
            3700,
        )
        ours["records_per_s"] = rate(total, ours)
        out["ours"] = ours
        out["ours"] |= time_to_plan(cfg)  # a replan over the flow's ledger: the steady one
        out["ours_idle"] = idle(
            mirror_cmd(cfg, "--duration", str(args.idle_seconds + 60)),
            work / "idle.err",
            args.idle_seconds,
            args.idle_warm_up,
            b.pids,
        )
    log(f"partitions {n}: ours {out['ours']} idle {out['ours_idle']}")
    if not args.no_mm2:
        with Brokers(work / "mm2-brokers") as b:
            load_topics(b.src, topics, args.records_per_partition)
            props = mm2_properties(b.src, b.tgt, regex)
            mm2 = run_until(
                mm2_command(props, work / "mm2"),
                work / "mm2.err",
                copy_progress(b.tgt, remote, total, stop=True),
                3700,
            )
            mm2["records_per_s"] = rate(total, mm2)
            out["mm2"] = mm2
            out["mm2_idle"] = idle(
                mm2_command(props, work / "mm2-idle"),
                work / "mm2-idle.err",
                args.idle_seconds,
                args.idle_warm_up,
                b.pids,
            )
        log(f"partitions {n}: MM2 {out['mm2']} idle {out['mm2_idle']}")
    return out


def rate(total: int, run: dict[str, Any]) -> int | None:
    """Records per second from the start to the last record on B (else to the end of the run)."""
    seconds = run.get("last_record_s") or run["wall_s"]
    return round(total / seconds) if seconds else None


def case_groups(counts: list[int], work: Path) -> list[dict[str, Any]]:
    from confluent_kafka.admin import AdminClient

    results = []
    with Brokers(work) as b:
        topics = [(gr.TOPIC, gr.PARTITIONS)]
        load_topics(b.src, topics, 1000)
        props = mirror_props(
            b.src, b.tgt, work / "state", gr.TOPIC, **{"sync.group.offsets.enabled": "true"}
        )
        cfg = write_props(work / "mm2.properties", props)
        run_until(
            mirror_cmd(cfg, "--once", "--timeout", "600"), work / "once.err", lambda: False, 700
        )
        admin = AdminClient({"bootstrap.servers": b.src})
        his = [
            hi
            for (_t, p), (_lo, hi) in sorted(
                __import__("mirror_lib.kafka.lookups", fromlist=["x"])
                .partition_bounds(admin, [(gr.TOPIC, p) for p in range(gr.PARTITIONS)])
                .items()
            )
        ]
        done = 0
        for n in counts:
            gr.commit_groups(b.src, n - done, his, prefix=f"bench-group-{n}")
            done = n  # the groups of the smaller cases stay: n in all
            result = gr.rounds(cfg, n, work)
            for key in ("first_round", "round", "first_sync", "sync"):
                result[key].pop("result", None)
            log(f"groups {n}: {result}")
            results.append(result)
    return results


def case_new_topic(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Three topics created 20 s apart while a run (ours, then MM2) is going: each one's
    seconds until its first record is on B. Apart because discovery is periodic: one topic
    measures only where it fell in the period."""
    import confluent_kafka as ck

    from mirror_lib.testing.kafka_io import create_topic

    out: dict[str, Any] = {}
    with Brokers(work) as b:
        create_topic(b.src, "new.first", 1)
        config = write_props(
            work / "mm2.properties", mirror_props(b.src, b.tgt, work / "state", "new.*")
        )
        runs = [("ours", mirror_cmd(config, "--duration", "900"))]
        if not args.no_mm2:
            runs.append(("mm2", mm2_command(mm2_properties(b.src, b.tgt, "new.*"), work / "mm2")))
        producer = ck.Producer({"bootstrap.servers": b.src})
        for name, cmd in runs:
            proc = start(cmd, work / f"new-{name}.err")
            try:
                time.sleep(90)  # started, first slice running (MM2: its tasks up)
                made: dict[str, float] = {}
                for i in range(3):
                    topic = f"new.{name}{i}"
                    create_topic(b.src, topic, 1)
                    made[topic] = time.monotonic()
                    producer.produce(topic, b"v", b"k")
                    producer.flush(30)
                    if i < 2:
                        time.sleep(20)
                seen: dict[str, float | None] = dict.fromkeys(made)
                probe = admin_for(b.tgt)
                deadline = time.monotonic() + args.new_topic_wait
                while time.monotonic() < deadline and proc.poll() is None:
                    for topic, t0 in made.items():
                        if seen[topic] is None and ends(probe, [(f"A.{topic}", 1)]) > 0:
                            seen[topic] = round(time.monotonic() - t0, 1)
                    if all(v is not None for v in seen.values()):
                        break
                    time.sleep(0.5)
                got = [v for v in seen.values() if v is not None]
                out[name] = {
                    "seconds": list(seen.values()),
                    "max_s": max(got) if len(got) == len(seen) else None,
                    "waited_s": args.new_topic_wait,
                }
                log(f"new topic, {name}: {out[name]}")
            finally:
                stop_group(proc, signal.SIGTERM, grace=30)
    return out


def case_flows(counts: list[int], args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    results = []
    aliases = ("source", "target", "c", "d")
    with Brokers(work, aliases) as b:
        total_per_topic = load_topics(b.src, [("f0", 4)], args.records_per_partition)
        for n in [*counts, "fanout"]:
            props = {"clusters": "A, B", "A.bootstrap.servers": b.src, "B.bootstrap.servers": b.tgt}
            props = {**mirror_props(b.src, b.tgt, work / f"state-{n}", "f0"), **props}
            for key in ("A->B.enabled", "B->A.enabled", "B->A.emit.heartbeats.enabled"):
                props.pop(key, None)
            props["topics"] = "f0"
            # Heartbeats on the enabled flows only: MM2's default of every cluster pair would
            # have n*(n-1) pairs of these aliases, all of one cluster, write heartbeats into it
            # that every flow then copies, and an idle session would not be idle.
            props["emit.heartbeats.enabled"] = "false"
            if n == "fanout":
                props["clusters"] = "A, B, C, D"
                props["C.bootstrap.servers"], props["D.bootstrap.servers"] = (
                    b.boot["c"],
                    b.boot["d"],
                )
                for t in "BCD":
                    props[f"A->{t}.enabled"] = "true"
                    props[f"A->{t}.emit.heartbeats.enabled"] = "true"
                props["mirror.fanout.enabled"] = "true"
            else:
                # n flows from A to B, each with its own source alias name on the same cluster
                aliases_n = [f"A{i}" for i in range(int(n))]
                props["clusters"] = ", ".join([*aliases_n, "B"])
                for a in aliases_n:
                    props[f"{a}.bootstrap.servers"] = b.src
                    props[f"{a}->B.enabled"] = "true"
                    props[f"{a}->B.emit.heartbeats.enabled"] = "true"
                props["tasks.max"] = "1"
                props.pop("A.bootstrap.servers", None)
            cfg = write_props(work / f"flows-{n}.properties", props)
            once = run_until(
                mirror_cmd(cfg, "--once", "--timeout", "1800"),
                work / f"f-{n}.err",
                lambda: False,
                1900,
            )
            quiet = idle(
                mirror_cmd(cfg, "--duration", str(args.idle_seconds + 60)),
                work / f"f-{n}-idle.err",
                args.idle_seconds,
                args.idle_warm_up,
            )
            row = {"flows": n, "once": once, "idle": quiet, "records": total_per_topic}
            log(f"flows {n}: {row}")
            results.append(row)
    return results


def render(results: dict[str, Any], out: Path) -> str:
    """The Markdown summary and the plots."""
    lines = []
    parts = results.get("partitions", [])
    if parts:
        xs = [r["partitions"] for r in parts]

        def col(side: str, key: str) -> list[Any]:
            return [(r.get(side) or {}).get(key) for r in parts]

        idle_pct = {
            s: [(r.get(f"{s}_idle") or {}).get("cpu_pct") for r in parts] for s in ("ours", "mm2")
        }
        curves.plot(
            out / "scale-rate",
            "Backlog copy rate",
            {
                "mirror run --once": (xs, col("ours", "records_per_s")),
                "MirrorMaker 2": (xs, col("mm2", "records_per_s")),
            },
            "partitions",
            "records/s",
            log_x=True,
        )
        curves.plot(
            out / "scale-idle",
            "CPU with every partition quiet",
            {"mirror run": (xs, idle_pct["ours"]), "MirrorMaker 2": (xs, idle_pct["mm2"])},
            "partitions",
            "% of a core",
            log_x=True,
        )
        curves.plot(
            out / "scale-plan",
            "Time to plan and to the first record",
            {
                "first plan": (xs, col("ours", "first_plan_s")),
                "re-plan": (xs, col("ours", "replan_s")),
                "first record on B (ours)": (xs, col("ours", "first_record_s")),
            },
            "partitions",
            "seconds",
            log_x=True,
        )
        rows = [
            {
                "partitions": r["partitions"],
                "topics": r["topics"],
                "records": r["records"],
                "ours rec/s": r["ours"].get("records_per_s"),
                "MM2 rec/s": col("mm2", "records_per_s")[i],
                "ours CPU-s": r["ours"]["cpu_s"],
                "MM2 CPU-s": col("mm2", "cpu_s")[i],
                "first plan s": r["ours"].get("first_plan_s"),
                "re-plan s": r["ours"].get("replan_s"),
                "first record s": r["ours"].get("first_record_s"),
                "idle ours %": idle_pct["ours"][i],
                "idle MM2 %": idle_pct["mm2"][i],
                "idle machine %, ours / MM2": " / ".join(
                    str((r.get(f"{s}_idle") or {}).get("machine_pct")) for s in ("ours", "mm2")
                ),
                "ours RSS MB": (r.get("ours_idle") or {}).get("rss_mb"),
            }
            for i, r in enumerate(parts)
        ]
        lines.append(curves.table(rows, list(rows[0])))
    groups = results.get("groups", [])
    if groups:
        xs = [g["groups"] for g in groups]
        curves.plot(
            out / "scale-groups",
            "Checkpoint and group-sync rounds",
            {
                k: (xs, [g[k]["wall_s"] for g in groups])
                for k in ("first_round", "round", "first_sync", "sync")
            },
            "consumer groups",
            "seconds",
            log_x=True,
        )
        rows = [
            {
                "groups": g["groups"],
                **{
                    f"{k} s / CPU-s / admin calls": (
                        f"{g[k]['wall_s']} / {g[k]['cpu_s']} / {sum(g[k]['admin_calls'].values())}"
                    )
                    for k in ("first_round", "round", "first_sync", "sync")
                },
            }
            for g in groups
        ]
        lines.append(curves.table(rows, list(rows[0])))
    if "new_topic" in results:
        lines.append(f"New topic to its first record on B: {results['new_topic']}\n")
    if "flows" in results:
        counted = [f for f in results["flows"] if f["flows"] != "fanout"]
        xs = [f["flows"] for f in counted]
        curves.plot(
            out / "scale-flows",
            "Flows in one session, every one quiet",
            {
                "CPU, % of a core": (xs, [f["idle"]["cpu_pct"] for f in counted]),
                "RSS, GB (all processes)": (
                    xs,
                    [round(sum(f["idle"]["rss_mb"].values()) / 1024, 2) for f in counted],
                ),
            },
            "flows",
            "% of a core / GB",
        )
        rows = [
            {
                "flows": f["flows"],
                "backlog wall s": f["once"]["wall_s"],
                "backlog CPU-s": f["once"]["cpu_s"],
                "idle %": f["idle"]["cpu_pct"],
                "idle RSS MB": f["idle"]["rss_mb"],
            }
            for f in results["flows"]
        ]
        lines.append(curves.table(rows, list(rows[0])))
    text = "\n".join(lines)
    (out / "summary.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="mirror-scale-"))
    out = args.out or work / "results"
    out.mkdir(parents=True, exist_ok=True)
    cases = {c.strip() for c in args.cases.split(",")}
    results: dict[str, Any] = {}
    if args.engine_ref:
        # this process imported the working tree's mirror_lib already: start again on the export
        import os

        from bench.engine import export_engine, subprocess_env

        sha = export_engine(args.engine_ref, work / "engine")
        log(f"measuring mirror_lib from git {sha} ({args.engine_ref})")
        rest = sys.argv[1:] if argv is None else list(argv)
        i = rest.index("--engine-ref")
        rest[i : i + 2] = ["--engine-sha", sha, "--out", str(out)]
        os.execve(sys.executable, [sys.executable, __file__, *rest], subprocess_env())
    if args.engine_sha:
        results["engine"] = args.engine_sha
    log(f"scale: work folder {work}, results in {out}")
    if "partitions" in cases:
        results["partitions"] = [
            case_partitions(n, args, work / f"p{n}") for n in ints(args.partitions)
        ]
    if "groups" in cases:
        results["groups"] = case_groups(ints(args.groups), work / "groups")
    if "new-topic" in cases:
        results["new_topic"] = case_new_topic(args, work / "new-topic")
    if "flows" in cases:
        results["flows"] = case_flows(ints(args.flows), args, work / "flows")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(render(results, out))
    log(f"results in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
