"""Materialization (docs/design.md#d7-delta-tables) as a Spark query: internal topics of a cluster
-> Delta tables.

Where the session has Delta (Databricks, or a local session with delta-spark), ``run_flows``
runs one query per target cluster: it reads the cluster's offset-syncs, checkpoints, heartbeats
and metrics topics with the records-mode source and, in a ``foreachBatch`` on the driver,
decodes them (:mod:`mirror_lib.tables.decode`) and appends with Delta's Spark writer the rows
each table does not hold yet (``txnAppId`` / ``txnVersion``, and the records' positions).
Over delta-rs ``run_flows`` needs no query: a driver thread
(:class:`~mirror_lib.replication.companions.threads.TablesJob`) and, for ``--once``,
:func:`materialize_now` call :func:`~mirror_lib.tables.catch_up.materialize_once`.
:func:`start_materialization` still runs the query over delta-rs
(:func:`~mirror_lib.spark.delta_source.delta_rs_batch`), which is how the query is tested here.
"""

from __future__ import annotations

import json
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.kafka.admin import admin_client
from mirror_lib.kafka.clients import client_config
from mirror_lib.kafka.lookups import list_topic_partitions, settled_bounds
from mirror_lib.spark.delta_source import (
    append_spark,
    delta_rs_batch,
    streaming_query_id,
)
from mirror_lib.spark.progress import drive_until, end_offsets, raise_query_error, stop_query
from mirror_lib.spark.records_source import RecordsDataSource
from mirror_lib.spark.views import create_views
from mirror_lib.tables.catch_up import (
    INTERNAL_PATTERN,
    SETTLE_S,
    materialize_once,
    policy_and_location,
    spark_query_folder,
)
from mirror_lib.tables.decode import RawRecord, decode_records
from mirror_lib.tables.delta_rs import ensure_tables, maintain
from mirror_lib.tables.location import (
    ensure_spark_tables,
    spark_table_exists,
    spark_table_name,
    spark_writes_tables,
    tables_root,
)
from mirror_lib.tables.maintenance import MaintenancePolicy
from mirror_lib.tables.rollups import with_rollups
from mirror_lib.tables.schemas import TABLES


def decode_batch(df: Any, config: MirrorConfig, cluster: str) -> dict[str, Any]:
    """One micro-batch of records-source rows of ``cluster`` -> one Arrow table per Delta table
    (collected on the driver: internal topics are small)."""
    policy, location = policy_and_location(config, cluster)
    fields = ("topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts_ms")
    batch = df.selectExpr(*fields).toArrow()  # Arrow: unpickling Rows cost more than decoding
    records = [RawRecord(*r) for r in zip(*(c.to_pylist() for c in batch.columns), strict=True)]
    tables, _bad = decode_records(records, cluster=cluster, policy=policy, syncs_location=location)
    return tables


def start_materialization(
    spark: Any,
    config: MirrorConfig,
    cluster: str,
    *,
    writer: str,
    interval_s: float = 30.0,
    available_now: bool = False,
) -> Any:
    """Start the materialization query of ``cluster`` (see :func:`materialize_caught_up`) into
    the tables of ``writer`` (:func:`~mirror_lib.tables.location.tables_writer`).

    ``available_now``: one batch, then the query ends (the only trigger serverless allows).
    """
    spark.dataSource.register(RecordsDataSource)  # idempotent
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
    checkpoint = spark_query_folder(config, cluster)
    stream = reader.writeStream.queryName(f"mirror-materialize-{cluster}")
    if writer == "spark":
        ensure_spark_tables(spark, config)  # schemas from SCHEMAS, not from a first batch
        stream = stream.foreachBatch(_spark_delta_batch(config, cluster))
    else:
        root = tables_root(config)
        ensure_tables(root)
        stream = stream.foreachBatch(
            delta_rs_batch(root, checkpoint, lambda df: decode_batch(df, config, cluster))
        )
    stream = stream.option("checkpointLocation", str(checkpoint))
    if available_now:
        return stream.trigger(availableNow=True).start()
    return stream.trigger(processingTime=f"{interval_s} seconds").start()


def materialize_caught_up(
    spark: Any, config: MirrorConfig, cluster: str, timeout_s: float | None = 300, *, writer: str
) -> None:
    """Materialize everything the cluster's internal topics hold now into the tables of
    ``writer``, then stop.

    Not availableNow: after a stopped continuous run, Spark 4.1's availableNow for Python
    sources only replays the interrupted batch. This snapshots the end offsets instead and
    runs batches until the query has passed them.
    """
    import re

    admin = admin_client(client_config(config.cluster(cluster), "admin"))
    pattern = re.compile(INTERNAL_PATTERN)
    tps = [
        (t, p)
        for t, n in list_topic_partitions(admin).items()
        if pattern.fullmatch(t)
        for p in range(n)
    ]
    bounds = settled_bounds(admin, tps, SETTLE_S)
    target = {tp: hi for tp, (_lo, hi) in bounds.items() if hi > 0}
    queries = [start_materialization(spark, config, cluster, writer=writer, available_now=True)]

    def reached() -> bool:
        progress = queries[-1].lastProgress
        ends = end_offsets(progress)
        return bool(progress) and all(ends.get(tp, 0) >= hi for tp, hi in target.items())

    try:
        caught = drive_until(
            reached,
            check=lambda: raise_query_error(queries[-1], f"materialization of {cluster}"),
            ended=lambda: not queries[-1].isActive,
            again=lambda: queries.append(
                start_materialization(spark, config, cluster, writer=writer, available_now=True)
            ),
            timeout_s=timeout_s,
        )
    finally:
        stop_query(spark, queries[-1])
    if not caught:
        raise MirrorRuntimeError(
            f"materialization of {cluster} did not catch up within {timeout_s}s; "
            "the tables keep every committed batch"
        )


def materialize_now(
    spark: Any,
    config: MirrorConfig,
    cluster: str,
    timeout_s: float | None,
    writer: str,
) -> str:
    """Materialize what ``cluster``'s internal topics hold now (the end of ``--once``); returns
    a line for the run's report.

    Over delta-rs on the driver, without a Spark query (:func:`materialize_once`); with Delta's
    Spark writer through a catch-up query (:func:`materialize_caught_up`). ``writer``: the
    run's :func:`~mirror_lib.tables.location.tables_writer` (``spark`` may then be stopped for
    delta-rs).
    """
    if writer == "delta-rs":
        n = materialize_once(config, cluster, timeout_s)
        return f"materialized {n} records of the internal topics of {cluster} into Delta tables"
    materialize_caught_up(spark, config, cluster, timeout_s, writer=writer)
    return f"materialized the internal topics of {cluster} into Delta tables"


def _spark_delta_batch(config: MirrorConfig, cluster: str) -> Any:
    """foreachBatch body for Delta's Spark writer: per table, the rows it does not hold yet
    (:func:`append_spark`), tagged ``txnAppId`` = ``mirror:<query id>`` (stable across restarts
    from the checkpoint) and ``txnVersion`` = the batch id."""
    checkpoint = spark_query_folder(config, cluster)

    def write(df: Any, batch_id: int) -> None:
        tables = decode_batch(df, config, cluster)
        app_id = f"mirror:{streaming_query_id(checkpoint)}"
        for name, table in with_rollups(tables).items():
            if table is not None and table.num_rows:
                append_spark(df.sparkSession, config, name, table, txn=(app_id, batch_id))

    return write


def maintain_tables(
    config: MirrorConfig,
    *,
    spark: Any = None,
    retention_days: float | None = None,
    vacuum_hours: float | None = None,
) -> dict[str, Any]:
    """Delete rows older than the retention, compact, vacuum and checkpoint every table, and
    set the table properties that bound its log (docs/operations/state.md).

    ``retention_days`` and ``vacuum_hours`` default to ``mirror.tables.retention.days`` and
    ``mirror.tables.history.hours``. delta-rs tables are maintained directly. With Delta's
    Spark writer (``spark`` given, e.g. the bundle's maintenance task) the same is SQL - ALTER
    TABLE SET TBLPROPERTIES, DELETE, OPTIMIZE, VACUUM - and the views are (re)created in
    ``mirror.tables.schema`` so the dashboard's queries resolve.
    """
    policy = MaintenancePolicy.of(config)
    days = policy.retention_days if retention_days is None else retention_days
    hours = policy.vacuum_hours if vacuum_hours is None else vacuum_hours
    properties = policy.table_properties()
    if spark_writes_tables(spark, config):
        return _maintain_with_sql(spark, config, days, hours, properties)
    root = tables_root(config)
    return maintain(root, retention_days=days, vacuum_hours=hours, properties=properties)


def _maintain_with_sql(
    spark: Any,
    config: MirrorConfig,
    retention_days: float,
    vacuum_hours: float,
    properties: dict[str, str],
) -> dict[str, Any]:
    ensure_spark_tables(spark, config)  # tables no command has written yet: empty, for the views
    seconds = int(retention_days * 86400)
    settings = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(properties.items()))
    done: dict[str, Any] = {}
    for name in TABLES:
        table = spark_table_name(config, name)
        if not spark_table_exists(spark, config, name):
            continue
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({settings})")
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
