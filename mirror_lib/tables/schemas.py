"""Delta table names and schemas (docs/design.md#d7-delta-tables): one definition shared by the
delta-rs and Spark writers.

Timestamps are UTC, tz-aware (keeps delta-rs tables at protocol (1, 2), readable everywhere).
``cluster`` is the alias of the cluster whose internal topics were read (the flow's target for
our own topics). ``kafka_topic``/``kafka_partition``/``kafka_offset`` locate the source record.
"""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("ms", tz="UTC")

_ORIGIN = [
    ("cluster", pa.string()),
    ("kafka_topic", pa.string()),
    ("kafka_partition", pa.int32()),
    ("kafka_offset", pa.int64()),
    ("record_ts", TS),
]

SCHEMAS: dict[str, pa.Schema] = {
    # kind = "segment" (ours: exact runs) or "point" (an MM2 OffsetSync: start == end).
    "offset_syncs": pa.schema([
        ("flow", pa.string()), ("source", pa.string()), ("target", pa.string()),
        ("topic", pa.string()), ("remote_topic", pa.string()), ("partition", pa.int32()),
        ("upstream_start", pa.int64()), ("upstream_end", pa.int64()),
        ("downstream_start", pa.int64()), ("downstream_end", pa.int64()),
        ("kind", pa.string()), ("batch_id", pa.int64()), *_ORIGIN,
    ]),
    "checkpoints": pa.schema([
        ("source", pa.string()), ("target", pa.string()), ("group_id", pa.string()),
        ("topic", pa.string()), ("partition", pa.int32()), ("upstream_offset", pa.int64()),
        ("downstream_offset", pa.int64()), ("metadata", pa.string()), *_ORIGIN,
    ]),
    # hops = number of replication hops the heartbeat travelled (0 = written on this cluster).
    "heartbeats": pa.schema([
        ("source", pa.string()), ("target", pa.string()), ("heartbeat_ts", TS),
        ("hops", pa.int32()), *_ORIGIN,
    ]),
    "replication_metrics": pa.schema([
        ("flow", pa.string()), ("source", pa.string()), ("target", pa.string()),
        ("topic", pa.string()), ("remote_topic", pa.string()), ("partition", pa.int32()),
        ("batch_id", pa.int64()), ("query_id", pa.string()), ("slot", pa.int32()),
        ("ts", TS), ("records", pa.int64()), ("bytes", pa.int64()),
        ("upstream_first", pa.int64()), ("upstream_last", pa.int64()),
        ("downstream_first", pa.int64()), ("downstream_last", pa.int64()), ("lag", pa.int64()),
        ("latency_ms_min", pa.float64()), ("latency_ms_avg", pa.float64()),
        ("latency_ms_max", pa.float64()), ("latency_ms_p50", pa.float64()),
        ("latency_ms_p99", pa.float64()),
        ("age_ms_min", pa.float64()), ("age_ms_avg", pa.float64()), ("age_ms_max", pa.float64()),
        ("age_ms_p50", pa.float64()), ("age_ms_p99", pa.float64()), *_ORIGIN,
    ]),
    # Per partition, minute and write: replication_metrics rolled up (mirror_lib.tables.rollups).
    # ts/first_ts: the latest and earliest row's; kafka_offset/record_ts: those of the last
    # metrics record rolled up.
    "metrics_per_minute": pa.schema([
        ("flow", pa.string()), ("source", pa.string()), ("target", pa.string()),
        ("topic", pa.string()), ("remote_topic", pa.string()), ("partition", pa.int32()),
        ("minute", TS), ("records", pa.int64()), ("bytes", pa.int64()), ("batches", pa.int64()),
        ("latency_ms_p50", pa.float64()), ("latency_ms_p99", pa.float64()),
        ("latency_ms_max", pa.float64()), ("lag", pa.int64()), ("upstream_last", pa.int64()),
        ("ts", TS), ("first_ts", TS), *_ORIGIN,
    ]),
    # Per cluster pair, hops, minute and write: heartbeats rolled up (mirror_lib.tables.rollups).
    "heartbeats_per_minute": pa.schema([
        ("source", pa.string()), ("target", pa.string()), ("hops", pa.int32()),
        ("minute", TS), ("heartbeats", pa.int64()), ("heartbeat_ts", TS), *_ORIGIN,
    ]),
    # type: gap, start, stop, error, decode_error; details = the whole event as JSON.
    "flow_events": pa.schema([
        ("type", pa.string()), ("flow", pa.string()), ("ts", TS), ("topic", pa.string()),
        ("partition", pa.int32()), ("reason", pa.string()), ("action", pa.string()),
        ("details", pa.string()), *_ORIGIN,
    ]),
    # One row per partition per `mirror verify` run; upstream_to/downstream_to = verified point
    # (next offsets to verify), checksum = sha256 chained over every verified record so far.
    "verifications": pa.schema([
        ("run_id", pa.string()), ("flow", pa.string()), ("source", pa.string()),
        ("target", pa.string()), ("topic", pa.string()), ("remote_topic", pa.string()),
        ("partition", pa.int32()), ("status", pa.string()), ("behind", pa.int64()),
        ("upstream_from", pa.int64()), ("upstream_to", pa.int64()),
        ("downstream_from", pa.int64()), ("downstream_to", pa.int64()),
        ("records", pa.int64()), ("total_records", pa.int64()), ("checksum", pa.string()),
        ("source_end_offset", pa.int64()), ("diff_upstream_offset", pa.int64()),
        ("diff_downstream_offset", pa.int64()), ("detail", pa.string()),
        ("duration_ms", pa.float64()), ("verified_ts", TS), ("record_ts", TS),
    ]),
    # One row per partition and step of `mirror cutover --apply`: migrating -> migrated -> retired.
    "migrations": pa.schema([
        ("run_id", pa.string()), ("flow", pa.string()), ("source", pa.string()),
        ("target", pa.string()), ("topic", pa.string()), ("remote_topic", pa.string()),
        ("partition", pa.int32()), ("status", pa.string()), ("source_end_offset", pa.int64()),
        ("target_offset", pa.int64()), ("groups", pa.string()), ("detail", pa.string()),
        ("ts", TS), ("record_ts", TS),
    ]),
}  # fmt: skip

TABLES = tuple(SCHEMAS)

#: How the two busiest tables lay out their files (docs/operations/state.md#file-layout): rows
#: sorted by these columns within a file, so that each partition's offsets and times form runs
#: that climb by small steps, and those columns stored as deltas (``DELTA_BINARY_PACKED``)
#: rather than in a dictionary. Every table's files are zstd-compressed.
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "offset_syncs": ("flow", "topic", "partition", "upstream_start"),
    "replication_metrics": ("flow", "topic", "partition", "ts"),
    "metrics_per_minute": ("flow", "topic", "partition", "minute"),
}
DELTA_ENCODED: dict[str, tuple[str, ...]] = {
    "offset_syncs": (
        "upstream_start", "upstream_end", "downstream_start", "downstream_end", "batch_id",
        "kafka_offset", "record_ts",
    ),
    "replication_metrics": (
        "batch_id", "ts", "upstream_first", "upstream_last", "downstream_first",
        "downstream_last", "kafka_offset", "record_ts",
    ),
}  # fmt: skip
#: Rows a row group holds at most, where readers want a few rows of a file: a read of the
#: segments around a checkpoint decodes the row groups its range touches, so ``offset_syncs``
#: keeps them at 128 Ki rows instead of a million (docs/operations/state.md#file-layout).
ROW_GROUP_ROWS: dict[str, int] = {"offset_syncs": 131_072}
