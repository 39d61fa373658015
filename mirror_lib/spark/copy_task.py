"""A copy task: the source's ``read()`` of one slot's slice runs
:mod:`~mirror_lib.replication.copy.copier` (docs/design.md#d2-slices).

Spark runs a Python data source's ``read()`` and a Python sink's ``write()`` of one task in two
different worker processes (docs/how-it-works.md#which-spark-process-runs-what). So the slot's copy
runs in the reading worker and the query writes its one summary row per slot to Spark's built-in
``noop`` sink: no writer worker, no planning of a writer per slice and no driver-side commit worker.
Delivery state lives in Kafka (transactions + ledger), so there was nothing for a sink to make
durable anyway.

The row goes back as an Arrow batch built from raw buffers (:func:`summary_batch`): pyspark
turns rows into Arrow with ``pa.array``, whose first call imports pandas (about 40 MB and 0.4
CPU-s in every copy worker, for one row).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import threading
import time

import pyarrow as pa

from mirror_lib.replication.copy.copier import CopyResult, copy_slice
from mirror_lib.replication.copy.read_group import ReadGroup
from mirror_lib.replication.events import RESTART_OPTION, QueryRestart
from mirror_lib.spark.slot_work import SlotWork

log = logging.getLogger(__name__)
_GROUPS: dict[str, ReadGroup] = {}
_WATCHED = False  # exit_with_parent() runs its thread once per process
_WATCH_LOCK = threading.Lock()


def read_group(options: dict[str, str]) -> tuple[ReadGroup, str]:
    """The flow (or fan-out group) of these data source options and its cache key, cached per
    worker process. A query started again through an outage keeps its key (and so the group
    and the skips it counts): its options differ only by :data:`RESTART_OPTION`."""
    same = {k: v for k, v in options.items() if k != RESTART_OPTION}
    key = hashlib.sha1(json.dumps(same, sort_keys=True).encode()).hexdigest()
    if key not in _GROUPS:
        _GROUPS[key] = ReadGroup.from_options(options)
    return _GROUPS[key], key


def exit_with_parent(poll_s: float = 1.0) -> None:
    """End this process once the one that started it is gone (once per process).

    Without pyspark's daemon (``--once``) a Python worker is the child of its executor's JVM; a
    JVM killed mid-slice left its copy task running on its own, copying with a producer the
    task's next attempt has fenced, until the slice ended, and after the run if that ended
    first. Its open transaction is aborted by that fencing either way. (A daemon's workers get
    SIGHUP from their daemon instead.)
    """
    global _WATCHED
    with _WATCH_LOCK:
        if _WATCHED:
            return
        _WATCHED = True
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        log.warning("the process that started this copy task (pid %d) is gone: exiting", parent)
        os._exit(1)

    threading.Thread(target=watch, name="mirror-exit-with-parent", daemon=True).start()


def copy_slot(options: dict[str, str], work: SlotWork) -> CopyResult:
    """Copy one slot's slice (and those of the slots that share its task) inside the running
    Spark task (its batch and query ids name it)."""
    from pyspark import TaskContext

    exit_with_parent()
    task = TaskContext.get()
    batch_id = int(task.getLocalProperty("streaming.sql.batchId") or -1) if task else -1
    query_id = (task.getLocalProperty("sql.streaming.queryId") or "") if task else ""
    group, key = read_group(options)
    until = work.until_offsets()
    result = copy_slice(
        group.contexts,
        key,
        work.slot,
        work.partitions,
        until=until,
        counts=None if until else work.counts,
        ids=work.ids,
        batch_id=batch_id,
        query_id=query_id,
        targets=work.targets or None,
        busy=work.busy,
        shared=work.shared,
        slots=work.slots,
        query_restart=QueryRestart.of_option(options.get(RESTART_OPTION)),
    )
    for flow, why in result.detached.items():  # its lag shows in the ledger
        log.warning("slice %d: %s fell behind and catches up later: %s", batch_id, flow, why)
    return result


#: Column types of :data:`mirror_lib.spark.source.SCHEMA`, with their ``struct`` formats.
_SUMMARY = (
    ("slot", pa.int32(), "<i"),
    ("records", pa.int64(), "<q"),
    ("transactions", pa.int64(), "<q"),
)


def summary_batch(slot: int, result: CopyResult) -> pa.RecordBatch:
    """The task's one row (slot, records, transactions) as an Arrow batch, made without
    ``pa.array`` (see the module docstring)."""
    values = (slot, result.records, result.transactions)
    columns = [
        pa.Array.from_buffers(kind, 1, [None, pa.py_buffer(struct.pack(fmt, value))])
        for (_name, kind, fmt), value in zip(_SUMMARY, values, strict=True)
    ]
    return pa.RecordBatch.from_arrays(columns, names=[name for name, _k, _f in _SUMMARY])
