"""The latest checkpoints and their translation read in Arrow answer as the SQL views do
(mirror_lib.spark.views), here against a plain reading of those views' definitions."""

from __future__ import annotations

import random
from datetime import datetime, timezone

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")

from mirror_lib.tables import delta_rs as store
from mirror_lib.tables import failover_reads, positions
from mirror_lib.tables.failover_reads import latest_checkpoints, offset_translation
from mirror_lib.tables.schemas import SCHEMAS

TS = datetime(2026, 12, 1, tzinfo=timezone.utc)


def history(seed: int) -> tuple[list[dict], list[dict]]:
    """Segments with gaps (and MM2 points) per partition, and checkpoints of four groups
    below, inside, between and past them, several per group and partition."""
    rnd = random.Random(seed)
    segments, checkpoints = [], []
    for topic in ("A.x", "A.y"):
        for part in range(3):
            us, ds = rnd.randrange(50), rnd.randrange(50)
            for _ in range(rnd.randrange(0, 40)):
                n = rnd.randrange(1, 20)
                kind = "segment" if rnd.random() < 0.9 else "point"
                segments.append({
                    "flow": "A->B", "source": "A", "target": "B", "topic": topic[2:],
                    "remote_topic": topic, "partition": part, "upstream_start": us,
                    "upstream_end": us + n - 1, "downstream_start": ds,
                    "downstream_end": ds + n - 1, "kind": kind,
                })  # fmt: skip
                us += n + rnd.choice([0, 0, 3])
                ds += n + rnd.choice([1, 1, 2])
            for group in range(4):
                for _ in range(3):
                    checkpoints.append({
                        "source": "A", "target": "B", "group_id": f"g{group}", "topic": topic,
                        "partition": part, "upstream_offset": rnd.randrange(0, us + 30),
                        "downstream_offset": rnd.randrange(1000), "metadata": "",
                    })  # fmt: skip
    for i, cp in enumerate(checkpoints):
        cp.update(cluster="B", kafka_topic="A.checkpoints.internal", kafka_partition=0,
                  kafka_offset=i, record_ts=TS)  # fmt: skip
    return segments, checkpoints


def expected(segments: list[dict], checkpoints: list[dict]) -> set[tuple]:
    """The views' definitions, read plainly."""
    latest: dict[tuple, dict] = {}
    for cp in checkpoints:
        key = (cp["cluster"], cp["group_id"], cp["topic"], cp["partition"])
        if key not in latest or cp["kafka_offset"] > latest[key]["kafka_offset"]:
            latest[key] = cp
    out = set()
    for cp in latest.values():
        u = cp["upstream_offset"]
        mine = [s for s in segments if s["kind"] == "segment" and
                (s["remote_topic"], s["partition"]) == (cp["topic"], cp["partition"])]  # fmt: skip
        after = [s for s in mine if s["upstream_end"] >= u]
        nxt = min(after, key=lambda s: s["upstream_start"]) if after else None
        if not mine or u < min(s["upstream_start"] for s in mine):
            offset = cp["downstream_offset"]
        elif nxt is not None:
            inside = u >= nxt["upstream_start"]
            offset = nxt["downstream_start"] + (u - nxt["upstream_start"] if inside else 0)
        else:
            offset = max(s["downstream_end"] for s in mine) + 1
        out.add((cp["group_id"], cp["topic"], cp["partition"], u, offset,
                 cp["downstream_offset"]))  # fmt: skip
    return out


@pytest.mark.parametrize("windows", ["one", "many"])
@pytest.mark.parametrize("seed", range(6))
def test_translation_read_in_arrow_answers_as_the_view(tmp_path, monkeypatch, seed, windows):
    if windows == "many":  # checkpoints 5 offsets apart read apart, windows grown, ranges merged
        monkeypatch.setattr(failover_reads, "_SPAN", 5)
        monkeypatch.setattr(failover_reads, "_FIRST_REACH", 2)
        monkeypatch.setattr(failover_reads, "_TERMS", 2)
    root = str(tmp_path)
    store.ensure_tables(root)
    segments, checkpoints = history(seed)
    for name, rows in (("offset_syncs", segments), ("checkpoints", checkpoints)):
        positions.append_unseen(root, {name: pa.Table.from_pylist(rows, SCHEMAS[name])}, name)
    got = {
        (r["group_id"], r["topic"], r["partition"], r["upstream_offset"], r["offset"],
         r["checkpoint_offset"])
        for r in offset_translation(root).to_pylist()
    }  # fmt: skip
    assert got == expected(segments, checkpoints)
    assert latest_checkpoints(root).num_rows == len(got)


def test_no_checkpoints_no_rows(tmp_path):
    store.ensure_tables(str(tmp_path))
    assert offset_translation(str(tmp_path)).num_rows == 0


def test_merged_ranges_cover_every_range_in_few_terms(monkeypatch):
    monkeypatch.setattr(failover_reads, "_SPAN", 10)
    monkeypatch.setattr(failover_reads, "_TERMS", 2)
    ranges = [(0, 100), (5, 20), (115, 120), (200, 210), (400, 401)]
    merged = failover_reads._merged(ranges)
    assert merged == [(0, 210), (400, 401)]  # the nested one inside, then the closest joined
    assert all(any(a <= lo and hi <= b for a, b in merged) for lo, hi in ranges)
