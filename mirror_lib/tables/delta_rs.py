"""delta-rs storage of the state tables (docs/design.md#d7-delta-tables): files and commits, reads,
maintenance.

Layout: ``<root>/tables/<name>`` per table of :mod:`mirror_lib.tables.schemas`. Writers
(:func:`mirror_lib.tables.positions.append_unseen`) write parquet files (:func:`write_files`)
and commit them in one Delta transaction per table (:func:`commit_actions`) with app
transactions that make them idempotent. Commits of different tables are not atomic together,
but each table is idempotent on its own.
Spark SQL reads the tables through the ``deltars`` batch data source
(:func:`mirror_lib.spark.delta_source.register_tables`). No pyspark here.
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import astuple, dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mirror_lib.tables.schemas import DELTA_ENCODED, ROW_GROUP_ROWS, SCHEMAS, SORT_KEYS, TABLES

COMMIT_RETRIES = 5
_STAT_STRING_MAX = 32  # longer strings get no min/max (keeps the log small)
_STAT_TYPES = ("integer", "floating", "timestamp", "date", "string", "large_string")


def table_path(root: str, name: str) -> str:
    """``<root>/tables/<name>``."""
    return f"{root.rstrip('/')}/tables/{name}"


def _fs(path: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path in it) for a local path or a URI."""
    from pyarrow import fs

    if "://" in path:
        return fs.FileSystem.from_uri(path)
    return fs.LocalFileSystem(), os.path.abspath(path)


def ensure_tables(root: str) -> list[str]:
    """Create every table of :data:`~mirror_lib.tables.schemas.SCHEMAS` that is missing; returns
    the new ones."""
    from deltalake import DeltaTable  # lazy: optional extra "delta"

    created = []
    for name, schema in SCHEMAS.items():
        path = table_path(root, name)
        if DeltaTable.is_deltatable(path):
            continue
        try:
            DeltaTable.create(path, schema, mode="ignore", name=name)
            created.append(name)
        except Exception:  # a concurrent creator won the race
            if not DeltaTable.is_deltatable(path):
                raise
    return created


# ---------------------------------------------------------------------------------------------
# Exactly-once commit of executor-written files


@dataclass(frozen=True)
class AddActionFields:
    """Picklable fields of a ``deltalake.transaction.AddAction`` (path relative to the table)."""

    path: str
    size: int
    partition_values: dict[str, str | None]
    modification_time: int
    data_change: bool
    stats_json: str

    @property
    def num_records(self) -> int:
        return int(json.loads(self.stats_json).get("numRecords", 0))

    def to_action(self) -> Any:
        from deltalake.transaction import AddAction  # lazy: optional extra "delta"

        return AddAction(*astuple(self))  # same field order; ``stats`` = stats_json


def _stat_value(value: Any, type_: pa.DataType) -> Any:
    if pa.types.is_timestamp(type_):  # Delta stats: millisecond ISO-8601, truncated
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return text + ("Z" if type_.tz is not None else "")
    if pa.types.is_date(type_):
        return value.isoformat()
    return value


def file_stats(table: pa.Table) -> str:
    """Delta ``stats`` JSON: numRecords, nullCount, min/max (numbers, times, short strings)."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        type_ = column.type
        if pa.types.is_nested(type_):
            continue
        nulls[name] = column.null_count
        if column.null_count == len(column):
            continue
        if not any(getattr(pa.types, f"is_{kind}")(type_) for kind in _STAT_TYPES):
            continue
        if pa.types.is_floating(type_) and pc.any(pc.is_nan(column)).as_py():
            continue
        lo, hi = (v.as_py() for v in pc.min_max(column).values())
        if isinstance(lo, str) and max(len(lo), len(hi)) > _STAT_STRING_MAX:
            continue
        mins[name], maxs[name] = _stat_value(lo, type_), _stat_value(hi, type_)
    return json.dumps(
        {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
        separators=(",", ":"),
    )


def _conform(name: str, table: pa.Table) -> pa.Table:
    """Order, complete (nulls) and cast ``table`` to the schema of a known table."""
    schema = SCHEMAS.get(name)
    if schema is None:
        return table
    extra = set(table.column_names) - set(schema.names)
    if extra:
        raise ValueError(f"table {name}: unknown columns {sorted(extra)}")
    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _laid_out(name: str, table: pa.Table) -> pa.Table:
    """``table``'s rows in the order its files keep them (``schemas.SORT_KEYS``)."""
    keys = SORT_KEYS.get(name, ())
    return table.sort_by([(k, "ascending") for k in keys]) if keys else table


def _parquet_options(name: str, columns: list[str]) -> dict[str, Any]:
    """``pyarrow.parquet.write_table`` options of a table's files: zstd, the columns of
    :data:`~mirror_lib.tables.schemas.DELTA_ENCODED` as deltas instead of a dictionary, and row
    groups of :data:`~mirror_lib.tables.schemas.ROW_GROUP_ROWS` at most."""
    deltas = [c for c in DELTA_ENCODED.get(name, ()) if c in columns]
    return {
        "compression": "zstd",
        "use_dictionary": [c for c in columns if c not in deltas],
        "column_encoding": dict.fromkeys(deltas, "DELTA_BINARY_PACKED") or None,
        "row_group_size": ROW_GROUP_ROWS.get(name),
    }


def writer_properties(name: str) -> Any:
    """The same layout as :func:`_parquet_options` for delta-rs' own writers (appends,
    compaction, deletes)."""
    from deltalake import ColumnProperties, WriterProperties  # lazy: optional extra "delta"

    delta = ColumnProperties(dictionary_enabled=False, encoding="DELTA_BINARY_PACKED")
    columns = dict.fromkeys(DELTA_ENCODED.get(name, ()), delta)
    return WriterProperties(
        compression="ZSTD",
        column_properties=columns or None,
        max_row_group_size=ROW_GROUP_ROWS.get(name),
    )


def write_files(
    root: str, tables: dict[str, pa.Table], file_prefix: str
) -> dict[str, list[AddActionFields]]:
    """One parquet file per non-empty table in its folder; returns their fields.

    Names are ``<file_prefix>-<random>.parquet``, so a re-run of the same batch never overwrites a
    file that an earlier run may already have committed.
    """
    import pyarrow.parquet as pq

    out: dict[str, list[AddActionFields]] = {}
    for name, table in tables.items():
        if table is None or table.num_rows == 0:
            continue
        table = _laid_out(name, _conform(name, table))
        fs, folder = _fs(table_path(root, name))
        fs.create_dir(folder, recursive=True)
        rel = f"{file_prefix}-{uuid.uuid4().hex[:12]}.parquet"
        full = f"{folder}/{rel}"
        options = _parquet_options(name, table.column_names)
        pq.write_table(table, full, filesystem=fs, coerce_timestamps="us", **options)
        size = fs.get_file_info(full).size
        now_ms = int(time.time() * 1000)
        out[name] = [AddActionFields(rel, size, {}, now_ms, True, file_stats(table))]
    return out


def commit_actions(
    dt: Any, files: list[AddActionFields], transactions: list[Any], meta: dict[str, str]
) -> None:
    """Append ``files`` to the table ``dt`` in one commit with these app transactions; the
    commit info gets ``meta`` and ``mirror.rows``. Raises delta-rs' ``CommitFailedError`` when
    another commit came first."""
    from deltalake.transaction import CommitProperties  # lazy: optional extra "delta"

    rows = str(sum(f.num_records for f in files))
    props = CommitProperties(app_transactions=transactions,
                             custom_metadata={**meta, "mirror.rows": rows})  # fmt: skip
    actions, parts = [f.to_action() for f in files], dt.metadata().partition_columns
    dt.create_write_transaction(actions, "append", dt.schema(), parts or None,
                                commit_properties=props)  # fmt: skip


def abort_files(root: str, actions_by_table: dict[str, list[AddActionFields]]) -> int:
    """Delete uncommitted files (best effort); returns how many were deleted.

    Files the table references are kept: Spark also aborts when it was interrupted after the
    Delta commit had already succeeded (a stop during ``commit()``).
    """
    from deltalake import DeltaTable  # lazy: optional extra "delta"
    from deltalake.exceptions import TableNotFoundError  # lazy: optional extra "delta"

    deleted = 0
    for name, files in actions_by_table.items():
        fs, folder = _fs(table_path(root, name))
        try:  # file names hold a random part (write_files): the name alone is the file
            uris = DeltaTable(table_path(root, name)).file_uris()
            committed = {uri.rsplit("/", 1)[-1] for uri in uris}
        except TableNotFoundError:  # no table yet: nothing can be referenced
            committed = set()
        for f in files:
            if f.path.rsplit("/", 1)[-1] in committed:
                continue
            try:
                fs.delete_file(f"{folder}/{f.path}")
                deleted += 1
            except (FileNotFoundError, OSError):
                pass
    return deleted


# ---------------------------------------------------------------------------------------------
# Reading: Python helpers and the ``deltars`` Spark batch data source


def _open(path: str, version: int | None = None, timestamp: str | None = None) -> Any:
    from deltalake import DeltaTable  # lazy: optional extra "delta"

    dt = DeltaTable(path)
    if version is not None:
        dt.load_as_version(int(version))
    elif timestamp:
        dt.load_as_version(timestamp)
    return dt


def read_table(
    root: str,
    name: str,
    version: int | None = None,
    timestamp: str | None = None,
    where: Any = None,
) -> pa.Table:
    """The table as Arrow (latest, or as of a version / ISO-8601 time); empty if not created yet.

    ``where``: a ``pyarrow.dataset`` expression, pushed down to the files (those whose
    statistics rule it out are not read)."""
    from deltalake import DeltaTable  # lazy: optional extra "delta"

    path = table_path(root, name)
    latest = version is None and not timestamp
    if latest and name in SCHEMAS and not DeltaTable.is_deltatable(path):
        return SCHEMAS[name].empty_table()
    dt = _open(path, version, timestamp)
    if where is None:
        return dt.to_pyarrow_table()
    return dt.to_pyarrow_dataset().to_table(filter=where)


# ---------------------------------------------------------------------------------------------
# Maintenance


def maintain(
    root: str,
    *,
    retention_days: float = 30,
    vacuum_hours: float = 168,
    compact: bool = True,
    vacuum_full: bool = False,
    properties: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Retention delete, compaction, vacuum, checkpoint and log clean-up of every table.

    ``properties`` (:meth:`~mirror_lib.tables.maintenance.MaintenancePolicy.table_properties`)
    are set on each table first where they differ, so that every later commit checkpoints and
    cleans its log by them. Rows whose ``record_ts`` is older than ``retention_days`` are
    deleted (rows with a null ``record_ts`` are kept). Vacuum removes files unreferenced for
    ``vacuum_hours`` (whole hours): **it breaks time travel to versions older than that
    window**, and with ``vacuum_full`` (which also removes orphans of killed tasks) a short
    window can delete files of a batch that is being written right now. Log entries older than
    the table's ``delta.logRetentionDuration`` (delta-rs' default: 30 days) and before its
    newest checkpoint are removed. Returns metrics per table.
    """
    import pyarrow.dataset as ds
    from deltalake import DeltaTable  # lazy: optional extra "delta"

    cutoff = datetime.now(timezone.utc) - timedelta(days=retention_days)
    report: dict[str, dict[str, Any]] = {}
    for name in TABLES:
        path = table_path(root, name)
        if not DeltaTable.is_deltatable(path):
            continue
        dt, layout = DeltaTable(path), writer_properties(name)
        metrics: dict[str, Any] = {"deleted_rows": 0}
        current = dt.metadata().configuration
        changed = {k: v for k, v in (properties or {}).items() if current.get(k) != v}
        if changed:
            dt.alter.set_table_properties(changed)
            metrics["properties"] = changed
        dataset = dt.to_pyarrow_dataset()
        if "record_ts" in dataset.schema.names:
            ts_type = dataset.schema.field("record_ts").type
            old = dataset.count_rows(filter=ds.field("record_ts") < pa.scalar(cutoff, ts_type))
            if old:
                stamp = cutoff.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                deleted = dt.delete(f"record_ts < '{stamp}'", layout)
                metrics["deleted_rows"] = deleted.get("num_deleted_rows", old)
        if compact:
            done = dt.optimize.compact(writer_properties=layout)
            metrics["compact"] = {k: done.get(k) for k in ("numFilesAdded", "numFilesRemoved")}
        hours = max(0, math.floor(vacuum_hours))
        # delta-rs refuses a retention under the table's own unless told not to enforce it
        enforce = hours >= _retention_hours(dt.metadata().configuration)
        vacuumed = dt.vacuum(hours, False, enforce, full=vacuum_full)
        metrics["vacuumed_files"] = len(vacuumed)
        dt.create_checkpoint()
        dt.cleanup_metadata()
        metrics["version"] = dt.version()
        report[name] = metrics
    return report


_UNIT_HOURS = {"second": 1 / 3600, "minute": 1 / 60, "hour": 1.0, "day": 24.0, "week": 168.0}


def _retention_hours(configuration: Mapping[str, str | None]) -> float:
    """``delta.deletedFileRetentionDuration`` (``interval N <unit>``, as maintenance sets it)
    in hours, else Delta's default, a week."""
    words = (configuration.get("delta.deletedFileRetentionDuration") or "").split()
    if len(words) == 3 and words[0] == "interval":
        unit = _UNIT_HOURS.get(words[2].rstrip("s"))
        try:
            return float(words[1]) * unit if unit is not None else 168.0
        except ValueError:
            pass
    return 168.0
