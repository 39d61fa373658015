"""Rows written by commands rather than by streaming queries (``verifications``, ``migrations``).

Same tables and writers as materialization (docs/design.md#d7-delta-tables): delta-rs under
``mirror.state.dir`` locally, or Delta's Spark writer where the session has Delta and
``mirror.tables.writer`` lets it (:mod:`mirror_lib.tables.location` says where its tables are).
Each call is one append (one Delta commit); readers get plain dicts.
"""

from __future__ import annotations

from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError
from mirror_lib.tables.delta_rs import ensure_tables, read_table, table_path, writer_properties
from mirror_lib.tables.location import (
    save_table,
    spark_table_exists,
    spark_table_name,
    spark_writes_tables,
    tables_root,
)
from mirror_lib.tables.schemas import SCHEMAS


def _schema(name: str) -> Any:
    if name not in SCHEMAS:
        raise ConfigError("table", name, "one of " + ", ".join(SCHEMAS))
    return SCHEMAS[name]


def append_rows(
    config: MirrorConfig, name: str, rows: list[dict[str, Any]], spark: Any = None
) -> int:
    """Append ``rows`` (dicts of the table's columns; missing ones null); returns the count."""
    import pyarrow as pa  # lazy: optional extra "delta/spark"

    schema = _schema(name)
    if not rows:
        return 0
    table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema)
    if spark_writes_tables(spark, config):
        writer = spark.createDataFrame(table).write.format("delta").mode("append")
        save_table(writer, spark, config, name)
        return table.num_rows
    from deltalake import write_deltalake  # lazy: optional extra "delta"

    root = tables_root(config)
    ensure_tables(root)
    path = table_path(root, name)
    write_deltalake(path, table, mode="append", writer_properties=writer_properties(name))
    return table.num_rows


def read_rows(config: MirrorConfig, name: str, spark: Any = None) -> list[dict[str, Any]]:
    """Every row of the table (empty when it does not exist yet)."""
    _schema(name)
    if spark_writes_tables(spark, config):
        if not spark_table_exists(spark, config, name):
            return []
        return [r.asDict() for r in spark.table(spark_table_name(config, name)).collect()]
    return read_table(tables_root(config), name).to_pylist()
