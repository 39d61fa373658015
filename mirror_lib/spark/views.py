"""SQL views over the Delta tables, created by one call for either writer (docs/tables.md).

Locally (delta-rs) the tables are registered as Spark temp views through the ``deltars`` source
and the views are temp views, ``latest_checkpoints`` and ``offset_translation`` read in Arrow
(:mod:`mirror_lib.tables.failover_reads`); with Delta's Spark writer they are views in
``mirror.tables.schema`` (temp views over ``delta.`<folder>``` in a local session without a
schema).
The same view names serve ``dashboards/sql/*.sql`` either way.
"""

from __future__ import annotations

from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.spark.delta_source import register_tables
from mirror_lib.tables.failover_reads import FAILOVER_VIEWS
from mirror_lib.tables.location import (
    catalog_tables,
    ensure_spark_tables,
    spark_table_name,
    spark_writes_tables,
    tables_root,
)
from mirror_lib.tables.schemas import TABLES

#: View name -> SELECT over the tables (``{t_<table>}`` placeholders; ``{bucket}``: the time
#: bucket of the ``*_per_minute`` views, a minute unless :func:`create_views` is given another;
#: ``{t_metrics}``: what they read, the per-minute rollup for buckets of whole minutes, else
#: ``replication_metrics`` itself). Latency p50 is the record-weighted mean of per-chunk p50s
#: and p99 the maximum of per-chunk p99s (conservative), as in :mod:`mirror_lib.tables.health`.
#: The rollup (:mod:`mirror_lib.tables.rollups`) has the columns these views read, and its
#: ``ts`` (its latest row's) falls in the same bucket as every row it rolls up.
VIEWS: dict[str, str] = {
    "latest_checkpoints": """
        SELECT source, target, group_id, topic, partition, upstream_offset, downstream_offset,
               metadata, record_ts AS checkpoint_ts
        FROM (SELECT *, row_number() OVER (PARTITION BY cluster, source, target, group_id, topic,
                     partition ORDER BY kafka_offset DESC) AS rn FROM {t_checkpoints})
        WHERE rn = 1""",
    # The first segment ending at or after each checkpoint's offset (SegmentIndex.translate):
    # checkpoints and segments in one order per partition, so that a group far behind is one row
    # of a sort, not a join with every segment after its offset; the partition's first and last
    # segment come from the same pass, so the segments are read once.
    "offset_translation": """
        WITH both AS (
          SELECT source, target, topic, partition, upstream_offset AS at, 0 AS is_seg, group_id,
                 upstream_offset, downstream_offset,
                 CAST(NULL AS STRUCT<us: BIGINT, ds: BIGINT>) AS seg,
                 CAST(NULL AS BIGINT) AS upstream_start, CAST(NULL AS BIGINT) AS downstream_end
          FROM latest_checkpoints
          UNION ALL
          SELECT source, target, remote_topic, partition, upstream_end, 1, NULL, NULL, NULL,
                 named_struct('us', upstream_start, 'ds', downstream_start), upstream_start,
                 downstream_end
          FROM {t_offset_syncs} WHERE kind = 'segment'),
        hit AS (
          SELECT *,
                 last(seg, true) OVER (PARTITION BY source, target, topic, partition
                                       ORDER BY at DESC, is_seg DESC
                                       ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS next,
                 min(upstream_start) OVER p AS first_start, max(downstream_end) OVER p AS last_end
          FROM both WINDOW p AS (PARTITION BY source, target, topic, partition))
        SELECT source, target, group_id, topic, partition, upstream_offset,
               -- below the flow's first segment (a flow that took over from MirrorMaker 2):
               -- not ours to translate, the checkpoint stands
               CASE WHEN upstream_offset < first_start THEN downstream_offset
                    ELSE coalesce(CASE WHEN upstream_offset >= next.us
                                       THEN next.ds + (upstream_offset - next.us)
                                       ELSE next.ds END,
                                  last_end + 1, downstream_offset)
               END AS offset,
               downstream_offset AS checkpoint_offset
        FROM hit WHERE is_seg = 0""",
    "latency_per_minute": """
        SELECT flow, remote_topic AS topic, {bucket} AS minute,
               sum(records) AS records, sum(bytes) AS bytes,
               sum(latency_ms_p50 * records) / sum(records) AS latency_ms_p50,
               max(latency_ms_p99) AS latency_ms_p99, max(latency_ms_max) AS latency_ms_max
        FROM {t_metrics} GROUP BY ALL""",
    # Lag of a topic in a time bucket: the sum over its partitions of each one's latest lag at the
    # end of the bucket, carried forward through buckets where a partition copied nothing (the
    # lag definition of mirror_lib.tables.health). ``partitions``: partitions with a known lag.
    # Summed as a running total of each partition's changes, so it costs the rows read, not
    # buckets times partitions.
    "lag_per_minute": """
        WITH p AS (SELECT flow, remote_topic AS topic, partition, {bucket} AS minute,
                          max_by(lag, struct(ts, upstream_last)) AS lag
                   FROM {t_metrics} GROUP BY ALL),
        prev AS (SELECT *, last(lag, true) OVER (PARTITION BY flow, topic, partition
                           ORDER BY minute ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                           AS before FROM p),
        step AS (SELECT flow, topic, minute,
                        sum(CASE WHEN lag IS NOT NULL THEN lag - coalesce(before, 0) END)
                          AS change,
                        count(CASE WHEN lag IS NOT NULL AND before IS NULL THEN 1 END) AS known
                 FROM prev GROUP BY ALL),
        total AS (SELECT flow, topic, minute,
                         sum(change) OVER w AS lag, sum(known) OVER w AS partitions
                  FROM step WINDOW w AS (PARTITION BY flow, topic ORDER BY minute
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))
        SELECT flow, topic, minute, CASE WHEN partitions > 0 THEN lag END AS lag, partitions
        FROM total""",
    "replication_lag": """
        SELECT flow, topic, remote_topic, partition, lag, upstream_last, ts AS measured_ts
        FROM (SELECT *, row_number() OVER (PARTITION BY flow, topic, partition
                                            ORDER BY ts DESC, upstream_last DESC) AS rn
              FROM {t_metrics_per_minute})
        WHERE rn = 1""",
    "heartbeat_freshness": """
        SELECT cluster, source, target, hops, max(heartbeat_ts) AS last_heartbeat,
               (unix_millis(current_timestamp()) - unix_millis(max(heartbeat_ts))) / 1000.0
                 AS age_seconds,
               sum(heartbeats) AS heartbeats
        FROM {t_heartbeats_per_minute} GROUP BY ALL""",
    # Stale records skipped on purpose (mirror.skip.older.than.ms), from the `skip` events.
    "skipped_per_minute": """
        SELECT flow, topic, {bucket} AS minute, sum(records) AS records, sum(bytes) AS bytes,
               count(*) AS ranges
        FROM (SELECT flow, ts, get_json_object(details, '$.remote_topic') AS topic,
                     CAST(get_json_object(details, '$.records') AS BIGINT) AS records,
                     CAST(get_json_object(details, '$.bytes') AS BIGINT) AS bytes
              FROM {t_flow_events} WHERE type = 'skip')
        GROUP BY ALL""",
    "flow_events_recent": """
        SELECT ts, type, flow, topic, partition, reason, action, details, cluster
        FROM {t_flow_events}""",
    "failover_readiness": """
        WITH cp AS (SELECT source, target, group_id, count(*) AS partitions,
                           max(checkpoint_ts) AS last_checkpoint
                    FROM latest_checkpoints GROUP BY ALL),
        lag AS (SELECT split(flow, '->')[0] AS source, split(flow, '->')[1] AS target,
                       sum(lag) AS lag FROM replication_lag GROUP BY ALL),
        hb AS (SELECT source, target, min(age_seconds) AS heartbeat_age_seconds
               FROM heartbeat_freshness WHERE hops = 0 GROUP BY ALL)
        SELECT cp.source, cp.target, cp.group_id, cp.partitions,
               (unix_millis(current_timestamp()) - unix_millis(cp.last_checkpoint)) / 1000.0
                 AS checkpoint_age_seconds,
               lag.lag AS replication_lag, hb.heartbeat_age_seconds
        FROM cp LEFT JOIN lag ON lag.source = cp.source AND lag.target = cp.target
                LEFT JOIN hb ON hb.source = cp.source AND hb.target = cp.target""",
    # Latest `mirror verify` answer per partition (verified_to: next upstream offset to verify).
    "verification_status": """
        SELECT flow, topic, remote_topic, partition, status, behind, total_records,
               upstream_to AS verified_to, diff_upstream_offset, diff_downstream_offset, detail,
               verified_ts,
               (unix_millis(current_timestamp()) - unix_millis(verified_ts)) / 1000.0
                 AS age_seconds
        FROM (SELECT *, row_number() OVER (PARTITION BY flow, topic, partition
                                            ORDER BY verified_ts DESC, run_id DESC) AS rn
              FROM {t_verifications})
        WHERE rn = 1""",
    # Latest `mirror cutover` status per partition: migrating -> migrated -> retired.
    "migration_status": """
        SELECT flow, topic, remote_topic, partition, status, source_end_offset, target_offset,
               groups, ts AS status_ts
        FROM (SELECT *, row_number() OVER (PARTITION BY flow, topic, partition
                                            ORDER BY ts DESC) AS rn
              FROM {t_migrations})
        WHERE rn = 1""",
}


def _table_refs(spark: Any, config: MirrorConfig, prefix: str, as_of: dict[str, Any]) -> dict:
    if spark_writes_tables(spark, config) and not as_of:
        ensure_spark_tables(spark, config)  # e.g. `verifications` before the first verify
        return {f"t_{t}": spark_table_name(config, t) for t in TABLES}
    register_tables(spark, tables_root(config), prefix=prefix + "t_", **as_of)
    return {f"t_{t}": f"{prefix}t_{t}" for t in (*TABLES, *FAILOVER_VIEWS)}


def _temporary(refs: dict[str, str], prefix: str, config: MirrorConfig) -> bool:
    """Temp views unless the tables are in a catalog (a local session's are not)."""
    return refs["t_checkpoints"].startswith(prefix + "t_") or not catalog_tables(config)


#: Time buckets of the ``*_per_minute`` views (seconds) that :func:`bucket_for` chooses from.
BUCKETS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 21600, 86400)
MAX_POINTS = 60  # points per series that a chart of the whole run shows at most


def bucket_for(span_seconds: float | None) -> int:
    """The smallest bucket giving at most :data:`MAX_POINTS` points over ``span_seconds``.

    A 45 s run gets 1 s buckets (45 points, not one or two minutes), a day 30 min buckets.
    """
    if span_seconds is None:
        return 60
    return next((b for b in BUCKETS if span_seconds / b <= MAX_POINTS), BUCKETS[-1])


def _data_bucket(spark: Any, refs: dict[str, str]) -> int:
    span = spark.sql(
        "SELECT (unix_millis(max(ts)) - unix_millis(min(first_ts))) / 1000.0 AS s "
        f"FROM {refs['t_metrics_per_minute']}"
    ).first()["s"]
    return bucket_for(None if span is None else float(span))


def data_bucket(spark: Any, config: MirrorConfig) -> int:
    """:func:`bucket_for` the time span of the config's replication metrics."""
    return _data_bucket(spark, _table_refs(spark, config, "", {}))


def _bucket_sql(seconds: int) -> str:
    if seconds == 60:
        return "date_trunc('minute', ts)"
    return f"timestamp_seconds(floor(unix_millis(ts) / {seconds * 1000}) * {seconds})"


def create_views(
    spark: Any,
    config: MirrorConfig,
    *,
    as_of_version: int | None = None,
    as_of_timestamp: str | None = None,
    prefix: str = "",
    bucket_seconds: int | None = 60,
) -> list[str]:
    """Create (or replace) every view; ``as_of_*`` pins the tables to a past version/time.

    ``bucket_seconds``: the time bucket of the ``*_per_minute`` views' ``minute`` column (a
    minute by default, as the Lakeview dashboard shows); None chooses one for the length of the
    data (:func:`bucket_for`), as the static dashboard does. Returns the view names (with
    ``prefix``). Time-travelled views are always temp views.
    """
    as_of = {
        k: v
        for k, v in (("as_of_version", as_of_version), ("as_of_timestamp", as_of_timestamp))
        if v is not None
    }
    refs = _table_refs(spark, config, prefix, as_of)
    if bucket_seconds is None:
        bucket_seconds = _data_bucket(spark, refs)
    bucket = _bucket_sql(bucket_seconds)
    per_minute = bucket_seconds % 60 == 0
    metrics = refs["t_metrics_per_minute" if per_minute else "t_replication_metrics"]
    temp = _temporary(refs, prefix, config)
    schema = config.properties.get("mirror.tables.schema", "").strip()
    qualify = "" if temp or not schema else schema + "."
    names = []
    # one partition: a sort above it needs no sampling pass, which would compute it twice
    local = {
        v: f"SELECT /*+ COALESCE(1) */ * FROM {{t_{v}}}" for v in FAILOVER_VIEWS if f"t_{v}" in refs
    }
    for name, body in {**VIEWS, **local}.items():
        sql = body.format(**refs, bucket=bucket, t_metrics=metrics)
        for other in VIEWS:  # views built on views use the same prefix and schema
            sql = sql.replace(f"FROM {other}", f"FROM {qualify}{prefix}{other}")
        kind = "TEMPORARY VIEW" if temp else "VIEW"
        spark.sql(f"CREATE OR REPLACE {kind} {qualify}{prefix}{name} AS {sql}")
        names.append(f"{qualify}{prefix}{name}")
    return names
