"""The replication sink: Spark hands each task its slot's slice; :mod:`copier` does the work.

``write()`` runs on executors (a pooled Python worker per task) and lasts a whole slice;
``commit()``/``abort()`` run on the driver in a worker without a SparkSession (platform.md §1.7).
Delivery state lives in Kafka (transactions + ledger), so ``commit()`` has nothing to make durable
and replays are safe.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage

from mirror_lib.replication.copier import CopyResult, copy_slice
from mirror_lib.replication.read_group import ReadGroup
from mirror_lib.spark.slot_work import SlotWork

log = logging.getLogger(__name__)
_GROUPS: dict[str, ReadGroup] = {}


class CopyMessage(WriterCommitMessage):
    """Picklable commit message wrapping a :class:`CopyResult`."""

    def __init__(self, result: CopyResult) -> None:
        self.result = result


def read_group(options: dict[str, str]) -> tuple[ReadGroup, str]:
    """The flow (or fan-out group) of these data source options and its cache key, cached per
    worker process."""
    key = hashlib.sha1(json.dumps(options, sort_keys=True).encode()).hexdigest()
    if key not in _GROUPS:
        _GROUPS[key] = ReadGroup.from_options(options)
    return _GROUPS[key], key


class SliceCopier(DataSourceStreamWriter):
    """Runs one slice of a task slot: consume from the source, produce to the target."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from pyspark import TaskContext

        rows = list(iterator)
        if not rows:
            return CopyMessage(CopyResult(slot=-1))
        task = TaskContext.get()
        batch_id = int(task.getLocalProperty("streaming.sql.batchId") or -1) if task else -1
        query_id = (task.getLocalProperty("sql.streaming.queryId") or "") if task else ""
        work = SlotWork.from_json(rows[0].slot, rows[0].work)
        group, key = read_group(self.options)
        until = work.until_offsets()
        return CopyMessage(
            copy_slice(
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
            )
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to persist: records, syncs, metrics and ledger were committed in Kafka. A
        fan-out target that left the shared read is logged (its lag shows in the ledger)."""
        for m in messages:
            if isinstance(m, CopyMessage):
                for flow, why in m.result.detached.items():
                    log.warning(
                        "slice %d: %s fell behind and catches up later: %s", batchId, flow, why
                    )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Open transactions of killed tasks are aborted when their transactional.id is reused."""
