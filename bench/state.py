"""What a run keeps, measured from outside: tables, Spark checkpoints, local files, internal
topics and the run's processes (the soak bench samples it every minute).

Every figure is read the way a user's disk and `ps` would show it: the Delta tables' files and
bytes (those the current version references, and all on disk, log included), the folders of
the Spark checkpoints, the other files under ``mirror.state.dir``, each internal topic's bytes
in the brokers' log folders, and per process role (driver, JVM, Python workers) the RSS, open
files and threads.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.measure import descendants, role

#: The state dir's sub-folders that are Spark checkpoints (``flows/<A_to_B>/replication``,
#: ``clusters/<B>/materialize``).
CHECKPOINT_PARTS = ("replication", "materialize")


def folder_size(path: Path) -> tuple[int, int]:
    """(files, bytes) under ``path`` (0, 0 if it does not exist)."""
    files = size = 0
    for base, _dirs, names in os.walk(path):
        for name in names:
            try:
                size += os.stat(os.path.join(base, name)).st_size
                files += 1
            except OSError:
                continue  # removed while we walked (vacuum, log clean-up)
    return files, size


def delta_table(path: Path) -> dict[str, int]:
    """One table: ``files``/``bytes`` of its current version, ``disk_files``/``disk_bytes`` of
    its data files on disk, ``replaced_files``/``replaced_bytes`` of those no longer in the
    current version (awaiting vacuum; left out when the current version could not be read),
    ``log_entries``/``log_bytes`` of ``_delta_log``."""
    from deltalake import DeltaTable

    out = {"files": 0, "bytes": 0}
    live: tuple[int, int] | None = None  # (files, bytes) of the current version
    try:
        actions = DeltaTable(str(path)).get_add_actions(flatten=True)
        sizes = actions.column("size_bytes").to_pylist()
        live = (len(sizes), int(sum(sizes)))
        out = {"files": live[0], "bytes": live[1]}
    except Exception:  # not created yet, or a commit raced the read: counted next minute
        pass
    log_files, log_bytes = folder_size(path / "_delta_log")
    all_files, all_bytes = folder_size(path)
    out |= {
        "disk_files": all_files - log_files,
        "disk_bytes": all_bytes - log_bytes,
        "log_entries": log_files,
        "log_bytes": log_bytes,
    }
    if live is not None:  # else every file on disk would count as replaced
        out["replaced_files"] = max(0, all_files - log_files - live[0])
        out["replaced_bytes"] = max(0, all_bytes - log_bytes - live[1])
    return out


def state_dir(state: Path) -> dict[str, Any]:
    """Tables, Spark checkpoints and the other files of a run's ``mirror.state.dir``."""
    tables = {}
    root = state / "tables"
    if root.is_dir():
        for table in sorted(p for p in root.iterdir() if p.is_dir()):
            tables[table.name] = delta_table(table)
    checkpoints = {}
    for kind in CHECKPOINT_PARTS:
        for folder in sorted(state.glob(f"*/*/{kind}")):
            files, size = folder_size(folder)
            checkpoints[str(folder.relative_to(state))] = {"files": files, "bytes": size}
    other = {}
    for path in sorted(state.rglob("*.json")):
        if root in path.parents or any(k in path.parts for k in CHECKPOINT_PARTS):
            continue
        other[str(path.relative_to(state))] = path.stat().st_size
    files, size = folder_size(state)
    return {
        "tables": tables,
        "spark_checkpoints": checkpoints,
        "files": other,
        "state_files": files,
        "state_bytes": size,
    }


def topic_sizes(log_dirs: Iterable[Path], topics: Iterable[str]) -> dict[str, int]:
    """Bytes of each of ``topics``' log segments (every partition) in the brokers' log folders
    (their indexes are left out: Kafka allocates 10 MB for each up front)."""
    out: dict[str, int] = {}
    folders = [p for d in log_dirs if d.is_dir() for p in d.iterdir() if p.is_dir()]
    for topic in topics:
        parts = [p for p in folders if p.name.rsplit("-", 1)[0] == topic]
        out[topic] = sum(_size(f) for p in parts for f in p.glob("*.log"))
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # a segment deleted by retention or compaction meanwhile
        return 0


def _status(pid: int) -> dict[str, int]:
    values = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "Threads"):
                values[key] = int(rest.split()[0])
        values["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError):
        pass
    return values


def role_group(name: str) -> str:
    """driver (the ``mirror`` CLI), jvm, or worker (pyspark's daemons and workers)."""
    if name.startswith("mirror cli"):
        return "driver"
    if name in ("jvm", "java", "mm2 jvm"):
        return "jvm"
    return "worker"


def processes(root: int) -> dict[str, dict[str, float]]:
    """Per role of the tree under ``root``: RSS (MB), its anonymous part (MB: heaps and pools,
    where a leak shows; the rest is mapped code and files, bounded by their size), open files,
    threads and processes."""
    out: dict[str, dict[str, float]] = {}
    for pid, (comm, _cpu, _rss) in descendants(root).items():
        group = role_group(role(pid, comm))
        st = _status(pid)
        entry = out.setdefault(
            group, {"rss_mb": 0.0, "anon_mb": 0.0, "fds": 0, "threads": 0, "processes": 0}
        )
        entry["rss_mb"] += st.get("VmRSS", 0) / 1024
        entry["anon_mb"] += st.get("RssAnon", 0) / 1024
        entry["fds"] += st.get("fds", 0)
        entry["threads"] += st.get("Threads", 0)
        entry["processes"] += 1
    return out


def flatten(sample: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """``{"tables": {"x": {"files": 1}}}`` -> ``{"tables.x.files": 1}`` (numbers only)."""
    out: dict[str, float] = {}
    for key, value in sample.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out |= flatten(value, name + ".")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)
    return out
