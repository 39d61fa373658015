"""The checkpoint round and the group-offset-sync round for many consumer groups, in process.

A flow A->B copies a topic of ``PARTITIONS`` partitions once (``mirror run --once``), then
``groups`` groups commit offsets on every partition of A. Each round is
:func:`~mirror_lib.replication.companions.checkpoint_job.run_checkpoints` with a state of its
own: the first reads the segments it needs (a new run), the second is a steady round. Each is
timed (wall and this process's CPU) with every admin request the checkpoint job makes counted by
kind. The group sync is timed alone too (the first sync commits every group on B; the second
finds nothing to move).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TOPIC = "groups"
PARTITIONS = 10
ADMIN_CALLS = (
    "list_consumer_groups",
    "list_consumer_group_offsets",
    "describe_consumer_groups",
    "alter_consumer_group_offsets",
    "list_topics",
    "describe_topics",
)


#: Where the admin calls of the round being timed are counted (clients outlive a round).
_COUNTS: list[Counter[str]] = [Counter()]


class CountingAdmin:
    """An AdminClient whose calls of :data:`ADMIN_CALLS` are counted into the round being timed
    (one call may carry many requests: ``describe_consumer_groups`` of a list is one)."""

    def __init__(self, admin: Any) -> None:
        self._admin = admin

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._admin, name)
        if name not in ADMIN_CALLS:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            _COUNTS[0][name] += 1
            return attr(*args, **kwargs)

        return counted


@contextmanager
def counting_admin() -> Iterator[None]:
    """Count the checkpoint job's admin calls (of clients made while inside)."""
    from mirror_lib.replication.companions import checkpoint_job

    real = checkpoint_job.admin_client

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return CountingAdmin(real(*args, **kwargs))

    checkpoint_job.admin_client = wrapped  # type: ignore[assignment]
    try:
        yield
    finally:
        checkpoint_job.admin_client = real  # type: ignore[assignment]


def commit_groups(bootstrap: str, groups: int, his: list[int], prefix: str = "bench-group") -> None:
    """``groups`` groups on A, each with an offset on every partition (some behind the end)."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = []
    for g in range(groups):
        tps = [ck.TopicPartition(TOPIC, p, max(0, hi - g % 50)) for p, hi in enumerate(his)]
        request = ck.ConsumerGroupTopicPartitions(f"{prefix}-{g}", tps)
        futures += admin.alter_consumer_group_offsets([request]).values()
    for f in futures:
        f.result(120)


def timed(call: Callable[[], Any], profile: Path | None = None) -> dict[str, Any]:
    """Wall and process CPU seconds of ``call``, with the admin calls it made; ``profile``:
    also where its time went (cProfile, the top of the cumulative times, into that file)."""
    import cProfile
    import io
    import os
    import pstats

    _COUNTS[0] = Counter()
    profiler = cProfile.Profile() if profile else None
    t0, c0 = time.monotonic(), sum(os.times()[:2])
    if profiler:
        profiler.enable()
    result = call()
    if profiler:
        profiler.disable()
    wall, cpu = time.monotonic() - t0, sum(os.times()[:2]) - c0
    if profiler and profile:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
        profile.write_text(text.getvalue())
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "admin_calls": dict(_COUNTS[0]),
        "result": result,
    }


def rounds(config_path: Path, groups: int, profiles: Path | None = None) -> dict[str, Any]:
    """The four timed rounds over the flow of ``config_path`` (groups already committed); with
    ``profiles``, where a steady round and a steady sync spend their time, each profiled in a
    round of its own after the timed one: a profiler on added 40 % to a round of 5,000 groups."""
    from mirror_lib.config.parse import load_config
    from mirror_lib.replication.companions import checkpoint_job as cj
    from mirror_lib.replication.context import FlowContext

    ctx = FlowContext.create(load_config(str(config_path)), "A->B")
    state = cj.CheckpointState()
    out: dict[str, Any] = {"groups": groups}

    def profile(name: str) -> Path | None:
        return None if profiles is None else profiles / f"profile-{groups}-{name}.txt"

    with counting_admin():
        out["first_round"] = timed(lambda: cj.run_checkpoints(ctx, state))
        state.last_group_sync = time.monotonic()  # the steady round: no sync due
        out["round"] = timed(lambda: cj.run_checkpoints(ctx, state))
        if profiles is not None:
            timed(lambda: cj.run_checkpoints(ctx, state), profile("round"))
        out["first_sync"] = timed(lambda: cj._sync_group_offsets(ctx, state))
        out["sync"] = timed(lambda: cj._sync_group_offsets(ctx, state))
        if profiles is not None:
            timed(lambda: cj._sync_group_offsets(ctx, state), profile("sync"))
    return out
