"""tables.positions without Spark: each record's rows are appended once, whoever writes them."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")

from mirror_lib.tables import delta_rs as store  # noqa: E402
from mirror_lib.tables import positions  # noqa: E402
from mirror_lib.tables.schemas import SCHEMAS  # noqa: E402

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def beats(offsets: list[int], cluster: str = "B", topic: str = "heartbeats", part: int = 0):
    rows = [
        {"source": "A", "target": cluster, "heartbeat_ts": NOW, "hops": 1, "cluster": cluster,
         "kafka_topic": topic, "kafka_partition": part, "kafka_offset": o, "record_ts": NOW}
        for o in offsets
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=SCHEMAS["heartbeats"])


def held_rows(root: str) -> list[tuple]:
    t = store.read_table(root, "heartbeats")
    keys = ("cluster", "kafka_topic", "kafka_partition", "kafka_offset")
    return sorted(zip(*(t[k].to_pylist() for k in keys), strict=True))


def test_row_ends_per_partition_and_without_origin():
    table = pa.concat_tables([beats([3, 1]), beats([7], part=1), beats([0], cluster="A")])
    assert positions.row_ends(table) == {
        ("B", "heartbeats", 0): 4,
        ("B", "heartbeats", 1): 8,
        ("A", "heartbeats", 0): 1,
    }
    no_origin = pa.Table.from_pylist([{"hops": 1}], schema=SCHEMAS["heartbeats"])
    assert positions.row_ends(no_origin) == {}
    assert positions.row_ends(pa.table({"kafka_offset": [1]})) == {}  # columns not there yet


def both(result: str) -> dict[str, str]:
    """What append_unseen says of heartbeats and of their rollup, written with them."""
    return {"heartbeats": result, "heartbeats_per_minute": result}


def test_overlapping_writes_append_each_record_once(tmp_path):
    root = str(tmp_path)
    assert positions.append_unseen(root, {"heartbeats": beats([0, 1, 2])}, "a") == both("committed")
    # a replay of the same range, then a range that overlaps it
    assert positions.append_unseen(root, {"heartbeats": beats([1, 2])}, "b") == both("skipped")
    assert positions.append_unseen(root, {"heartbeats": beats([2, 3, 4])}, "c") == both("committed")
    assert [r[3] for r in held_rows(root)] == [0, 1, 2, 3, 4]
    dt = deltalake.DeltaTable(store.table_path(root, "heartbeats"))
    assert dt.transaction_version("mirror-rows/B/heartbeats/0") == 5
    assert dt.history(1)[0]["mirror.rows"] == "2"


def test_positions_are_per_cluster_topic_and_partition(tmp_path):
    root = str(tmp_path)
    positions.append_unseen(root, {"heartbeats": beats([0, 1, 2, 3])}, "a")
    others = pa.concat_tables(
        [beats([0, 1]), beats([0, 1], part=1), beats([0], cluster="A"), beats([0], topic="x")]
    )
    positions.append_unseen(root, {"heartbeats": others}, "b")
    got = held_rows(root)
    assert len(got) == 4 + 2 + 1 + 1
    assert len(set(got)) == len(got)


def test_a_partition_that_started_over_is_appended_again_from_its_new_offsets(tmp_path):
    root = str(tmp_path)
    positions.append_unseen(root, {"heartbeats": beats([0, 1, 2, 3, 4])}, "a")
    origin = ("B", "heartbeats", 0)
    # the topic was deleted and created again: its offsets 0, 1 are new records
    assert positions.append_unseen(root, {"heartbeats": beats([0, 1])}, "b") == both("skipped")
    assert positions.append_unseen(
        root, {"heartbeats": beats([0, 1])}, "c", restarted={origin}
    ) == both("committed")
    dt = deltalake.DeltaTable(store.table_path(root, "heartbeats"))
    assert dt.transaction_version(positions.position_app_id(origin)) == 2  # moved back
    positions.append_unseen(root, {"heartbeats": beats([1, 2, 3])}, "d")
    assert [r[3] for r in held_rows(root)] == [0, 0, 1, 1, 2, 2, 3, 3, 4]


def test_a_concurrent_writer_of_the_same_records_wins_and_the_other_filters_again(
    tmp_path, monkeypatch
):
    root = str(tmp_path)
    positions.append_unseen(root, {"heartbeats": beats([0])}, "a")
    real = positions.commit_actions
    calls = []

    def first_loses(dt, files, txns, meta):
        if not calls:  # another writer commits 1..2 after this one read the positions
            monkeypatch.setattr(positions, "commit_actions", real)
            positions.append_unseen(root, {"heartbeats": beats([1, 2])}, "other")
            monkeypatch.setattr(positions, "commit_actions", first_loses)
        calls.append(len(files))
        real(dt, files, txns, meta)

    monkeypatch.setattr(positions, "commit_actions", first_loses)
    assert positions.append_unseen(root, {"heartbeats": beats([1, 2, 3])}, "b") == both("committed")
    # heartbeats: one failed commit, one that held; their rollup: one
    assert len(calls) == 3, "the first commit should have failed on the other writer's"
    assert [r[3] for r in held_rows(root)] == [0, 1, 2, 3]
    leftovers = {p.name for p in (tmp_path / "tables" / "heartbeats").glob("b-*.parquet")}
    assert len(leftovers) == 1, "the losing attempt's file is deleted"
