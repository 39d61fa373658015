"""Periodic jobs as streaming queries (D6): one micro-batch per interval runs one task.

The source emits a tick per interval (``floor(now / interval)``); the sink runs the job named by
the ``job`` option (``heartbeats`` or ``checkpoints``) on an executor. Start, stop, status and
restart work like the replication query; the job's own state is rebuilt from Kafka when needed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)

from mirror_lib.flow import FlowContext

JOBS = ("heartbeats", "checkpoints")


@dataclass
class Tick(InputPartition):
    """The tick a batch runs for."""

    tick: int


@dataclass
class JobResult(WriterCommitMessage):
    """What one run of a job did (counts only)."""

    job: str
    written: int = 0
    skipped: int = 0


class PeriodicDataSource(DataSource):
    """``format("mirror_periodic")`` with options ``job``, ``interval`` and a flow context."""

    @classmethod
    def name(cls) -> str:
        return "mirror_periodic"

    def schema(self) -> str:
        return "tick long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return TickReader(float(self.options["interval"]))

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return JobWriter(dict(self.options))


class TickReader(DataSourceStreamReader):
    """One offset step per interval; a batch only runs when the tick advanced."""

    def __init__(self, interval: float) -> None:
        self.interval = interval

    def initialOffset(self) -> dict[str, int]:
        return {"tick": -1}

    def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, int]:
        return {"tick": int(time.time() // self.interval)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [Tick(end["tick"])] if end["tick"] > start["tick"] else []

    def read(self, partition: Tick) -> Iterator[tuple[int]]:
        yield (partition.tick,)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to acknowledge."""


class JobWriter(DataSourceStreamWriter):
    """Runs the periodic job once per batch that has a tick."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from mirror_lib.sink import flow_context

        job = self.options["job"]
        if not list(iterator):
            return JobResult(job)
        ctx, key = flow_context({k: v for k, v in self.options.items() if k not in ("job",)})
        if job == "heartbeats":
            from mirror_lib.heartbeats import emit_heartbeat

            return JobResult(job, written=emit_heartbeat(ctx))
        from mirror_lib.checkpointing import run_checkpoints

        written, skipped = run_checkpoints(ctx, key)
        return JobResult(job, written=written, skipped=skipped)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to persist: the job wrote to Kafka."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """A failed run is simply repeated on the next tick."""


def job_interval(ctx: FlowContext, job: str) -> float:
    """The trigger interval of ``job`` for the flow."""
    s = ctx.settings
    if job == "heartbeats":
        return s.heartbeats_interval
    if s.emit_checkpoints and s.sync_group_offsets:
        return min(s.checkpoints_interval, s.sync_group_offsets_interval)
    return s.checkpoints_interval if s.emit_checkpoints else s.sync_group_offsets_interval
