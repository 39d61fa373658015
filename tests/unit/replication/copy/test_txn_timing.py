"""The latency bench's per-transaction timing log: one JSON line per landed transaction, per
worker process, with only the partitions the transaction wrote."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from mirror_lib.replication.copy import txn_timing


def _part(remote: str, n: int) -> SimpleNamespace:
    return SimpleNamespace(remote=remote, partition=0, n=n, runs=[(5, 0)], consumed=[(9.0, n)])


def test_a_landed_transaction_is_one_line_of_its_process_log(monkeypatch, tmp_path):
    monkeypatch.delenv(txn_timing.DIR_ENV, raising=False)
    assert not txn_timing.enabled()
    folder = tmp_path / "timing"
    monkeypatch.setenv(txn_timing.DIR_ENV, str(folder))
    assert txn_timing.enabled()
    txn_timing.write(3, 100.0, 150.0, [_part("A.t", 2), _part("A.u", 0)])
    txn_timing.write(3, 200.0, 250.0, [_part("A.t", 1)])
    log = folder / f"txn-{os.getpid()}.jsonl"
    first, second = [json.loads(line) for line in log.read_text().splitlines()]
    assert (first["slot"], first["commit_start_ms"], first["acked_ms"]) == (3, 100.0, 150.0)
    assert first["commit_end_ms"] >= 150.0
    assert first["parts"] == [
        {"remote": "A.t", "partition": 0, "n": 2, "runs": [[5, 0]], "consumed": [[9.0, 2]]}
    ]  # A.u wrote nothing in it
    assert second["parts"][0]["n"] == 1
