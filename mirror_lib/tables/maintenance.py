"""What keeps the state tables bounded, and when it runs (docs/operations/state.md).

A run writes each table every 30 s, so without maintenance a table gathers a small file and a
log entry per write forever. :class:`MaintenancePolicy` is the ``mirror.tables.*`` settings of
a config: the Delta table properties that bound the log and the files a newer version replaced
(the writers honour them themselves: delta-rs and Delta's Spark writer checkpoint every
``delta.checkpointInterval`` commits and then remove log entries older than
``delta.logRetentionDuration``), and what a maintenance round does on top (retention delete,
compaction, vacuum). :func:`maintain_if_due` runs a round over delta-rs when the last one is
older than the interval; a run's tables thread calls it after each materialization, and
``--once`` at its end. When the last round ran is kept in ``<tables>/_maintenance.json``, so
scheduled ``--once`` jobs maintain too.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror_lib.config.global_settings import global_setting
from mirror_lib.config.model import MirrorConfig
from mirror_lib.tables.location import tables_root

log = logging.getLogger(__name__)

MARKER = "_maintenance.json"
#: Compaction's target (``delta.targetFileSize``): a file under it is rewritten with the next
#: round's small files, one at or over it never again. Delta's default, 100 MB, rewrites a
#: table's growing file every round until the file reaches it, and a replaced file stays on
#: disk for the history; at 32 MiB a round rewrites at most one part-full file per table, and
#: the biggest table, 4.6 GB after 7 days at 5,000 records/s, keeps under 200 files
#: (docs/operations/state.md).
TARGET_FILE_BYTES = 32 * 1024 * 1024
#: One round at a time in a process: the tables threads of several clusters share the tables.
_ROUND = threading.Lock()


@dataclass(frozen=True)
class MaintenancePolicy:
    """The ``mirror.tables.*`` maintenance settings of a config (docs/configuration.md)."""

    interval_s: float  # 0: a run never maintains by itself
    retention_days: float
    history_hours: float
    checkpoint_interval: int

    @classmethod
    def of(cls, config: MirrorConfig) -> MaintenancePolicy:
        """The config's settings (their defaults where unset)."""
        props = config.properties
        return cls(
            interval_s=global_setting(props, "mirror.tables.maintenance.interval.seconds"),
            retention_days=global_setting(props, "mirror.tables.retention.days"),
            history_hours=global_setting(props, "mirror.tables.history.hours"),
            checkpoint_interval=global_setting(props, "mirror.tables.checkpoint.interval"),
        )

    @property
    def vacuum_hours(self) -> int:
        """VACUUM's retention: the history, in whole hours (Delta counts hours; under one
        hour: none, as the files replaced in that hour are few)."""
        return math.floor(self.history_hours)

    def table_properties(self) -> dict[str, str]:
        """The Delta table properties that bound each table's log and replaced files."""
        window = f"interval {round(self.history_hours * 3600)} seconds"
        return {
            "delta.checkpointInterval": str(self.checkpoint_interval),
            "delta.logRetentionDuration": window,
            "delta.deletedFileRetentionDuration": window,
            "delta.enableExpiredLogCleanup": "true",
            "delta.targetFileSize": str(TARGET_FILE_BYTES),
        }


def last_maintained(root: str) -> float | None:
    """Epoch seconds of the last maintenance round of the tables under ``root``, if any."""
    try:
        return float(json.loads(_marker(root).read_text())["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _marker(root: str) -> Path:
    return Path(root) / "tables" / MARKER


def _mark(root: str, report: dict[str, Any]) -> None:
    path = _marker(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"at": time.time(), "report": report}, default=str))
    os.replace(tmp, path)


def maintain_if_due(config: MirrorConfig, now: float | None = None) -> dict[str, Any] | None:
    """One maintenance round of the delta-rs tables when the last is older than the interval
    (or there was none); None when not due or turned off. A round that fails is logged and
    tried again at the next call: the tables stay correct, only bigger."""
    from mirror_lib.tables.delta_rs import maintain  # lazy: deltalake, pyarrow

    policy = MaintenancePolicy.of(config)
    if not policy.interval_s:
        return None
    root = tables_root(config)
    now = time.time() if now is None else now
    last = last_maintained(root)
    if last is not None and now - last < policy.interval_s:
        return None
    if not _ROUND.acquire(blocking=False):
        return None  # another cluster's thread is at it
    started = time.monotonic()
    try:
        report = maintain(
            root,
            retention_days=policy.retention_days,
            vacuum_hours=policy.vacuum_hours,
            properties=policy.table_properties(),
        )
        _mark(root, report)
    except Exception as exc:  # a conflict or a full disk: the next round retries
        log.warning("maintenance of the tables in %s failed (retried later): %s", root, exc)
        return None
    finally:
        _ROUND.release()
    log.info("maintained the tables in %s in %.1fs", root, time.monotonic() - started)
    return report
