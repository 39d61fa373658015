"""Where the slowest records of a latency run spent their time (``bench/latency.py``).

A record's latency (the probe's arrival minus its CreateTime) is split at five points, each
from a timestamp taken on the one machine's clock:

- the load's producer got the source's acknowledgement (``bench.probe`` load);
- the copy task consumed the record (``consumed`` of the copy task's timing log,
  :mod:`mirror_lib.replication.copy.txn_timing`, per batch of records it took);
- its transaction's commit started and ended (``commit_start_ms`` / ``commit_end_ms`` there);
- the target's partition leader wrote the transaction's commit marker: the marker's timestamp,
  read from the target's log segment (:func:`commit_markers`); from then on the last stable
  offset is past the record;
- the probe's consumer took it (``bench.probe`` measure).

The stages between them are :data:`STAGES`. Without a transaction (at least once) no marker
gates the record: after its fetch there is one stage, ``copy_to_consumer``.
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STAGES = (
    "source_ack",  # the load's acknowledgement - CreateTime
    "fetch",  # the copy task's consume time - the acknowledgement
    "txn_wait",  # its transaction's commit start - the consume time
    "commit",  # commit end - commit start
    "lso",  # the commit marker's timestamp - commit end
    "consumer_fetch",  # the probe's arrival - the marker's timestamp
    "copy_to_consumer",  # at least once: the probe's arrival - the consume time
)

# Kafka's record batch (magic 2): baseOffset int64, batchLength int32, then from byte 12
# partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16, lastOffsetDelta int32,
# baseTimestamp int64, maxTimestamp int64, ... records count int32 (61 bytes in all)
_HEAD = struct.Struct(">qiibIhiqq")
_HEADER_SIZE = 61
_CONTROL = 0x20  # attributes: a control batch (a transaction marker)


@dataclass(frozen=True)
class Txn:
    """One landed transaction's part for one partition, from the copy task's timing log."""

    commit_start_ms: float
    commit_end_ms: float
    runs: list[tuple[int, int]]  # (upstream offset, index of the run's first record)
    n: int
    consumed: list[tuple[float, int]]  # (consume time, records of that batch)

    def consumed_at(self, upstream: int) -> float | None:
        """When the copy task consumed the record at ``upstream``, if this transaction has it."""
        bounds = [i for _u, i in self.runs[1:]] + [self.n]
        for (u, i), end in zip(self.runs, bounds, strict=True):
            if u <= upstream < u + end - i:
                index = i + upstream - u
                seen = 0
                for ms, count in self.consumed:
                    seen += count
                    if index < seen:
                        return ms
                return None
        return None


def read_txn_log(folder: Path) -> dict[tuple[str, int], list[Txn]]:
    """Every ``txn-*.jsonl`` line of a run's timing log, per (remote topic, partition)."""
    out: dict[tuple[str, int], list[Txn]] = {}
    for path in sorted(folder.glob("txn-*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            t = json.loads(line)
            for p in t["parts"]:
                out.setdefault((p["remote"], p["partition"]), []).append(
                    Txn(
                        t["commit_start_ms"],
                        t["commit_end_ms"],
                        [(int(u), int(i)) for u, i in p["runs"]],
                        p["n"],
                        [(float(ms), int(c)) for ms, c in p["consumed"]],
                    )
                )
    return out


def parse_markers(data: bytes) -> list[tuple[int, int]]:
    """(offset, timestamp ms) of every control batch (transaction marker) in a log segment's
    bytes, in order."""
    out = []
    pos = 0
    while pos + _HEADER_SIZE <= len(data):
        base, length, _epoch, magic, _crc, attrs, _delta, _base_ts, max_ts = _HEAD.unpack_from(
            data, pos
        )
        if length <= 0 or pos + 12 + length > len(data):
            break  # the segment's preallocated or unwritten end
        if magic == 2 and attrs & _CONTROL:
            out.append((base, max_ts))
        pos += 12 + length
    return out


def commit_markers(log_dir: Path, topic: str, partition: int) -> list[tuple[int, int]]:
    """The transaction markers of one partition in a broker's log folder, by offset."""
    folder = log_dir / f"{topic}-{partition}"
    out: list[tuple[int, int]] = []
    for seg in sorted(folder.glob("*.log")):
        out += parse_markers(seg.read_bytes())
    return sorted(out)


def marker_after(markers: list[tuple[int, int]], offset: int) -> int | None:
    """The timestamp of the first marker after ``offset`` (the one that committed it)."""
    i = bisect.bisect_right(markers, (offset, 2**63))
    return markers[i][1] if i < len(markers) else None


def stages(
    created: float,
    acked: float,
    arrived: float,
    consumed: float | None,
    txn: Txn | None,
    marker_ms: float | None,
) -> dict[str, float | None]:
    """One record's stages (ms, :data:`STAGES`); None where a timestamp is missing. With a
    transaction and its marker the stages add up to the record's latency."""
    out: dict[str, float | None] = dict.fromkeys(STAGES)
    out["source_ack"] = acked - created
    if consumed is None:
        return out
    out["fetch"] = consumed - acked
    if txn is None or marker_ms is None:
        out["copy_to_consumer"] = arrived - consumed
        return out
    out["txn_wait"] = txn.commit_start_ms - consumed
    out["commit"] = txn.commit_end_ms - txn.commit_start_ms
    out["lso"] = marker_ms - txn.commit_end_ms
    out["consumer_fetch"] = arrived - marker_ms
    return out


def find_txn(txns: list[Txn], upstream: int) -> tuple[Txn, float] | None:
    """The last landed transaction that copied ``upstream``, and when it consumed it."""
    for txn in reversed(txns):
        at = txn.consumed_at(upstream)
        if at is not None:
            return txn, at
    return None


def over_p99(latencies: dict[int, float], p99: float) -> list[int]:
    """The record numbers whose latency is above ``p99``."""
    return sorted(n for n, ms in latencies.items() if ms > p99)


def every(latencies: dict[int, float], step: int) -> list[int]:
    """Every ``step``-th measured record, in the order they were sent: a sample of the run
    whose stages' means add up to its mean latency (a band around the median would pick the
    records whose parts happen to sum to it)."""
    return sorted(latencies)[::step]


def breakdown(
    records: Iterable[int],
    result: Any,
    txns: dict[tuple[str, int], list[Txn]],
    markers: dict[int, list[tuple[int, int]]],
    remote: str,
    partitions: int,
) -> list[dict[str, float | None]]:
    """The stages of each of ``records`` of a probe ``result`` (``bench.probe.Result``), from
    the copy task's timing log (``txns``) and the target's markers per partition."""
    out = []
    for n in records:
        p = n % partitions
        found = find_txn(txns.get((remote, p), []), result.offsets[n])
        txn, consumed = found if found else (None, None)
        landed = result.landed.get(n)
        marker = marker_after(markers.get(p, []), landed[1]) if landed else None
        out.append(
            stages(result.created[n], result.acked[n], result.arrived[n], consumed, txn, marker)
        )
    return out


def quantiles(rows: list[dict[str, float | None]]) -> dict[str, dict[str, float | int]]:
    """Per stage with values: how many, their mean, median and p90 (ms)."""
    from bench.probe import pct

    out: dict[str, dict[str, float | int]] = {}
    for stage in STAGES:
        values = sorted(v for r in rows if (v := r.get(stage)) is not None)
        if values:
            out[stage] = {
                "records": len(values),
                "mean": round(sum(values) / len(values), 1),
                "median": round(pct(values, 50), 1),
                "p90": round(pct(values, 90), 1),
            }
    return out
