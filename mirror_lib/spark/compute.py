"""The compute shape a run gets, and what a shape cannot host, refused before anything starts.

* classic: a driver JVM in this process (a local session, a Databricks job cluster);
* Spark Connect: no JVM and no SparkContext here (Databricks shared clusters, a Spark Connect
  server such as :mod:`mirror_lib.testing.connect_server`); queries, Python data sources and
  ``foreachBatch`` run on the server, driver threads (checkpoints, heartbeats, delta-rs tables)
  in this process. Everything ``run_flows`` does runs there;
* serverless: Databricks serverless compute, Spark Connect with only ``availableNow`` triggers
  and no driver port anyone can reach. Only the catch-up shape (``once``) runs there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mirror_lib.errors import ConfigError
from mirror_lib.spark.session import connect_url, is_connect

CLASSIC = "classic"
CONNECT = "Spark Connect"
SERVERLESS = "serverless"


def compute_shape(spark: Any, env: Mapping[str, str] | None = None) -> str:
    """:data:`CLASSIC`, :data:`CONNECT` or :data:`SERVERLESS` for ``spark`` (None: the session
    :func:`~mirror_lib.spark.session.get_spark` would give)."""
    env = os.environ if env is None else env
    # serverless notebooks and jobs report their client environment, e.g. "client.4.1"
    if env.get("DATABRICKS_RUNTIME_VERSION", "").startswith("client."):
        return SERVERLESS
    remote = is_connect(spark) if spark is not None else connect_url() is not None
    return CONNECT if remote else CLASSIC


def check_compute(
    spark: Any, *, once: bool, endpoint: Any = None, env: Mapping[str, str] | None = None
) -> None:
    """Refuse (ConfigError) what the run's compute shape cannot host, naming what to use.

    ``endpoint``: the run's :class:`~mirror_lib.replication.metrics.metrics_endpoint.
    MetricsEndpoint`, if it serves one.
    """
    shape = compute_shape(spark, env)
    if shape != SERVERLESS:
        return
    if not once:
        raise ConfigError(
            "once",
            False,
            "true on serverless compute: the continuous shape needs classic job compute "
            "(processingTime triggers, companion threads that outlive a query); on serverless "
            "use the catch-up job (the bundle's mirror_catch_up, --once=true)",
        )
    if endpoint is not None:
        raise ConfigError(
            endpoint.port_key,
            endpoint.port,
            "unset on serverless compute: the Prometheus endpoint needs classic job compute, "
            "whose driver port a scraper can reach; on serverless read the tables instead "
            "(mirror status, the views, the dashboard)",
        )


def session_cores(spark: Any) -> int | None:
    """The cores a classic session runs tasks on (``local[N]``: N; a cluster: its executors'
    cores); None under Spark Connect, which does not say."""
    if is_connect(spark):
        return None
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # a session that cannot tell is not refused for it
        return None


def slots_text(slots: Mapping[str, int], cores: int | None) -> str | None:
    """A warning when the copy slots of a run's queries (``tasks.max`` of each) outnumber the
    session's cores: a slot beyond them waits for a free core a whole slice at a time, so its
    partitions fall behind; None when they fit."""
    total = sum(slots.values())
    if cores is None or total <= cores:
        return None
    each = ", ".join(f"{name}: {n}" for name, n in slots.items())
    return (
        f"{total} copy slots ({each}; tasks.max of each) but the Spark session has {cores} cores: "
        "the slots beyond them wait for a free core a slice at a time, so their partitions fall "
        "behind. Lower tasks.max, or give the session more cores (mirror.spark.master = "
        "local[N] for a local run, more workers on a cluster)"
    )
