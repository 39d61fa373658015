"""Delta tables in Spark: the exactly-once streaming writer over delta-rs, the ``deltars`` batch
source that Spark SQL reads the tables through (:func:`register_tables`), and the empty tables
Delta's Spark writer needs before the views (:func:`ensure_spark_tables`).

The files and commits themselves are :mod:`mirror_lib.tables.delta_rs` (no Spark there).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)

from mirror_lib.config.model import MirrorConfig
from mirror_lib.tables.delta_rs import (
    AddActionFields,
    _open,
    commit_files,
    ensure_tables,
    table_path,
    write_files,
)
from mirror_lib.tables.location import spark_table_name
from mirror_lib.tables.schemas import SCHEMAS, TABLES


@dataclass
class DeltaCommitMessage(WriterCommitMessage):
    """What one write task left for the driver commit."""

    query_id: str
    batch_id: int
    partition: int
    attempt: int
    files: dict[str, list[AddActionFields]] = field(default_factory=dict)


def _merge(messages: Iterable[DeltaCommitMessage | None]) -> dict[str, list[AddActionFields]]:
    merged: dict[str, list[AddActionFields]] = {}
    for message in messages:
        if message is not None:
            for name, files in message.files.items():
                merged.setdefault(name, []).extend(files)
    return merged


class DeltaBatchWriter(DataSourceStreamWriter):
    """Stream writer base: implement :meth:`to_tables`; option ``root`` = state directory."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = dict(options)
        self.root = self.options["root"]

    def to_tables(self, rows: list) -> dict[str, pa.Table]:
        """Turn one task's rows into Arrow tables keyed by table name."""
        raise NotImplementedError

    def task_info(self) -> tuple[str, int, int, int]:
        """(query id, batch id, partition id, attempt) of the running task."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            raise RuntimeError("DeltaBatchWriter.write() must run inside a Spark task")
        query_id = ctx.getLocalProperty("sql.streaming.queryId") or "unknown"
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId") or -1)
        return query_id, batch_id, ctx.partitionId(), ctx.attemptNumber()

    def write(self, iterator: Iterator[Any]) -> DeltaCommitMessage:
        query_id, batch_id, partition, attempt = self.task_info()
        rows = list(iterator)
        tables = self.to_tables(rows) if rows else {}
        prefix = f"part-{query_id}-b{batch_id}-p{partition}-a{attempt}"
        files = write_files(self.root, tables, prefix)
        return DeltaCommitMessage(query_id, batch_id, partition, attempt, files)

    def commit(self, messages: Sequence[DeltaCommitMessage | None], batchId: int) -> None:
        present = [m for m in messages if m is not None]
        if present:
            commit_files(self.root, _merge(present), f"mirror:{present[0].query_id}", batchId)

    def abort(self, messages: Sequence[DeltaCommitMessage | None], batchId: int) -> None:
        """Deletes nothing: a stop can abort while the Delta commit of this batch is still
        completing, and deleting its files then would corrupt the table. Unreferenced files
        are removed by :func:`maintain` (vacuum)."""


@dataclass
class DeltaFragment(InputPartition):
    """A pickled pyarrow parquet fragment; ``None`` = every file of the latest version."""

    fragment: Any


class DeltaRsReader(DataSourceReader):
    """Pinned version: one partition per file. Unpinned: one partition that reads the latest.

    Spark caches a relation's planned partitions (a temp view or DataFrame re-runs them), so an
    unpinned read resolves the version when it runs: fresh data, and no stale files after vacuum.
    """

    def __init__(self, path: str, version: int | None, schema: pa.Schema) -> None:
        self.path, self.version, self.schema = path, version, schema

    def partitions(self) -> Sequence[InputPartition]:
        if self.version is None:
            return [DeltaFragment(None)]
        dataset = _open(self.path, self.version).to_pyarrow_dataset()
        return [DeltaFragment(f) for f in dataset.get_fragments()]

    def read(self, partition: DeltaFragment | None) -> Iterator[pa.RecordBatch]:
        if partition is None:  # Spark reads one None partition when partitions() is empty
            return
        fragments = [partition.fragment]
        if partition.fragment is None:
            fragments = _open(self.path).to_pyarrow_dataset().get_fragments()
        for fragment in fragments:
            yield from fragment.to_batches(schema=self.schema, columns=self.schema.names)


class DeltaRsDataSource(DataSource):
    """``format("deltars")``: options ``path``, ``versionAsOf`` or ``timestampAsOf``."""

    @classmethod
    def name(cls) -> str:
        return "deltars"

    def _table(self) -> Any:
        return _open(
            self.options["path"], self.options.get("versionAsOf"), self.options.get("timestampAsOf")
        )

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self._table().to_pyarrow_dataset().schema)

    def reader(self, schema: Any) -> DataSourceReader:
        dt = self._table()
        full = dt.to_pyarrow_dataset().schema
        wanted = pa.schema([full.field(name) for name in schema.fieldNames()])
        pinned = self.options.get("versionAsOf") or self.options.get("timestampAsOf")
        return DeltaRsReader(self.options["path"], dt.version() if pinned else None, wanted)


def sql_string(value: str) -> str:
    """A Spark SQL string literal of ``value`` (backslash escapes, as Spark's parser reads them)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def register_tables(
    spark: Any,
    root: str,
    as_of_version: int | None = None,
    as_of_timestamp: str | None = None,
    prefix: str = "",
) -> list[str]:
    """Register every table as temp view ``<prefix><table>`` (``USING deltars``); returns names.

    Registers the ``deltars`` source and creates missing tables (empty) first. Unpinned views
    read the latest version at each query. ``as_of_version`` applies to every table (one
    without that version raises), so ``as_of_timestamp`` is the useful cross-table pin.
    """
    spark.dataSource.register(DeltaRsDataSource)  # idempotent
    ensure_tables(root)
    names = []
    for name in TABLES:
        options = [f"path {sql_string(table_path(root, name))}"]
        if as_of_version is not None:
            options.append(f"versionAsOf {sql_string(str(int(as_of_version)))}")
        elif as_of_timestamp:
            options.append(f"timestampAsOf {sql_string(as_of_timestamp)}")
        view = f"{prefix}{name}"
        spark.sql(
            f"CREATE OR REPLACE TEMPORARY VIEW `{view.replace('`', '``')}` "
            f"USING deltars OPTIONS ({', '.join(options)})"
        )
        names.append(view)
    return names


def ensure_spark_tables(spark: Any, config: MirrorConfig) -> list[str]:
    """With Delta's Spark writer: create every missing table empty (views need all of them)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    created = []
    for name, schema in SCHEMAS.items():
        table = spark_table_name(config, name)
        if spark.catalog.tableExists(table):
            continue
        empty = spark.createDataFrame([], from_arrow_schema(schema))
        empty.write.format("delta").mode("ignore").saveAsTable(table)
        created.append(table)
    return created
