"""Where the tables live and which writer holds them: delta-rs files or Delta's Spark writer.

Read by materialization, the command-written tables, health, views and the dashboards; a Spark
session, where one matters, is handed in (this module never imports pyspark).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mirror_lib.config.databricks import on_databricks
from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError


def tables_enabled(config: MirrorConfig) -> bool:
    """``mirror.tables.enabled`` (default true): whether `mirror run` materializes tables."""
    raw = config.properties.get("mirror.tables.enabled", "true").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError("mirror.tables.enabled", raw, "true or false")
    return raw == "true"


def materialized_clusters(config: MirrorConfig) -> list[str]:
    """Clusters whose internal topics are materialized: targets of enabled flows."""
    return sorted({f.target for f in config.enabled_flows()})


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
    """``delta-rs`` or ``spark``, per ``mirror.tables.writer`` (auto by default)."""
    choice = config.properties.get("mirror.tables.writer", "auto").strip().lower()
    if choice not in ("auto", "delta-rs", "spark"):
        raise ConfigError("mirror.tables.writer", choice, "auto, delta-rs or spark")
    if choice == "auto":
        return "spark" if spark_has_delta(spark) else "delta-rs"
    return choice


def spark_table_name(config: MirrorConfig, name: str) -> str:
    """Name of a table for Delta's Spark writer: in ``mirror.tables.schema`` when set."""
    schema = config.properties.get("mirror.tables.schema", "").strip()
    return f"{schema}.{name}" if schema else name


def tables_root(config: MirrorConfig) -> str:
    """Folder of the delta-rs tables (``<mirror.state.dir>/tables/<name>``)."""
    return str(Path(config.state_dir).resolve())  # never a URI (config.databricks)
