"""Where the tables live and which writer holds them: delta-rs files or Delta's Spark writer.

Read by materialization, the command-written tables, health, views and the dashboards; a Spark
session, where one matters, is handed in (this module never imports pyspark). With Delta's Spark
writer it also saves a table (:func:`save_table`) and creates the missing ones empty
(:func:`ensure_spark_tables`).

Delta's Spark writer keeps the tables in a catalog where there is one to keep them in
(``mirror.tables.schema`` set, or Databricks). Elsewhere (a local session with delta-spark) it
writes the same folders as delta-rs, ``<mirror.state.dir>/tables/<name>``, so that commands
without Spark (``mirror status``) read them through delta-rs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mirror_lib.config.databricks import on_databricks
from mirror_lib.config.global_settings import global_setting
from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.tables.schemas import SCHEMAS


def _conf(spark: Any, key: str) -> str:
    """A Spark config value, "" when unset or not readable."""
    try:
        return spark.conf.get(key, None) or ""
    except Exception:  # serverless: AnalysisException [CONFIG_NOT_AVAILABLE] despite the default
        return ""


def spark_has_delta(spark: Any) -> bool:
    """True where Delta's Spark writer is available (Databricks, or delta-spark configured)."""
    if on_databricks():  # clusters and serverless alike
        return True
    return bool(_conf(spark, "spark.databricks.clusterUsageTags.clusterId")) or (
        "DeltaSparkSessionExtension" in _conf(spark, "spark.sql.extensions")
    )


def tables_writer(spark: Any, config: MirrorConfig) -> str:
    """``delta-rs`` or ``spark``, per ``mirror.tables.writer`` (auto: Delta's Spark writer where
    the session has Delta)."""
    return chosen_writer(spark, global_setting(config.properties, "mirror.tables.writer"))


def chosen_writer(spark: Any, choice: str) -> str:
    """``delta-rs`` or ``spark`` over ``spark`` for a ``mirror.tables.writer`` already read."""
    if choice == "auto":
        return "spark" if spark_has_delta(spark) else "delta-rs"
    return choice


def spark_writes_tables(spark: Any, config: MirrorConfig) -> bool:
    """Whether Delta's Spark writer holds the tables over ``spark`` (None: no session, so
    delta-rs): :func:`tables_writer`, for the commands that read or keep the tables."""
    return spark is not None and tables_writer(spark, config) == "spark"


def spark_writer_expected(config: MirrorConfig) -> bool:
    """Whether a command without a session needs one to read the tables: the writer is
    ``spark``, or ``auto`` on Databricks (where every session has Delta)."""
    choice = global_setting(config.properties, "mirror.tables.writer")
    return choice == "spark" or (choice == "auto" and on_databricks())


def catalog_tables(config: MirrorConfig) -> bool:
    """Whether Delta's Spark writer keeps the tables in a catalog (``mirror.tables.schema`` set,
    or on Databricks) rather than in the delta-rs folders under ``mirror.state.dir``."""
    return bool(config.properties.get("mirror.tables.schema", "").strip()) or on_databricks()


def spark_table_name(config: MirrorConfig, name: str) -> str:
    """A table in Spark SQL for Delta's Spark writer: ``<mirror.tables.schema>.<name>`` (or the
    bare name on Databricks without a schema), else ``delta.`<folder>``` of :func:`table_folder`."""
    if catalog_tables(config):
        schema = config.properties.get("mirror.tables.schema", "").strip()
        return f"{schema}.{name}" if schema else name
    return "delta.`" + table_folder(config, name).replace("`", "``") + "`"


def table_folder(config: MirrorConfig, name: str) -> str:
    """The folder of a table outside a catalog: ``<mirror.state.dir>/tables/<name>``."""
    return os.path.join(tables_root(config), "tables", name)


def spark_table_exists(spark: Any, config: MirrorConfig, name: str) -> bool:
    """Whether Delta's Spark writer holds table ``name`` yet."""
    if catalog_tables(config):
        return bool(spark.catalog.tableExists(spark_table_name(config, name)))
    return os.path.isdir(os.path.join(table_folder(config, name), "_delta_log"))


def save_table(writer: Any, spark: Any, config: MirrorConfig, name: str) -> None:
    """Finish a ``DataFrameWriter`` of table ``name`` (format and mode set): ``saveAsTable`` in
    a catalog, else ``save`` into its folder. Fails clearly where the session has no Delta."""
    if not spark_has_delta(spark):
        raise MirrorRuntimeError(
            "mirror.tables.writer = spark, but this Spark session has no Delta: start it with "
            "delta-spark (`pip install 'mirror_lib[delta-spark]'`; mirror_lib's local sessions "
            "then load it) or set mirror.tables.writer = delta-rs; nothing was written"
        )
    if catalog_tables(config):
        writer.saveAsTable(spark_table_name(config, name))
    else:
        writer.save(table_folder(config, name))


def ensure_spark_tables(spark: Any, config: MirrorConfig) -> list[str]:
    """With Delta's Spark writer: create every missing table empty (the views need all of them,
    and materialization takes their schemas from :data:`~mirror_lib.tables.schemas.SCHEMAS`,
    not from a first batch); returns the names of those created."""
    created = []
    for name, schema in SCHEMAS.items():
        if spark_table_exists(spark, config, name):
            continue
        empty = spark.createDataFrame(schema.empty_table())
        save_table(empty.write.format("delta").mode("ignore"), spark, config, name)
        created.append(spark_table_name(config, name))
    return created


def tables_root(config: MirrorConfig) -> str:
    """Folder of the delta-rs tables (``<mirror.state.dir>/tables/<name>``)."""
    return str(Path(config.state_dir).resolve())  # never a URI (config.databricks)
