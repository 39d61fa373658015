"""Materialization (D7): internal topics of a cluster -> Delta tables, one query per cluster.

The query reads the cluster's offset-syncs, checkpoints, heartbeats and metrics topics with the
records-mode source, decodes them (:mod:`mirror_lib.decode`) and appends to the tables of
:mod:`mirror_lib.tables`. Writer: delta-rs, one Delta commit per micro-batch and table tagged
with (query id, batch id) so replays never write twice; or, where the session has Delta (e.g.
Databricks), Delta's Spark writer with ``txnAppId``/``txnVersion``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamWriter

from mirror_lib.config import MirrorConfig
from mirror_lib.delta_store import DeltaBatchWriter
from mirror_lib.errors import ConfigError
from mirror_lib.spark import stop_query
from mirror_lib.tables import TABLES

#: Topics a materialization query reads; decode.classify drops anything else that matches.
INTERNAL_PATTERN = r".*(mm2-offset-syncs|checkpoints|heartbeats|mm2-metrics).*"


def _policy_and_location(config: MirrorConfig, cluster: str) -> tuple[Any, str]:
    flows = [f for f in config.enabled_flows() if f.target == cluster] or list(config.flows)
    flow = flows[0]
    return flow.policy(), flow.settings.offset_syncs_location


class MaterializeDataSource(DataSource):
    """``writeStream.format("mirror_delta")``: decode internal records into the Delta tables."""

    @classmethod
    def name(cls) -> str:
        return "mirror_delta"

    def schema(self) -> str:
        from mirror_lib.records_source import SCHEMA

        return SCHEMA

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return MaterializeWriter(dict(self.options))


class MaterializeWriter(DeltaBatchWriter):
    """Decodes one task's records into per-table Arrow tables."""

    def to_tables(self, rows: list) -> dict[str, Any]:
        from mirror_lib.config import parse_config

        config = parse_config(json.loads(self.options["properties"]))
        return decode_rows(rows, config, self.options["cluster"])


def decode_rows(rows: list, config: MirrorConfig, cluster: str) -> dict[str, Any]:
    """Records-source rows of ``cluster`` -> one Arrow table per Delta table."""
    from mirror_lib.decode import RawRecord, decode_records

    policy, location = _policy_and_location(config, cluster)
    records = [
        RawRecord(
            r.topic, r.partition, r.offset, r.key, r.value, int(r.timestamp.timestamp() * 1000)
        )
        for r in rows
    ]
    tables, _bad = decode_records(records, cluster=cluster, policy=policy, syncs_location=location)
    return tables


def tables_enabled(config: MirrorConfig) -> bool:
    """``mirror.tables.enabled`` (default true): whether `mirror run` materializes tables."""
    raw = config.properties.get("mirror.tables.enabled", "true").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError("mirror.tables.enabled", raw, "true or false")
    return raw == "true"


def materialized_clusters(config: MirrorConfig) -> list[str]:
    """Clusters whose internal topics are materialized: targets of enabled flows."""
    return sorted({f.target for f in config.enabled_flows()})


def spark_has_delta(spark: Any) -> bool:
    """True where Delta's Spark writer is available (Databricks, or delta-spark configured)."""
    conf = spark.conf
    return bool(conf.get("spark.databricks.clusterUsageTags.clusterId", None)) or (
        "DeltaSparkSessionExtension" in (conf.get("spark.sql.extensions", None) or "")
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
    return (
        str(Path(config.state_dir).resolve())
        if "://" not in config.state_dir
        else (config.state_dir)
    )


def start_materialization(
    spark: Any,
    config: MirrorConfig,
    cluster: str,
    *,
    interval_s: float = 30.0,
    available_now: bool = False,
) -> Any:
    """Start the materialization query of ``cluster`` (see :func:`materialize_caught_up`).

    ``available_now``: one batch, then the query ends (the only trigger serverless allows).
    """
    from mirror_lib.spark import register_sources

    register_sources(spark)
    options = {
        "properties": json.dumps(dict(config.properties), sort_keys=True),
        "cluster": cluster,
    }
    reader = (
        spark.readStream.format("mirror_records")
        .options(**options)
        .option("subscribePattern", INTERNAL_PATTERN)
        .load()
    )
    checkpoint = Path(config.state_dir) / "clusters" / cluster / "materialize"
    writer = reader.writeStream.queryName(f"mirror-materialize-{cluster}")
    if tables_writer(spark, config) == "spark":
        writer = writer.foreachBatch(_spark_delta_batch(config, cluster))
    else:
        from mirror_lib.delta_store import ensure_tables

        root = tables_root(config)
        ensure_tables(root)
        writer = writer.format("mirror_delta").options(**options).option("root", root)
    writer = writer.option("checkpointLocation", str(checkpoint.resolve()))
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=f"{interval_s} seconds").start()


def materialize_caught_up(
    spark: Any, config: MirrorConfig, cluster: str, timeout_s: float | None = 300
) -> None:
    """Materialize everything the cluster's internal topics hold now, then stop.

    Not availableNow: after a stopped continuous run, Spark 4.1's availableNow for Python
    sources only replays the interrupted batch. This snapshots the end offsets instead and
    runs batches until the query has passed them.
    """
    import re
    import time

    from confluent_kafka.admin import AdminClient

    from mirror_lib.clients import client_config
    from mirror_lib.errors import MirrorRuntimeError
    from mirror_lib.kafka_offsets import list_topic_partitions, partition_bounds
    from mirror_lib.runner import end_offsets, raise_query_error

    admin = AdminClient(client_config(config.cluster(cluster), "admin"))
    pattern = re.compile(INTERNAL_PATTERN)
    tps = [
        (t, p)
        for t, n in list_topic_partitions(admin).items()
        if pattern.fullmatch(t)
        for p in range(n)
    ]
    target = {tp: hi for tp, (_lo, hi) in partition_bounds(admin, tps).items() if hi > 0}
    query = start_materialization(spark, config, cluster, available_now=True)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while deadline is None or time.monotonic() < deadline:
            raise_query_error(query, f"materialization of {cluster}")
            ends = end_offsets(query.lastProgress)
            if query.lastProgress and all(ends.get(tp, 0) >= hi for tp, hi in target.items()):
                return
            if not query.isActive:  # availableNow ran one (capped or replayed) batch: again
                query = start_materialization(spark, config, cluster, available_now=True)
            time.sleep(0.5)
        raise MirrorRuntimeError(
            f"materialization of {cluster} did not catch up within {timeout_s}s; "
            "the tables keep every committed batch"
        )
    finally:
        stop_query(spark, query)


def _spark_delta_batch(config: MirrorConfig, cluster: str) -> Any:
    """foreachBatch body for Delta's Spark writer (idempotent through txnAppId/txnVersion)."""

    def write(df: Any, batch_id: int) -> None:
        tables = decode_rows(df.collect(), config, cluster)  # internal topics: small batches
        for name, table in tables.items():
            if table.num_rows:
                (
                    df.sparkSession.createDataFrame(table.to_pandas())
                    .write.format("delta")
                    .option("txnAppId", f"mirror-materialize-{cluster}-{name}")
                    .option("txnVersion", batch_id)
                    .mode("append")
                    .saveAsTable(spark_table_name(config, name))
                )

    return write


def maintain_tables(
    config: MirrorConfig,
    *,
    spark: Any = None,
    retention_days: float = 30,
    vacuum_hours: float = 168,
) -> dict[str, Any]:
    """Delete rows older than the retention, compact and vacuum every table.

    delta-rs tables are maintained directly. With Delta's Spark writer (``spark`` given, e.g. the
    bundle's maintenance task) the same is SQL - DELETE, OPTIMIZE, VACUUM - and the views are
    (re)created in ``mirror.tables.schema`` so the dashboard's queries resolve.
    """
    if spark is not None and tables_writer(spark, config) == "spark":
        return _maintain_with_sql(spark, config, retention_days, vacuum_hours)
    from mirror_lib.delta_store import maintain

    return maintain(tables_root(config), retention_days=retention_days, vacuum_hours=vacuum_hours)


def _maintain_with_sql(
    spark: Any, config: MirrorConfig, retention_days: float, vacuum_hours: float
) -> dict[str, Any]:
    from mirror_lib.state_tables import ensure_spark_tables
    from mirror_lib.views import create_views

    ensure_spark_tables(spark, config)  # tables no command has written yet: empty, for the views
    seconds = int(retention_days * 86400)
    done: dict[str, Any] = {}
    for name in TABLES:
        table = spark_table_name(config, name)
        if not spark.catalog.tableExists(table):
            continue
        spark.sql(
            f"DELETE FROM {table} WHERE record_ts < current_timestamp() - "
            f"make_dt_interval(0, 0, 0, {seconds})"
        )
        spark.sql(f"OPTIMIZE {table}")
        spark.sql(f"VACUUM {table} RETAIN {int(vacuum_hours)} HOURS")
        done[name] = {"retention_days": retention_days, "vacuum_hours": int(vacuum_hours)}
    if len(done) == len(TABLES):
        done["views"] = create_views(spark, config)
    return done
