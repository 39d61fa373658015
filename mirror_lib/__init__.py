"""mirror_lib: MirrorMaker-2-compatible Kafka replication as Spark Structured Streaming queries.

The public API is importable from here (``from mirror_lib import load_config, run_flows``). Names
are resolved on first use (module ``__getattr__``), so ``import mirror_lib`` needs neither
pyspark nor confluent-kafka; ARCHITECTURE.md has the layers behind them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> module that defines it
_API: dict[str, str] = {
    # configuration
    "MirrorConfig": "mirror_lib.config.model",
    "load_config": "mirror_lib.config.parse",
    "parse_config": "mirror_lib.config.parse",
    "describe_config": "mirror_lib.config.describe",
    "load_job_config": "mirror_lib.config.databricks",
    "default_path": "mirror_lib.config.databricks",
    # errors
    "MirrorError": "mirror_lib.errors",
    "ConfigError": "mirror_lib.errors",
    "MirrorRuntimeError": "mirror_lib.errors",
    # Kafka (MM2's RemoteClusterUtils)
    "MirrorClient": "mirror_lib.kafka.mirror_client",
    # failover, cutover, verify
    "translate_group": "mirror_lib.replication.migration.failover",
    "failover_group": "mirror_lib.replication.migration.failover",
    "format_failover": "mirror_lib.replication.migration.failover",
    "failover_overview": "mirror_lib.spark.failover_view",
    "CutoverOptions": "mirror_lib.replication.migration.cutover",
    "run_cutover": "mirror_lib.replication.migration.cutover",
    "format_cutover": "mirror_lib.replication.migration.cutover",
    "verify_flow": "mirror_lib.replication.migration.verify",
    "spark_restart_on_target": "mirror_lib.replication.migration.spark_checkpoint",
    "format_restart": "mirror_lib.replication.migration.spark_checkpoint",
    # running (pyspark)
    "get_spark": "mirror_lib.spark.session",
    "FlowRunner": "mirror_lib.spark.flow_runner",
    "run_flows": "mirror_lib.spark.runner",
    # notebooks, status, dashboards
    "Widgets": "mirror_lib.app.widgets",
    "configure_flow": "mirror_lib.app.configure",
    "flow_properties": "mirror_lib.app.configure",
    "flow_status": "mirror_lib.app.status",
    "build_figures": "mirror_lib.app.dashboard",
    # MLflow runs
    "MlflowRun": "mirror_lib.app.tracking",
    "log_run": "mirror_lib.app.tracking",
}

__all__ = ["__version__", *sorted(_API)]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'mirror_lib' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
