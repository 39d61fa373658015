"""Process-tree accounting from /proc: CPU, RSS and PSS of the copier's tree, brokers, machine.

``Meter`` wraps one timed section: wall time, machine CPU, the brokers' CPU, and (through a
``Sampler`` thread, every 0.2 s) the CPU and memory of the process tree ``attach``-ed to it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1_000_000


def machine_cpu_and_steal_s() -> tuple[float, float]:
    """user+nice+system of all CPUs since boot, and their steal (CPU time the hypervisor gave
    to others while this machine's CPUs wanted it), seconds (/proc/stat): on a shared host, the
    figures of a run with much steal measure the host, not the tools."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return (int(fields[1]) + int(fields[2]) + int(fields[3])) / CLK_TCK, int(fields[8]) / CLK_TCK


#: the canary's loop: about 0.1 s of one core on a healthy machine of this kind
CANARY_ITERATIONS = 2_000_000


def cpu_canary_ms(tries: int = 3) -> float:
    """Milliseconds one core takes for a fixed pure-Python loop, the best of ``tries``. A shared
    host can make the same CPU several times slower without any steal (the latency probe alone
    once took 1.09 cores where it had taken 0.39: bench/journal/2026-12-03-a-slower-host.md),
    so runs are compared only at a like canary."""
    best = float("inf")
    for _ in range(tries):
        started = time.perf_counter()
        total = 0
        for i in range(CANARY_ITERATIONS):
            total += i
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


def machine_cpu_s() -> float:
    """user+nice+system of all CPUs since boot, seconds (/proc/stat)."""
    return machine_cpu_and_steal_s()[0]


def _stat(pid: int) -> tuple[str, list[str]] | None:
    """(comm, the fields after it) of /proc/<pid>/stat, else None; fields[0] is field 3 (state)
    of proc(5)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    rp = s.rfind(")")
    return s[s.find("(") + 1 : rp], s[rp + 2 :].split()


def proc_stat(pid: int) -> tuple[str, int, float, int] | None:
    """(comm, ppid, cpu seconds utime+stime, rss bytes) of a live process, else None."""
    st = _stat(pid)
    if st is None or st[1][0] == "Z":
        return None
    comm, fields = st
    return (
        comm,
        int(fields[1]),
        (int(fields[11]) + int(fields[12])) / CLK_TCK,
        int(fields[21]) * PAGE,
    )


def all_pids() -> list[int]:
    """Every pid in /proc."""
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


def reaped_cpu_s(pid: int) -> float:
    """CPU seconds of the children ``pid`` has waited for (cutime+cstime), 0 if gone."""
    st = _stat(pid)
    return 0.0 if st is None else (int(st[1][13]) + int(st[1][14])) / CLK_TCK


def ignores_sigchld(pid: int) -> bool:
    """Whether ``pid`` ignores SIGCHLD: the kernel then reaps its children and discards their
    CPU time instead of adding it to the parent's ``cutime``."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) >> (signal.SIGCHLD - 1) & 1)
    except OSError:
        pass
    return False


class TreeCpu:
    """CPU seconds a process tree has used so far, its finished processes included, from
    samples of ``/proc``.

    A finished process's time moves to its parent's ``cutime`` once the parent waits for it,
    so the live processes' own and reaped times cover it, unless the parent ignores SIGCHLD:
    Spark's Python worker daemon does, and the kernel discards each finished worker's time.
    Those children count at their last sampled figure (what they used after it is lost)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.orphaned: dict[int, bool] = {}  # pid -> its parent discards its time
        self.last: dict[int, float] = {}  # such a pid -> its last sampled CPU s
        self.total = 0.0  # as of the last sample

    def sample(self) -> dict[int, tuple[str, float, int]]:
        """Look at the tree now; returns :func:`descendants` of the root."""
        tree = descendants(self.root)
        for pid, (_comm, cpu, _rss) in tree.items():
            if pid not in self.orphaned:
                st = proc_stat(pid)
                self.orphaned[pid] = st is not None and ignores_sigchld(st[1])
            if self.orphaned[pid]:
                self.last[pid] = max(cpu, self.last.get(pid, 0.0))
        live = sum(cpu for _c, cpu, _r in tree.values()) + sum(reaped_cpu_s(p) for p in tree)
        self.total = live + sum(c for pid, c in self.last.items() if pid not in tree)
        return tree

    def cpu_s(self) -> float:
        """Sample, then the tree's CPU seconds so far."""
        self.sample()
        return self.total


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
    st = _stat(pid)
    return None if st is None else int(st[1][1])


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
        return "mm2 jvm" if "org.apache.kafka.connect.mirror.MirrorMaker" in args else "jvm"
    if any(a.endswith("spark_kafka.py") for a in args):
        return "spark-kafka job (driver)"
    if "pyspark.daemon" in args:
        return "pyspark " + args[-1].rsplit(".", 1)[-1]  # worker kind, e.g. worker, *_runner
    if "mirror_lib.app.cli" in args:
        return "mirror cli (driver)"
    script = next((i for i, a in enumerate(args) if a.endswith("replication.py")), None)
    if script is not None:
        return "bench " + (args[script + 1] if script + 1 < len(args) else "")
    return comm


def broker_cpu_s(pids: list[int]) -> float:
    """utime+stime of the broker processes, seconds."""
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
        """Machine CPU that neither the copier, the brokers nor the benchmark used."""
        return self.machine_cpu_s - self.copier_cpu_s - self.broker_cpu_s - self.self_cpu_s


class Meter:
    """Context for one measured section; ``attach(pid)`` sets the copier process tree."""

    def __init__(self, broker_pids: list[int], keep: set[int]) -> None:
        self.sampler = Sampler(broker_pids, keep)
        self.broker_pids = broker_pids
        self.m = Measure()
        self._end: float | None = None

    @classmethod
    def with_background(cls, broker_pids: list[int], keep: set[int]) -> Meter:
        """A meter for the next run; first samples 3 s of other processes' CPU use (context)."""
        cpu0, b0, s0 = machine_cpu_s(), broker_cpu_s(broker_pids), _self_cpu()
        time.sleep(3)
        own = broker_cpu_s(broker_pids) - b0 + _self_cpu() - s0
        meter = cls(broker_pids, keep)
        meter.m.background_cores = round((machine_cpu_s() - cpu0 - own) / 3, 2)
        return meter

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
        """Sample the process tree of ``pid`` from now on."""
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
