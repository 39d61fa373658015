#!/usr/bin/env python
"""Soak bench: `mirror run` for hours at a steady rate, every piece of its state sampled each
minute and extrapolated to 30 days (`make bench-soak`; bench/README.md, "Scale and soak").

Two Apache Kafka brokers (source A, target B). A load process writes ``--rate`` records/s of
100 B to ``--partitions`` partitions of topic ``soak``; ``--groups`` consumer groups on A commit
offsets a few seconds behind the head every 10 s (groups without members, as consumers that
commit and leave would); ``mirror run`` replicates with every part on: checkpoints, group
offset sync, heartbeats and the tables, with the maintenance settings given. Every
``--sample-seconds`` the bench records (``bench.state``): each Delta table's files, bytes and
log entries, the Spark checkpoint folders, the other files of ``mirror.state.dir``, each
internal topic's bytes in the brokers' log folders, the ledger's entries, and per process role
the RSS, open files and threads. At the end: every series' value after 30 days on a line
fitted to the run after its first quarter, plots, and a Markdown summary.

Every setting is the engine's default unless a flag says otherwise. A table's live files grow
for ``mirror.tables.retention.days``, the files compaction replaced (``replaced_bytes``) and its
log for ``mirror.tables.history.hours``: each series is taken to 30 days on its fitted line for
that long, and the files on disk are the live and the replaced ones added. ``--maintenance-seconds``
and ``--history-hours`` shorten time where a short run should see more rounds, at a price: each
round rewrites a table's part-full file again, so a shorter interval overstates the replaced
files.

    .venv/bin/python bench/soak.py --minutes 120                 # the soak of the issue
    .venv/bin/python bench/soak.py --minutes 5 --sample-seconds 20 --maintenance-seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import curves, state
from bench.methods import mirror_cmd
from bench.procs import Lines, log, mirror_props, popen, stop_group, write_props

TOPIC = "soak"
INTERNAL = (
    "mm2-metrics.A.internal",
    "mm2-offset-syncs.A.internal",
    "A.checkpoints.internal",
    "heartbeats",
    "A.heartbeats",
    "__consumer_offsets",
    "__transaction_state",
)
GB = 1e9


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=120)
    p.add_argument("--rate", type=float, default=5_000, help="records/s of the load")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--groups", type=int, default=20, help="consumer groups committing on A")
    p.add_argument("--sample-seconds", type=float, default=60)
    p.add_argument(
        "--maintenance-seconds",
        type=float,
        default=3600,
        help="mirror.tables.maintenance.interval.seconds (the engine's default: 3600)",
    )
    p.add_argument(
        "--history-hours",
        type=float,
        default=24,
        help="mirror.tables.history.hours (the engine's default: 24)",
    )
    p.add_argument(
        "--batch-seconds",
        type=float,
        default=300,
        help="mirror.batch.duration.seconds: a Spark micro-batch (the engine's default: 300)",
    )
    p.add_argument(
        "--min-batches-to-retain",
        type=int,
        default=100,
        help="spark.sql.streaming.minBatchesToRetain of the run's session (Spark's default: 100)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another flow property (repeatable)",
    )
    p.add_argument("--out", type=Path, default=None, help="results folder (default: a temp dir)")
    args = p.parse_args(argv)
    args.props = dict(kv.split("=", 1) for kv in args.set)  # the --set flow properties
    return args


class Groups(threading.Thread):
    """``n`` groups on A, each committing every 10 s an offset a little behind each partition's
    high watermark (a different distance per group), so that every checkpoint round and group
    sync has work."""

    def __init__(self, bootstrap: str, n: int, partitions: int) -> None:
        super().__init__(name="soak-groups", daemon=True)
        self.bootstrap, self.n, self.partitions = bootstrap, n, partitions
        self.stopping = threading.Event()
        self.commits = 0

    def run(self) -> None:
        import confluent_kafka as ck
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 4})
        probe = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak-probe"})
        try:
            while not self.stopping.wait(10):
                his = [
                    probe.get_watermark_offsets(ck.TopicPartition(TOPIC, p), timeout=10)[1]
                    for p in range(self.partitions)
                ]
                futures = []
                for g in range(self.n):
                    tps = [
                        ck.TopicPartition(TOPIC, p, max(0, hi - 10 * g)) for p, hi in enumerate(his)
                    ]
                    request = ck.ConsumerGroupTopicPartitions(f"soak-group-{g}", tps)
                    futures += admin.alter_consumer_group_offsets([request]).values()
                for f in futures:
                    f.result(30)
                self.commits += 1
        except Exception as exc:  # the soak goes on; the summary says the groups stopped
            log(f"groups stopped committing: {exc}")
        finally:
            probe.close()


def ledger_entries(bootstrap: str) -> int:
    """Committed offsets of the flow's ledger groups on B."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    groups = [
        g.group_id
        for g in admin.list_consumer_groups().result(30).valid
        if g.group_id.startswith("__mirror_ledger.")
    ]
    n = 0
    for g in groups:
        (fut,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)]).values()
        n += len(fut.result(30).topic_partitions)
    return n


def sample(
    t0: float, work: Path, state_path: Path, log_dirs: list[Path], pid: int, tgt: str
) -> dict[str, Any]:
    """One sample of everything (see the module docstring)."""
    row: dict[str, Any] = {"t_s": round(time.monotonic() - t0, 1)}
    row["state"] = state.state_dir(state_path)
    row["topics"] = state.topic_sizes(log_dirs, INTERNAL)
    row["topics"]["soak (source)"] = state.topic_sizes(log_dirs[:1], [TOPIC])[TOPIC]
    row["processes"] = state.processes(pid)
    try:
        row["ledger_entries"] = ledger_entries(tgt)
    except Exception as exc:  # a busy broker: the next minute counts
        log(f"ledger: {exc}")
    return row


def windows(args: argparse.Namespace) -> list[tuple[str, str, float]]:
    """(series prefix, what bounds it, seconds) of every series that keeps what it gains only
    for a time: each grows along its fitted line for that long, then stays flat
    (docs/operations/state.md)."""
    retention_s = float(args.props.get("mirror.tables.retention.days", 7)) * curves.DAY_S
    week_s = 7 * curves.DAY_S
    return [
        (
            "state.spark_checkpoints.",
            f"Spark's last {args.min_batches_to_retain} batches of {args.batch_seconds:g} s",
            args.min_batches_to_retain * args.batch_seconds,
        ),
        ("state.tables.*.log_", "mirror.tables.history.hours", args.history_hours * 3600),
        ("state.tables.*.replaced_", "mirror.tables.history.hours", args.history_hours * 3600),
        ("state.tables.", "mirror.tables.retention.days", retention_s),
        ("topics.mm2-metrics.", "the metrics topic's retention.ms (7 days)", week_s),
        ("topics.", "a segment's roll before compaction (segment.ms, 7 days)", week_s),
    ]


def window_of(name: str, bounds: list[tuple[str, str, float]]) -> tuple[str, float | None]:
    """What of :func:`windows` bounds series ``name``, and for how many seconds (``("", None)``:
    nothing)."""
    for prefix, why, seconds in bounds:
        head, _, tail = prefix.partition("*")
        if name.startswith(head) and (not tail or tail in name[len(head) :]):
            return why, seconds
    return "", None


def summarize(samples: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Per flattened series: last, peak, slope per day, value at 30 days and what bounds it."""
    ts = [s["t_s"] for s in samples]
    flat = [state.flatten({k: v for k, v in s.items() if k != "t_s"}) for s in samples]
    names = sorted({k for f in flat for k in f})
    bounds = windows(args)
    out = {}
    for name in names:
        points = [(t, f[name]) for t, f in zip(ts, flat, strict=True) if name in f]
        why, window = window_of(name, bounds)
        fitted = curves.at_30_days([t for t, _ in points], [y for _, y in points], window_s=window)
        out[name] = fitted | {"bounded_by": why}
    for name in [n for n in out if n.startswith("state.tables.") and ".disk_" in n]:
        # on disk = live + replaced, each on its own window: one line through the sum would
        # take the replaced files, kept for the history's hours, on to the retention's days
        table, kind = name.rsplit(".disk_", 1)
        live, replaced = out.get(f"{table}.{kind}"), out.get(f"{table}.replaced_{kind}")
        if live is not None and replaced is not None:
            at30 = max(live["at_30_days"] + replaced["at_30_days"], out[name]["peak"])
            out[name] |= {"at_30_days": at30, "bounded_by": "its live and replaced files' lines"}
    return out


def our_state_at_30_days(fits: dict[str, Any]) -> float:
    """Bytes of our state after 30 days (tables: live files, replaced files and log; Spark
    checkpoints; the state dir's other files), each part on its own line and window: the
    budget's sum."""
    kept = (".bytes", ".replaced_bytes", ".log_bytes")
    parts = [
        n
        for n in fits
        if (n.startswith("state.tables.") and n.endswith(kept))
        or (n.startswith("state.spark_checkpoints.") and n.endswith(".bytes"))
        or n.startswith("state.files.")
    ]
    return sum(fits[n]["at_30_days"] for n in parts)


def rss_growth(
    samples: list[dict[str, Any]], key: str = "rss_mb", window_s: float | None = None
) -> dict[str, float | None]:
    """Per process role: mean ``key`` over the run's last ``window_s`` against its first (after
    the first sample), as growth in percent. The window is an hour, as the budget reads it,
    once the run lasts two hours; a third of a shorter run."""
    out: dict[str, float | None] = {}
    span = samples[-1]["t_s"] if samples else 0
    window = window_s or (3600 if span >= 2 * 3600 else span / 3)
    for group in ("driver", "jvm", "worker"):
        first = [
            s["processes"].get(group, {}).get(key)
            for s in samples[1:]
            if s["t_s"] <= samples[0]["t_s"] + window
        ]
        last = [s["processes"].get(group, {}).get(key) for s in samples if s["t_s"] > span - window]
        first = [x for x in first if x]
        last = [x for x in last if x]
        if first and last:
            a, b = sum(first) / len(first), sum(last) / len(last)
            out[group] = round((b - a) / a * 100, 1)
        else:
            out[group] = None
    return out


def report(samples: list[dict[str, Any]], args: argparse.Namespace, out: Path) -> str:
    """The Markdown summary; writes the plots, ``samples.json`` and ``summary.json``."""
    fits = summarize(samples, args)
    (out / "samples.json").write_text(json.dumps(samples))
    (out / "summary.json").write_text(json.dumps(fits, indent=1))
    ts_h = [s["t_s"] / 3600 for s in samples]
    plots = []
    groups = {
        "tables_bytes": (
            "Delta tables: live files, replaced files and log (bytes)",
            "bytes",
            [
                f"state.tables.{t}.{k}"
                for t in samples[-1]["state"]["tables"]
                for k in ("bytes", "replaced_bytes", "log_bytes")
            ],
        ),
        "tables_files": (
            "Delta tables: files of the current version, and log entries",
            "files",
            [
                f"state.tables.{t}.{k}"
                for t in samples[-1]["state"]["tables"]
                for k in ("files", "log_entries")
            ],
        ),
        "checkpoints": (
            "Spark checkpoint folders: bytes",
            "bytes",
            [
                f"state.spark_checkpoints.{c}.bytes"
                for c in samples[-1]["state"]["spark_checkpoints"]
            ],
        ),
        "topics": (
            "Internal topics on the brokers: bytes",
            "bytes",
            [f"topics.{t}" for t in samples[-1]["topics"]],
        ),
        "rss": (
            "RSS per process role",
            "MB",
            [
                f"processes.{g}.{k}"
                for g in samples[-1]["processes"]
                for k in ("rss_mb", "anon_mb")
                if k in samples[-1]["processes"][g]
            ],
        ),
    }
    flat = [state.flatten({k: v for k, v in s.items() if k != "t_s"}) for s in samples]
    for key, (title, unit, names) in groups.items():
        series = {n.split(".", 1)[1]: (ts_h, [f.get(n, 0) for f in flat]) for n in names}
        lines = {
            f"{n.split('.', 1)[1]} (30-day line)": (
                [ts_h[-1], 720.0],
                [flat[-1].get(n, 0), fits[n]["at_30_days"] if n in fits else 0],
            )
            for n in names
        }
        plots += curves.plot(out / f"soak-{key}", title, series, "hours", unit, lines=lines)
    ours = our_state_at_30_days(fits)
    rows = []
    for name in sorted(fits):
        if name.endswith(("bytes", "entries", "files", "_mb", "fds", "threads")) or (
            name.startswith("topics.")
        ):
            f = fits[name]
            rows.append(
                {
                    "series": name,
                    "last": f"{f['last']:,.0f}",
                    "peak": f"{f['peak']:,.0f}",
                    "per day": f"{f['per_day']:+,.0f}",
                    "at 30 days": f"{f['at_30_days']:,.0f}",
                    "bounded by": f["bounded_by"] or "-",
                }
            )
    span = samples[-1]["t_s"] if samples else 0
    growth = rss_growth(samples)
    thirds = rss_growth(samples, window_s=span / 3)
    anon = rss_growth(samples, "anon_mb")
    text = (
        f"Soak: {args.minutes:g} min at {args.rate:g} records/s over {args.partitions} "
        f"partitions, {args.groups} groups; maintenance every {args.maintenance_seconds:g} s, "
        f"history {args.history_hours:g} h; {len(samples)} samples every "
        f"{args.sample_seconds:g} s.\n\n"
        f"Our state (tables with their logs, Spark checkpoints, the state dir's other files) "
        f"after 30 days, each on its fitted line for as long as it keeps what it gains: "
        f"**{ours / GB:.2f} GB**. The whole state dir on one line, nothing bounded: "
        f"{fits.get('state.state_bytes', {}).get('at_30_days', 0) / GB:.2f} GB. RSS growth, last "
        f"against first hour (a third below two hours), percent: {growth}; last third against "
        f"first: {thirds}; anonymous memory alone: {anon}.\n\n"
        + curves.table(rows, ["series", "last", "peak", "per day", "at 30 days", "bounded by"])
        + "\nPlots: "
        + ", ".join(p.name for p in plots)
        + "\n"
    )
    (out / "summary.md").write_text(text)
    return text


def write_config(
    args: argparse.Namespace, src: str, tgt: str, state_path: Path, path: Path
) -> Path:
    """The run's ``mm2.properties``: every part on, the bench's intervals; and the Spark
    setting of the local session the run starts (as spark-submit's ``--conf``)."""
    props = mirror_props(
        src,
        tgt,
        state_path,
        TOPIC,
        **{
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "60",
            "mirror.tables.maintenance.interval.seconds": f"{args.maintenance_seconds:g}",
            "mirror.tables.history.hours": f"{args.history_hours:g}",
            "mirror.batch.duration.seconds": f"{args.batch_seconds:g}",
            **args.props,
        },
    )
    if args.min_batches_to_retain != 100:
        os.environ["PYSPARK_SUBMIT_ARGS"] = (
            f"--conf spark.sql.streaming.minBatchesToRetain={args.min_batches_to_retain} "
            "pyspark-shell"
        )
    return write_props(path, props)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from mirror_lib.testing.clusters import start_clusters
    from mirror_lib.testing.kafka_io import create_topic
    from mirror_lib.testing.load import SteadyLoad

    work = Path(tempfile.mkdtemp(prefix="mirror-soak-"))
    out = args.out or work / "results"
    out.mkdir(parents=True, exist_ok=True)
    log(f"soak: work folder {work}, results in {out}")
    brokers = start_clusters(("source", "target"), work / "kafka", "kafka")
    src, tgt = brokers.bootstraps["source"], brokers.bootstraps["target"]
    log_dirs = [Path(b.log_dir) for b in brokers.handles]  # type: ignore[attr-defined]
    stopping = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(now=True))
    load = groups = proc = None
    samples: list[dict[str, Any]] = []
    try:
        create_topic(src, TOPIC, args.partitions)
        state_path = work / "state"
        config = write_config(args, src, tgt, state_path, work / "mm2.properties")
        seconds = args.minutes * 60
        load = SteadyLoad(src, TOPIC, args.partitions, args.rate, work).start()
        groups = Groups(src, args.groups, args.partitions)
        groups.start()
        proc = popen(mirror_cmd(config, "--duration", str(seconds + 60)), work / "mirror.err")
        lines = Lines(proc.stdout, None, work / "mirror.out")
        started = time.monotonic()
        while lines.first("started replication") is None and time.monotonic() - started < 600:
            if proc.poll() is not None:
                break
            time.sleep(1)
        log(f"mirror run started its replication after {time.monotonic() - started:.0f} s")
        t0 = time.monotonic()
        next_sample = t0
        while time.monotonic() - t0 < seconds and not stopping["now"]:
            if proc.poll() is not None:
                log(f"mirror run exited early: {proc.returncode}; see {work}/mirror.err")
                break
            if time.monotonic() >= next_sample:
                row = sample(t0, work, state_path, log_dirs, proc.pid, tgt)
                samples.append(row)
                next_sample += args.sample_seconds
                tables = row["state"]["tables"]
                log(
                    f"t={row['t_s']:.0f}s state {row['state']['state_bytes'] / 1e6:.1f} MB, "
                    f"files {sum(t['files'] for t in tables.values())}, log entries "
                    f"{sum(t['log_entries'] for t in tables.values())}, acked {load.acked():,}"
                )
            time.sleep(1)
        lines.join()
    finally:
        if groups is not None:
            groups.stopping.set()
        if proc is not None:
            stop_group(proc, signal.SIGINT, grace=60)
        if load is not None:
            load.stop()
        brokers.stop()
    if len(samples) < 2:
        log("not enough samples for a summary")
        return 1
    print(report(samples, args, out))
    log(f"results in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
