"""Delta tables in Spark: the exactly-once ``foreachBatch`` writer over delta-rs
(:func:`delta_rs_batch`), the ``deltars`` batch source that Spark SQL reads the tables through
(:func:`register_tables`), and Delta's Spark writer: the same rows appended once
(:func:`append_spark`).

The files and commits themselves are :mod:`mirror_lib.tables.delta_rs` (no Spark there).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mirror_lib.config.model import MirrorConfig
from mirror_lib.config.parse import driver_path
from mirror_lib.tables.delta_rs import _open, ensure_tables, table_path
from mirror_lib.tables.failover_reads import FAILOVER_VIEWS
from mirror_lib.tables.location import save_table, spark_table_exists, spark_table_name
from mirror_lib.tables.positions import Origin, append_unseen, row_ends, row_starts, unseen
from mirror_lib.tables.rollups import ROLLUPS, rolled_up
from mirror_lib.tables.schemas import SCHEMAS, TABLES


def streaming_query_id(checkpoint: str | Path) -> str:
    """The id of the streaming query whose checkpoint folder this is (stable across restarts;
    Spark writes it to ``<checkpoint>/metadata`` before the first batch)."""
    return json.loads((Path(checkpoint) / "metadata").read_text())["id"]


def delta_rs_batch(
    root: str, checkpoint: str | Path, to_tables: Callable[[Any], dict[str, pa.Table]]
) -> Callable[[Any, int], None]:
    """A ``foreachBatch`` body that appends each micro-batch to the delta-rs tables under
    ``root`` exactly once.

    ``to_tables(df)`` turns the batch's DataFrame into Arrow tables keyed by table name. The
    driver appends the rows each table does not hold yet (:func:`append_unseen`: by the source
    records' positions, which the driver's materialization keeps too) in one Delta commit per
    table, also tagged with (query id, batch id) as before positions existed, so a batch
    replayed after a crash, or records the catch-up already wrote, are not written twice. Internal
    topics are small, so the batch is collected on the driver: no Python sink, whose write and
    commit would each run in a Python worker process of their own.
    """

    def write(df: Any, batch_id: int) -> None:
        tables = {n: t for n, t in to_tables(df).items() if t is not None and t.num_rows}
        if not tables:
            return
        query_id = streaming_query_id(checkpoint)
        prefix = f"part-{query_id}-b{batch_id}"
        append_unseen(root, tables, prefix, tag=(f"mirror:{query_id}", batch_id))

    return write


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

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        if partition is None:  # Spark reads one None partition when partitions() is empty
            return
        # what partitions() plans; not isinstance, as in RecordsReader.read
        planned = cast(DeltaFragment, partition).fragment
        fragments = [planned]
        if planned is None:
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
            self.options["path"], _version(self.options), self.options.get("timestampAsOf")
        )

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self._table().to_pyarrow_dataset().schema)

    def reader(self, schema: Any) -> DataSourceReader:
        dt = self._table()
        full = dt.to_pyarrow_dataset().schema
        wanted = pa.schema([full.field(name) for name in schema.fieldNames()])
        pinned = self.options.get("versionAsOf") or self.options.get("timestampAsOf")
        path = driver_path(self.options["path"])  # executors read it, elsewhere
        return DeltaRsReader(path, dt.version() if pinned else None, wanted)


def _version(options: Any) -> int | None:
    """A source's ``versionAsOf`` option (a string, as SQL's OPTIONS give it) as a version."""
    version = options.get("versionAsOf")
    return None if version is None else int(version)


def micros(schema: pa.Schema) -> pa.Schema:
    """``schema`` with its timestamps in microseconds: the only unit Spark takes from Arrow (our
    tables keep milliseconds)."""
    return pa.schema([
        pa.field(f.name, pa.timestamp("us", f.type.tz)) if pa.types.is_timestamp(f.type) else f
        for f in schema
    ])  # fmt: skip


class FailoverReader(DataSourceReader):
    """One partition, computed when it runs (so each query sees the latest commits)."""

    def __init__(self, root: str, view: str, version: int | None, timestamp: str | None) -> None:
        self.root, self.view, self.version, self.timestamp = root, view, version, timestamp

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        from mirror_lib.tables import failover_reads  # lazy: reads only on the executors

        answer = getattr(failover_reads, self.view)(self.root, self.version, self.timestamp)
        yield from answer.cast(micros(answer.schema)).to_batches()


class FailoverDataSource(DataSource):
    """``format("mirror_failover")``: the ``latest_checkpoints`` or ``offset_translation`` of
    the delta-rs tables under ``path`` (option ``view``), read in Arrow
    (:mod:`mirror_lib.tables.failover_reads`); options ``versionAsOf`` or ``timestampAsOf``."""

    @classmethod
    def name(cls) -> str:
        return "mirror_failover"

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(FAILOVER_VIEWS[self.options["view"]])

    def reader(self, schema: Any) -> DataSourceReader:
        return FailoverReader(
            driver_path(self.options["path"]),
            self.options["view"],
            _version(self.options),
            self.options.get("timestampAsOf"),
        )


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
    """Register every table as temp view ``<prefix><table>`` (``USING deltars``), and the
    failover reads ``<prefix>latest_checkpoints``/``offset_translation`` (``USING
    mirror_failover``); returns the names.

    Registers the ``deltars`` source and creates missing tables (empty) first. Unpinned views
    read the latest version at each query. ``as_of_version`` applies to every table (one
    without that version raises), so ``as_of_timestamp`` is the useful cross-table pin.
    """
    spark.dataSource.register(DeltaRsDataSource)  # idempotent
    spark.dataSource.register(FailoverDataSource)
    ensure_tables(root)
    pinned = []
    if as_of_version is not None:
        pinned.append(f"versionAsOf {sql_string(str(int(as_of_version)))}")
    elif as_of_timestamp:
        pinned.append(f"timestampAsOf {sql_string(as_of_timestamp)}")
    names = []
    sources = [(n, "deltars", [f"path {sql_string(table_path(root, n))}"]) for n in TABLES]
    sources += [
        (view, "mirror_failover", [f"path {sql_string(root)}", f"view {sql_string(view)}"])
        for view in FAILOVER_VIEWS
    ]
    for name, source, options in sources:
        view = f"{prefix}{name}"
        spark.sql(
            f"CREATE OR REPLACE TEMPORARY VIEW `{view.replace('`', '``')}` "
            f"USING {source} OPTIONS ({', '.join(options + pinned)})"
        )
        names.append(view)
    return names


def spark_positions(
    spark: Any, config: MirrorConfig, name: str, origins: Collection[Origin]
) -> dict[Origin, int]:
    """Per source partition of ``origins``: the offset after the last record whose rows Delta's
    Spark writer's table ``name`` holds (the positions delta-rs keeps as app transactions)."""
    if not origins or not spark_table_exists(spark, config, name):
        return {}
    clusters = ", ".join(sorted({sql_string(c) for c, _t, _p in origins}))
    topics = ", ".join(sorted({sql_string(t) for _c, t, _p in origins}))
    found = spark.sql(
        "SELECT cluster, kafka_topic, kafka_partition, max(kafka_offset) + 1 AS position "
        f"FROM {spark_table_name(config, name)} "
        f"WHERE cluster IN ({clusters}) AND kafka_topic IN ({topics}) "
        "GROUP BY cluster, kafka_topic, kafka_partition"
    ).collect()
    held = {(r[0], r[1], int(r[2])): int(r[3]) for r in found}
    return {o: held[o] for o in origins if o in held}


def _roll_up_batches(name: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        rolled = rolled_up(name, pa.Table.from_batches([batch]))
        yield from rolled.cast(micros(rolled.schema)).to_batches()


def _earlier_rolled_up(
    spark: Any, config: MirrorConfig, name: str, table: pa.Table, origins: list[Origin]
) -> list[pa.Table]:
    """For rollup ``name``: the rollup, on the executors, of the rows its source table holds of
    ``origins`` before ``table``'s first row of each (the history from before the rollup
    existed; as :func:`mirror_lib.tables.positions.append_unseen` does over delta-rs)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    source = ROLLUPS[name]
    if not origins or not spark_table_exists(spark, config, source):
        return []
    starts = row_starts(table)
    wanted = [
        f"(cluster = {sql_string(cluster)} AND kafka_topic = {sql_string(topic)}"
        f" AND kafka_partition = {int(partition)}"
        f" AND kafka_offset < {starts[(cluster, topic, partition)]})"
        for cluster, topic, partition in origins
    ]
    rows = spark.sql(
        f"SELECT * FROM {spark_table_name(config, source)} WHERE {' OR '.join(wanted)}"
    )
    rolled = rows.mapInArrow(
        partial(_roll_up_batches, name), from_arrow_schema(SCHEMAS[name])
    ).toArrow()
    return [rolled.cast(SCHEMAS[name])] if rolled.num_rows else []


def append_spark(
    spark: Any,
    config: MirrorConfig,
    name: str,
    table: pa.Table,
    txn: tuple[str, int] | None = None,
) -> int:
    """Append with Delta's Spark writer the rows of ``table`` that table ``name`` does not hold
    yet (:func:`spark_positions`); returns how many were written.

    ``txn`` (app id, version) becomes ``txnAppId``/``txnVersion``: Delta skips the write when
    the table's transaction of that app id is already at that version (a replayed batch).
    For a rollup table (:func:`~mirror_lib.tables.rollups.with_rollups`) ``table`` holds the
    rows it rolls up: those it does not hold yet are rolled up and appended.
    """
    ends = row_ends(table)
    have = spark_positions(spark, config, name, ends)
    fresh = rolled_up(name, unseen(table, have))
    if name in ROLLUPS:
        earlier = _earlier_rolled_up(spark, config, name, table, [o for o in ends if o not in have])
        fresh = pa.concat_tables([fresh, *earlier])
    if not fresh.num_rows:
        return 0
    writer = spark.createDataFrame(fresh).write.format("delta").mode("append")
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    save_table(writer, spark, config, name)
    return fresh.num_rows
