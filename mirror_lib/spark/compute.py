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
