"""Which Kafka records a delta-rs table already holds, so that any writer appends each once.

Every row of a state table names the record it was decoded from (``cluster``, ``kafka_topic``,
``kafka_partition``, ``kafka_offset``). Each commit of :func:`append_unseen` also records, per
(cluster, topic, partition) it wrote rows of, the next offset as a Delta app transaction
``mirror-rows/<cluster>/<topic>/<partition>``. A later writer keeps only rows of records at or
after that offset. The Spark query (``foreachBatch``, replaying from its checkpoint) and the
``--once`` catch-up on the driver (:mod:`mirror_lib.tables.catch_up`, its own positions) can
therefore read overlapping ranges of the internal topics and still never write a row twice.
Partitions are read in offset order, so "at or after the table's position" is exactly "not yet
written". Rows without an origin (none of the materialized ones) are always appended.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mirror_lib.tables.delta_rs import (
    COMMIT_RETRIES,
    abort_files,
    commit_actions,
    ensure_tables,
    table_path,
    write_files,
)
from mirror_lib.tables.rollups import ROLLUPS, rolled_up, with_rollups
from mirror_lib.tables.schemas import SCHEMAS

Origin = tuple[str, str, int]  # (cluster, kafka topic, kafka partition)
_KEYS = ("cluster", "kafka_topic", "kafka_partition")


def position_app_id(origin: Origin) -> str:
    """The app transaction id of one source partition (Kafka topic names hold no ``/``)."""
    cluster, topic, partition = origin
    return f"mirror-rows/{cluster}/{topic}/{partition}"


def row_ends(table: pa.Table) -> dict[Origin, int]:
    """Per source partition in ``table``: the offset after its last row's record."""
    return {o: last + 1 for o, last in _offsets(table, "max").items()}


def row_starts(table: pa.Table) -> dict[Origin, int]:
    """Per source partition in ``table``: the offset of its first row's record."""
    return _offsets(table, "min")


def _offsets(table: pa.Table, which: str) -> dict[Origin, int]:
    if not {*_KEYS, "kafka_offset"} <= set(table.column_names):
        return {}  # no origin columns: write_files fills them with nulls
    known = table.filter(pc.is_valid(table["kafka_offset"]))
    if not known.num_rows:
        return {}
    found = known.group_by(list(_KEYS)).aggregate([("kafka_offset", which)])
    columns = [found[k].to_pylist() for k in (*_KEYS, f"kafka_offset_{which}")]
    return {
        (c, t, int(p)): int(o)
        for c, t, p, o in zip(*columns, strict=True)
        if c is not None and t is not None and p is not None
    }


def held(dt: Any, origins: list[Origin]) -> dict[Origin, int]:
    """The recorded position of each origin in the table ``dt`` (absent: none recorded)."""
    out = {}
    for origin in origins:
        version = dt.transaction_version(position_app_id(origin))
        if version is not None:
            out[origin] = int(version)
    return out


def unseen(table: pa.Table, positions: dict[Origin, int]) -> pa.Table:
    """The rows of ``table`` whose record is at or after its partition's position."""
    if not positions or not table.num_rows:
        return table
    old = None
    for (cluster, topic, partition), position in positions.items():
        mask = pc.and_(
            pc.and_(pc.equal(table["cluster"], cluster), pc.equal(table["kafka_topic"], topic)),
            pc.and_(
                pc.equal(table["kafka_partition"], partition),
                pc.less(table["kafka_offset"], position),
            ),
        )
        old = mask if old is None else pc.or_(old, mask)
    return table.filter(pc.invert(pc.fill_null(old, False)))


def _fresh_rows(
    root: str, name: str, table: pa.Table, have: dict[Origin, int], restarted: Collection[Origin]
) -> pa.Table:
    """What to append to table ``name``: the rows of ``table`` past its positions ``have`` or,
    for a rollup, their rollup and that of the history of origins it sees the first time."""
    fresh = rolled_up(name, unseen(table, have))
    if name not in ROLLUPS:
        return fresh
    new = [o for o in row_ends(table) if o not in have and o not in restarted]
    return pa.concat_tables([*_earlier_rolled_up(root, name, table, new), fresh])


def _earlier_rolled_up(
    root: str, name: str, table: pa.Table, origins: list[Origin]
) -> list[pa.Table]:
    """For rollup ``name``: the rollup of the rows its source table holds of ``origins`` before
    ``table``'s first row of each. A rollup table knows an origin only from its first write, so
    this is the history written before the rollup existed (an upgrade), read once per origin."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable  # lazy: optional extra "delta"

    path = table_path(root, ROLLUPS[name])
    if not origins or not DeltaTable.is_deltatable(path):
        return []
    dataset = DeltaTable(path).to_pyarrow_dataset()
    starts = row_starts(table)
    out = []
    for origin in origins:
        where = ds.field("kafka_offset") < starts[origin]
        for key, value in zip(_KEYS, origin, strict=True):
            where = where & (ds.field(key) == value)
        for batch in dataset.to_batches(filter=where):
            if batch.num_rows:
                out.append(rolled_up(name, pa.Table.from_batches([batch])))
    return out


def append_unseen(
    root: str,
    tables: dict[str, pa.Table],
    file_prefix: str,
    tag: tuple[str, int] | None = None,
    restarted: Collection[Origin] = (),
) -> dict[str, str]:
    """Append to each table the rows it does not hold yet, in one Delta commit per table.

    Per table: ``"empty"`` (no rows given), ``"skipped"`` (every row is already held, or the
    table's app transaction ``tag`` (app id, version) is already at that version: a replay
    of a Spark batch written before positions existed) or ``"committed"``. A concurrent commit
    re-reads the positions and filters again, so two writers never add the same row.
    ``restarted``: partitions whose offsets began again below the recorded position (the topic
    was deleted and created again); their recorded positions are ignored and replaced.
    Rows of a table with a rollup (``replication_metrics``, ``heartbeats``) also go, rolled up,
    to it (:mod:`mirror_lib.tables.rollups`), which filters them by its own positions first.
    """
    from deltalake import DeltaTable  # lazy: optional extra "delta"
    from deltalake.exceptions import CommitFailedError  # lazy: optional extra "delta"
    from deltalake.transaction import Transaction  # lazy: optional extra "delta"

    result: dict[str, str] = {}
    for name, table in with_rollups(tables).items():
        result[name] = "empty"
        if table is None or not table.num_rows:
            continue
        path = table_path(root, name)
        if name in SCHEMAS and not DeltaTable.is_deltatable(path):
            ensure_tables(root)
        ends = row_ends(table)
        for attempt in range(COMMIT_RETRIES):
            dt = DeltaTable(path)
            if tag is not None and (dt.transaction_version(tag[0]) or -1) >= tag[1]:
                result[name] = "skipped"
                break
            have = held(dt, [o for o in ends if o not in restarted])
            fresh = _fresh_rows(root, name, table, have, restarted)
            if not fresh.num_rows:
                result[name] = "skipped"
                break
            files = write_files(root, {name: fresh}, file_prefix)
            txns = [Transaction(position_app_id(o), end) for o, end in row_ends(fresh).items()]
            meta = {"mirror.app_id": "mirror-rows"}
            if tag is not None:
                txns.append(Transaction(*tag))
                meta = {"mirror.app_id": tag[0], "mirror.version": str(tag[1])}
            try:
                commit_actions(dt, files[name], txns, meta)
                result[name] = "committed"
                break
            except CommitFailedError:  # a concurrent commit: re-read the positions, filter again
                abort_files(root, files)
                if attempt == COMMIT_RETRIES - 1:
                    raise
                time.sleep(0.05 * 2**attempt)
    return result
