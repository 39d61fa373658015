"""The failover overview of notebook 03: SQL readiness and translation next to a dry run.

Spark SQL over the views of :mod:`mirror_lib.spark.views`; the failover itself is
:mod:`mirror_lib.replication.migration.failover` (no Spark).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.replication.migration.failover import TranslatedOffset, failover_group
from mirror_lib.spark.delta_source import sql_string
from mirror_lib.spark.views import create_views


@dataclass(frozen=True)
class FailoverOverview:
    """Everything an on-call engineer checks before failing ``group`` over to ``target``."""

    group: str
    readiness: list[dict[str, Any]]
    sql_offsets: list[dict[str, Any]]
    dry_run: list[TranslatedOffset]


def failover_overview(
    spark: Any, config: MirrorConfig, group: str, source: str, target: str
) -> FailoverOverview:
    """SQL translation and readiness (lag, checkpoint and heartbeat age) next to a dry run."""
    config.flow(f"{source}->{target}")
    create_views(spark, config)
    where = (
        f"WHERE group_id = {sql_string(group)} "
        f"AND source = {sql_string(source)} AND target = {sql_string(target)}"
    )
    readiness = [
        r.asDict() for r in spark.sql(f"SELECT * FROM failover_readiness {where}").collect()
    ]
    sql_offsets = [
        r.asDict()
        for r in spark.sql(
            "SELECT topic, partition, upstream_offset, offset, checkpoint_offset "
            f"FROM offset_translation {where} ORDER BY topic, partition"
        ).collect()
    ]
    return FailoverOverview(
        group, readiness, sql_offsets, failover_group(config, group, source, target)
    )
