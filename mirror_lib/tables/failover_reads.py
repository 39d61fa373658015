"""The latest checkpoints and the offsets they translate to, read from the delta-rs tables in
Arrow, for the ``latest_checkpoints`` and ``offset_translation`` views of a local session.

Both answers are small (a row per group and partition) but come from tables that grow with
the rate: a week at 5,000 records/s holds 805,000 checkpoints and 16.8 million segments. In
Spark SQL every one of those rows crosses into the JVM through the Python data source first
(26 s for the segments alone). Here the checkpoints are reduced in Arrow, and of the segments
only those around the checkpoints are read, every partition's in one pass over the files with
the ranges pushed down to them (docs/performance.md). The answers are those of the SQL views in
:data:`mirror_lib.spark.views.VIEWS`, which Delta's Spark writer's tables still use.
"""

from __future__ import annotations

import bisect
import functools
import operator
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

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
#: Checkpoints of a partition this many offsets apart or closer share a window of segments.
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
    keys = [(cp["source"], cp["target"], cp["topic"], cp["partition"]) for cp in cps]
    ups = [cp["upstream_offset"] for cp in cps]
    windows = _Windows(syncs, keys, ups)
    places = [None if u is None else windows.place(k, u) for k, u in zip(keys, ups, strict=True)]
    # a segment of the window below a checkpoint starts below it too; else the files are asked
    unsure = {
        (k, u)
        for k, u, p in zip(keys, ups, places, strict=True)
        if p and not p.below and not p.inside
    }
    before_first = unsure - _any_start_at_or_below(syncs, unsure)  # below the first, or none
    past: dict[tuple, int | None] = {}
    for key, up, place, cp in zip(keys, ups, places, cps, strict=True):
        if place and place.at is None and (key, up) not in before_first:
            past.setdefault(key, cp["downstream_offset"])
    ends = _last_downstream_ends(syncs, past)
    out = []
    for key, up, place, cp in zip(keys, ups, places, cps, strict=True):
        offset = cp["downstream_offset"]  # below the partition's first segment, or none
        if place and (key, up) not in before_first:
            if place.at is not None:  # inside a segment, or in a gap before one
                offset = place.at
            elif ends.get(key) is not None:  # past the last
                offset = ends[key] + 1
        row = {k: cp[k] for k in ("source", "target", "group_id", "topic", "partition")}
        row.update(upstream_offset=up, offset=offset, checkpoint_offset=cp["downstream_offset"])
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


def _reaches() -> list[int | None]:
    """:data:`_FIRST_REACH`, a thousandfold further each time, then no bound."""
    return [*(_FIRST_REACH * 1_000**k for k in range(5)), None]


class _Windows:
    """The segments the checkpoints can need, read in windows of ``upstream_end``: a
    partition's checkpoints less than :data:`_SPAN` apart share one, from a little below the
    lowest to a first reach past the highest, grown a thousandfold until it holds a segment
    ending at or after that highest (or reaches the partition's end). Every partition's windows
    are read in one pass a round (:func:`_in_ranges`), so a group at the head and one a week
    behind each read a few segments, not the week between them, and a thousand partitions do
    not cost a thousand reads."""

    def __init__(self, syncs: Any, keys: list[tuple], ups: list[int | None]) -> None:
        offsets: dict[tuple, set[int]] = {}
        for key, up in zip(keys, ups, strict=True):
            if up is not None:
                offsets.setdefault(key, set()).add(up)
        self.lows: dict[tuple, list[int]] = {}
        self.ids: dict[tuple, list[int]] = {}
        asks: list[tuple[tuple, int, int]] = []  # (partition, top, highest checkpoint)
        for key, ups_of in offsets.items():
            for low, high in _clusters(sorted(ups_of)):
                self.lows.setdefault(key, []).append(low)
                self.ids.setdefault(key, []).append(len(asks))
                asks.append((key, low - _FIRST_REACH - 1, high))
        parts: list[list[dict[str, np.ndarray]]] = [[] for _ in asks]
        reached = [_LOWEST] * len(asks)
        pending = list(range(len(asks)))
        tops = [top for _, top, _ in asks]
        for reach in _reaches():
            bounds = [
                (asks[w][0], w, tops[w], _HIGHEST if reach is None else asks[w][2] + reach)
                for w in pending
            ]
            for w, rows in _in_ranges(syncs, "upstream_end", bounds, _WINDOW).items():
                parts[w].append(rows)
                reached[w] = max(reached[w], int(rows["upstream_end"].max()))
            pending = [w for w in pending if reached[w] < asks[w][2]]
            if reach is None or not pending:
                break
            for w in pending:
                tops[w] = asks[w][2] + reach
        self.segments = [_sorted(p) for p in parts]

    def place(self, key: tuple, upstream: int) -> _Place:
        """Where ``upstream`` falls among its window's segments."""
        at = bisect.bisect_right(self.lows[key], upstream) - 1
        ue, us, ds = self.segments[self.ids[key][at]]
        i = int(np.searchsorted(ue, upstream, side="left"))
        if i < len(ue) and us[i] <= upstream:
            return _Place(i, True, int(ds[i]) + (upstream - int(us[i])))
        return _Place(i, False, int(ds[i]) if i < len(ue) else None)


class _Place(NamedTuple):
    below: int  # segments of the window that end below the offset
    inside: bool
    at: int | None  # the translation inside a segment or in a gap before one; None past them


_WINDOW = ("upstream_end", "upstream_start", "downstream_start")


def _sorted(parts: list[dict[str, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """A window's segments as (ends, starts, downstream starts) in (end, start) order."""
    cols = [np.concatenate([p[c] for p in parts]) if parts else np.empty(0, np.int64)
            for c in _WINDOW]  # fmt: skip
    order = np.lexsort((cols[1], cols[0]))
    return tuple(c[order] for c in cols)


def _any_start_at_or_below(syncs: Any, asks: set[tuple[tuple, int]]) -> set[tuple[tuple, int]]:
    """Those of (partition, offset) ``asks`` whose partition has a segment starting at or
    below the offset: looked for a reach below it first, then a thousandfold further."""
    found: set[tuple[tuple, int]] = set()
    pending, his = sorted(asks), {ask: ask[1] for ask in asks}
    for reach in _reaches():
        bounds = [
            (key, w, _LOWEST if reach is None else up - reach - 1, his[(key, up)])
            for w, (key, up) in enumerate(pending)
        ]
        hits = _in_ranges(syncs, "upstream_start", bounds, ("upstream_start",))
        found.update(pending[w] for w in hits)
        pending = [ask for w, ask in enumerate(pending) if w not in hits]
        if reach is None or not pending:
            break
        for key, up in pending:
            his[(key, up)] = up - reach - 1
    return found


def _last_downstream_ends(syncs: Any, anchors: dict[tuple, int | None]) -> dict[tuple, int]:
    """Each partition's highest ``downstream_end``: looked for at or above its anchor (a
    checkpoint's own offset, usually that end + 1) less a reach that grows a thousandfold
    until a segment is found, so the files' statistics skip the rest."""
    ends: dict[tuple, int] = {}
    pending = sorted(anchors, key=str)
    los: dict[tuple, int] = {}
    his = dict.fromkeys(pending, _HIGHEST)
    for reach in _reaches():
        bounds = []
        for w, key in enumerate(pending):
            anchor = anchors[key]
            lo = _LOWEST if reach is None or anchor is None else anchor - reach - 1
            bounds.append((key, w, lo, his[key]))
            los[key] = lo
        hits = _in_ranges(syncs, "downstream_end", bounds, ("downstream_end",))
        for w, rows in hits.items():
            ends[pending[w]] = int(rows["downstream_end"].max())
        pending = [k for w, k in enumerate(pending) if w not in hits]
        if reach is None or not pending:
            break
        his = {k: los[k] for k in pending}
    return ends


_PARTITION = ["source", "target", "remote_topic", "partition"]
_LOWEST, _HIGHEST = -(2**63), 2**63 - 1
#: Offset ranges one pass hands the files' statistics at most (neighbours merge first).
_TERMS = 16


def _in_ranges(
    syncs: Any, column: str, bounds: list[tuple[tuple, int, int, int]], columns: tuple[str, ...]
) -> dict[int, dict[str, np.ndarray]]:
    """Per ask id, the ``columns`` of the segments of its partition whose ``column`` is in its
    range (lo, hi] (``bounds``: partition, id, lo, hi), in one pass over the files: the ranges,
    merged, are pushed down to them, and a hash join hands each segment to its asks."""
    import pyarrow.acero as ac
    import pyarrow.dataset as ds

    if not bounds:
        return {}
    field = ds.field(column)
    terms = []
    for lo, hi in _merged([(lo, hi) for _, _, lo, hi in bounds]):
        term = ds.scalar(True)
        if lo > _LOWEST:
            term = term & (field > lo)
        if hi < _HIGHEST:
            term = term & (field <= hi)
        terms.append(term)
    where = (ds.field("kind") == "segment") & functools.reduce(operator.or_, terms)
    wanted = list(dict.fromkeys([*_PARTITION, column, *columns]))
    types = [syncs.schema.field(c).type for c in _PARTITION]
    asks = pa.table(
        [*(pa.array([b[0][i] for b in bounds], t) for i, t in enumerate(types)),
         *(pa.array([min(max(b[i], _LOWEST), _HIGHEST) for b in bounds], pa.int64())
           for i in (1, 2, 3))],
        names=[*_PARTITION, "ask", "lo", "hi"],
    )  # fmt: skip
    segments = ac.Declaration.from_sequence([
        ac.Declaration("scan", ac.ScanNodeOptions(syncs, filter=where, columns=wanted)),
        ac.Declaration("filter", ac.FilterNodeOptions(where)),
        ac.Declaration("project", ac.ProjectNodeOptions([ds.field(c) for c in wanted], wanted)),
    ])  # fmt: skip
    join = ac.HashJoinNodeOptions(
        "inner", _PARTITION, _PARTITION, left_output=wanted, right_output=["ask", "lo", "hi"]
    )
    joined = ac.Declaration.from_sequence([
        ac.Declaration("hashjoin", join, inputs=[segments,
                       ac.Declaration("table_source", ac.TableSourceNodeOptions(asks))]),
        ac.Declaration("filter", ac.FilterNodeOptions((field > ds.field("lo"))
                                                      & (field <= ds.field("hi")))),
    ]).to_table()  # fmt: skip
    ask = joined["ask"].to_numpy()
    order = np.argsort(ask, kind="stable")
    cols = {c: joined[c].to_numpy()[order] for c in dict.fromkeys([column, *columns])}
    ids, starts = np.unique(ask[order], return_index=True)
    stops = [*starts[1:], len(order)][: len(starts)]
    return {
        int(a): {c: v[s:e] for c, v in cols.items()}
        for a, s, e in zip(ids, starts, stops, strict=True)
    }


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(lo, hi] ``ranges`` as at most :data:`_TERMS` covering ranges: those overlapping or less
    than :data:`_SPAN` apart merged, then the closest neighbours until few enough."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + _SPAN:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    while len(out) > _TERMS:
        i = min(range(len(out) - 1), key=lambda j: out[j + 1][0] - out[j][1])
        out[i : i + 2] = [(out[i][0], max(out[i][1], out[i + 1][1]))]
    return out
