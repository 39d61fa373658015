"""A snapshot of a running flow part (replication query or companion thread) for notebooks and the
CLI: the common status type of :class:`~mirror_lib.spark.runner.FlowRunner` and
:class:`~mirror_lib.replication.companions.threads.CompanionJob`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FlowStatus:
    """A snapshot of a running flow for notebooks and the CLI."""

    flow: str
    job: str
    active: bool
    batches: int
    last_batch_id: int | None
    records_per_second: float | None
    message: str
