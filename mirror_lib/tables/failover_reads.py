"""The latest checkpoints and the offsets they translate to, read from the delta-rs tables in
Arrow, for the ``latest_checkpoints`` and ``offset_translation`` views of a local session.

Both answers are small (a row per group and partition) but come from tables that grow with
the rate: a week at 5,000 records/s holds 805,000 checkpoints and 16.8 million segments. In
Spark SQL every one of those rows crosses into the JVM through the Python data source first
(26 s for the segments alone). Here the checkpoints are reduced in Arrow, and of the segments
only those a checkpoint can need are read, with the filter pushed down to the files
(docs/performance.md). The answers are those of the SQL views in
:data:`mirror_lib.spark.views.VIEWS`, which Delta's Spark writer's tables still use.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mirror_lib.tables.delta_rs import _open, table_path
from mirror_lib.tables.schemas import TS

LATEST_CHECKPOINTS = pa.schema([
    ("source", pa.string()), ("target", pa.string()), ("group_id", pa.string()),
    ("topic", pa.string()), ("partition", pa.int32()), ("upstream_offset", pa.int64()),
    ("downstream_offset", pa.int64()), ("metadata", pa.string()), ("checkpoint_ts", TS),
])  # fmt: skip
OFFSET_TRANSLATION = pa.schema([
    ("source", pa.string()), ("target", pa.string()), ("group_id", pa.string()),
    ("topic", pa.string()), ("partition", pa.int32()), ("upstream_offset", pa.int64()),
    ("offset", pa.int64()), ("checkpoint_offset", pa.int64()),
])  # fmt: skip
#: View name -> its rows' schema (a function of this module of the same name reads them).
FAILOVER_VIEWS = {
    "latest_checkpoints": LATEST_CHECKPOINTS,
    "offset_translation": OFFSET_TRANSLATION,
}
_KEYS = ["cluster", "source", "target", "group_id", "topic", "partition"]
#: How far past its checkpoints a partition's segments are read first, and how far below a
#: checkpoint's own offset its last segment end is looked for first (then 1,000 times further
#: each time): a group at the head is usually just past it.
_FIRST_REACH = 1_000
#: Checkpoints of a partition this many offsets apart or closer are translated from one read.
_SPAN = 1_000_000


def latest_checkpoints(
    root: str, version: int | None = None, timestamp: str | None = None
) -> pa.Table:
    """The latest checkpoint per (cluster, source, target, group, topic, partition): the row of
    the highest ``kafka_offset``, as the ``latest_checkpoints`` view."""
    dt = _open(table_path(root, "checkpoints"), version, timestamp)
    columns = [
        *_KEYS,
        "upstream_offset",
        "downstream_offset",
        "metadata",
        "record_ts",
        "kafka_offset",
    ]
    rows = dt.to_pyarrow_dataset().to_table(columns=columns)
    if not rows.num_rows:
        return LATEST_CHECKPOINTS.empty_table()
    newest = rows.group_by(_KEYS).aggregate([("kafka_offset", "max")])
    newest = newest.select([*_KEYS, "kafka_offset_max"]).rename_columns([*_KEYS, "kafka_offset"])
    latest = rows.join(newest, [*_KEYS, "kafka_offset"], join_type="inner")
    latest = latest.rename_columns(
        ["checkpoint_ts" if c == "record_ts" else c for c in latest.column_names]
    )
    return latest.select(LATEST_CHECKPOINTS.names).cast(LATEST_CHECKPOINTS)


def offset_translation(
    root: str, version: int | None = None, timestamp: str | None = None
) -> pa.Table:
    """Each latest checkpoint's offset translated through the exact segments, as the
    ``offset_translation`` view: inside the first segment that ends at or after it, exact; in a
    gap, that segment's start; past the last, its end + 1; below the partition's first segment
    (a take-over from MirrorMaker 2), or without segments, the checkpoint's own."""
    cps = latest_checkpoints(root, version, timestamp).to_pylist()
    syncs = _open(table_path(root, "offset_syncs"), version, timestamp).to_pyarrow_dataset()
    out = []
    for key, group in _by_partition(cps).items():
        segments = _Segments(syncs, key, [cp["upstream_offset"] for cp in group])
        for cp in group:
            offset = segments.translate(cp["upstream_offset"], cp["downstream_offset"])
            row = {k: cp[k] for k in ("source", "target", "group_id", "topic", "partition")}
            row.update(upstream_offset=cp["upstream_offset"], offset=offset,
                       checkpoint_offset=cp["downstream_offset"])  # fmt: skip
            out.append(row)
    return pa.Table.from_pylist(out, schema=OFFSET_TRANSLATION)


def _clusters(offsets: list[int]) -> list[tuple[int, int]]:
    """Sorted ``offsets`` as (lowest, highest) runs whose neighbours are at most :data:`_SPAN`
    apart."""
    runs: list[tuple[int, int]] = []
    for o in offsets:
        if runs and o - runs[-1][1] <= _SPAN:
            runs[-1] = (runs[-1][0], o)
        else:
            runs.append((o, o))
    return runs


def _by_partition(cps: list[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for cp in cps:
        key = (cp["source"], cp["target"], cp["topic"], cp["partition"])
        groups.setdefault(key, []).append(cp)
    return groups


class _Segments:
    """The segments of one partition that its checkpoints can need, read in windows of
    ``upstream_end`` that the files' statistics prune: checkpoints less than :data:`_SPAN`
    apart share a window, which grows a thousandfold until it holds a segment ending at or
    after its highest checkpoint (or reaches the partition's end). A group at the head and
    one a week behind each read a few segments, not the week between them."""

    def __init__(self, syncs: Any, key: tuple, offsets: list[int | None]) -> None:
        import pyarrow.dataset as ds

        source, target, topic, partition = key
        self.syncs = syncs
        self.mine = (
            (ds.field("kind") == "segment") & (ds.field("source") == source)
            & (ds.field("target") == target) & (ds.field("remote_topic") == topic)
            & (ds.field("partition") == partition)
        )  # fmt: skip
        runs = _clusters(sorted({o for o in offsets if o is not None}))
        self.lows = [low for low, _ in runs]
        self.windows = [self._window(low, high) for low, high in runs]
        self._last_end: int | None = None
        self._starts_at_or_below: dict[int, bool] = {}

    def _read(self, where: Any, columns: tuple[str, ...] = ()) -> pa.Table:
        wanted = list(columns or ("upstream_start", "upstream_end", "downstream_start"))
        return self.syncs.to_table(filter=self.mine & where, columns=wanted)

    def _window(self, low: int, high: int) -> tuple[np.ndarray, ...]:
        """Every segment ending from a little below ``low`` to where the first one ending at or
        after ``high`` is (or to the partition's end), sorted by (end, start)."""
        import pyarrow.dataset as ds

        parts, top = [], low - _FIRST_REACH - 1  # and a few below: "any start below it?"
        for reach in [*(_FIRST_REACH * 1_000**k for k in range(5)), None]:
            where = ds.field("upstream_end") > top
            if reach is not None:
                where = where & (ds.field("upstream_end") <= high + reach)
            parts.append(self._read(where))
            if reach is None or (pc.max(parts[-1]["upstream_end"]).as_py() or -1) >= high:
                break
            top = high + reach
        rows = pa.concat_tables(parts)
        # numpy, not Python lists: a window can hold millions of segments
        ue, us = (rows[c].to_numpy() for c in ("upstream_end", "upstream_start"))
        order = np.lexsort((us, ue))
        return ue[order], us[order], rows["downstream_start"].to_numpy()[order]

    def translate(self, upstream: int | None, checkpoint: int | None) -> int | None:
        if upstream is None:
            return checkpoint
        ue, us, ds = self.windows[bisect.bisect_right(self.lows, upstream) - 1]
        i = int(np.searchsorted(ue, upstream, side="left"))
        if i < len(ue) and us[i] <= upstream:  # inside a segment: no gap below it
            return int(ds[i]) + (upstream - int(us[i]))
        # a segment of the window below it starts below it too; else the files are asked
        if i == 0 and not self._any_start_at_or_below(upstream):  # below the first, or none
            return checkpoint
        if i < len(ue):  # in a gap
            return int(ds[i])
        end = self._last_downstream_end(checkpoint)
        return checkpoint if end is None else end + 1

    def _any_start_at_or_below(self, upstream: int) -> bool:
        import pyarrow.dataset as ds

        if upstream not in self._starts_at_or_below:
            found = self.syncs.head(
                1, filter=self.mine & (ds.field("upstream_start") <= upstream),
                columns=["upstream_start"],
            )  # fmt: skip
            self._starts_at_or_below[upstream] = found.num_rows > 0
        return self._starts_at_or_below[upstream]

    def _last_downstream_end(self, anchor: int | None) -> int | None:
        """The partition's highest ``downstream_end``: looked for at or above ``anchor`` (the
        checkpoint's own offset, which is usually that end + 1) less a reach that grows a
        thousandfold until a segment is found, so the files' statistics skip the rest."""
        import pyarrow.dataset as ds

        if self._last_end is None:
            floors = [] if anchor is None else [anchor - _FIRST_REACH * 1_000**k for k in range(6)]
            for where in [*(ds.field("downstream_end") >= f for f in floors), ds.scalar(True)]:
                found = self._read(where, ("downstream_end",))
                if found.num_rows:
                    self._last_end = pc.max(found["downstream_end"]).as_py()
                    break
        return self._last_end
