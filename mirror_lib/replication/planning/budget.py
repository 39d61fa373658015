"""Split a micro-batch's records/bytes budget fairly across partitions (water-filling).

Spark 4.1 gives Python sources no read limits, so the planner caps itself: a backlog becomes
many batches, and a hot partition cannot starve the others.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

#: Used to turn the bytes budget into records until real record sizes are known.
DEFAULT_RECORD_BYTES = 1024


def allocate(
    backlog: Mapping[K, int],
    max_records: int,
    max_bytes: int,
    avg_record_bytes: float = DEFAULT_RECORD_BYTES,
) -> dict[K, int]:
    """Records granted per partition: all of it when it fits, else equal shares, capped by need."""
    budget = min(max_records, max(1, int(max_bytes // max(avg_record_bytes, 1))))
    need = {k: v for k, v in backlog.items() if v > 0}
    if sum(need.values()) <= budget:
        return dict(need)
    grant: dict[K, int] = {}
    remaining = budget
    for i, (key, wanted) in enumerate(sorted(need.items(), key=lambda kv: kv[1])):
        share = remaining // (len(need) - i)
        grant[key] = min(wanted, share)
        remaining -= grant[key]
    return grant
