"""A per-transaction timing log for the latency bench (inert unless the environment asks).

``MIRROR_TXN_TIMING_DIR=<folder>``: each copy task appends one JSON line per landed transaction
to ``<folder>/txn-<pid>.jsonl``: when its commit started (the open transaction was due, or, at
least once, sealed) and ended (``commit_transaction`` returned, or the ledger moved), when the
target had acknowledged its records, and per partition the upstream runs and the consume time
of each batch of records it took. ``bench/latency.py`` matches a copied record to its line to
split the record's latency into stages (bench/README.md, "Latency"). Unset, the copy task does
one dictionary lookup per commit and writes nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from mirror_lib.replication.copy.copy_state import PartState

DIR_ENV = "MIRROR_TXN_TIMING_DIR"
_out: dict[tuple[int, str], TextIO] = {}  # (pid, folder) -> its log (a forked worker: its own)


def enabled() -> bool:
    """Whether the timing log is asked for."""
    return bool(os.environ.get(DIR_ENV))


def now_ms() -> float:
    return time.time() * 1000.0


def write(slot: int, started_ms: float, acked_ms: float, parts: list[PartState]) -> None:
    """One line for a transaction that has just landed (``parts``: its partitions' states,
    :class:`~mirror_lib.replication.copy.copy_state.PartState`, before they are reset)."""
    key = (os.getpid(), os.environ[DIR_ENV])
    out = _out.get(key)
    if out is None:
        folder = Path(key[1])
        folder.mkdir(parents=True, exist_ok=True)
        out = _out[key] = open(folder / f"txn-{key[0]}.jsonl", "a", buffering=1)  # noqa: SIM115
    line = {
        "slot": slot,
        "commit_start_ms": started_ms,
        "acked_ms": acked_ms,
        "commit_end_ms": now_ms(),
        "parts": [
            {
                "remote": p.remote,
                "partition": p.partition,
                "n": p.n,
                "runs": p.runs,  # (upstream offset, index of the run's first record)
                "consumed": p.consumed,  # (consume time ms, records of that batch)
            }
            for p in parts
            if p.n
        ],
    }
    out.write(json.dumps(line) + "\n")
