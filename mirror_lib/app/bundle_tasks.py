"""Job tasks of the Databricks bundle: named parameters in, one library call, an exit code out.

``jobs/<task>.py`` files call :func:`main` with their task name and ``sys.argv[1:]``. Each task
declares its parameters with the widgets layer, so a bad ``--name value`` gets the same error as
a bad notebook widget, before anything starts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from mirror_lib.app.cli import exit_code
from mirror_lib.app.widgets import Param, Widgets, as_bool, as_number, text
from mirror_lib.config.databricks import load_job_config
from mirror_lib.config.global_settings import RunSettings
from mirror_lib.errors import ConfigError
from mirror_lib.replication.companions.threads import COMPANIONS

COMMON = (
    text("config_path", "", "mm2.properties path", required=True, help="an mm2.properties path"),
    text("flows", "", "flows (A->B, comma-separated; empty: all enabled)"),
    text("tables_schema", "", "catalog.schema of the Delta tables (overrides the config)"),
    text("state_dir", "", "mirror.state.dir: checkpoints, tables (overrides the config)"),
)


RUNNING = (
    text("duration_seconds", "0", "stop after (0: run until stopped)", parse=as_number(0)),
    text("once", "false", "catch up, then exit", parse=as_bool),
)
MAINTENANCE = (
    text(
        "retention_days",
        "",
        "delete table rows older than (days; empty: mirror.tables.retention.days)",
        parse=as_number(0.01),
    ),
    text(
        "vacuum_hours",
        "",
        "vacuum files unreferenced for (hours; empty: mirror.tables.history.hours)",
        parse=as_number(0),
    ),
)

#: Task name -> (the PARTS of run_flows it runs, or None for maintenance; its parameters).
TASKS: dict[str, tuple[tuple[str, ...] | None, tuple[Param, ...]]] = {
    "replication": (("replication",), COMMON + RUNNING),
    "companions": (COMPANIONS, COMMON + RUNNING),
    "materialization": (("tables",), COMMON + RUNNING),
    "maintenance": (None, COMMON + MAINTENANCE),
}


def _config(values: dict[str, Any]) -> Any:
    return load_job_config(values["config_path"], values["tables_schema"], values["state_dir"])


def run_task(name: str, args: Sequence[str], spark: Any = None, report: Any = print) -> Any:
    """Run one bundle task with its job arguments; ``spark=None`` uses the job's session."""
    if name not in TASKS:
        raise ConfigError("task", name, "one of " + ", ".join(TASKS))
    parts, params = TASKS[name]
    values = Widgets(*params, args=args, interactive=False).values()
    config = _config(values)
    flows = [f.strip() for f in values["flows"].split(",") if f.strip()] or None
    for flow in flows or []:
        config.flow(flow)
    from mirror_lib.spark.session import settings_session  # lazy: pyspark

    # Never a session of our own: tasks of one job share the cluster's, and stopping it on
    # return would stop the other tasks' queries. Outside Databricks, mirror.spark.master.
    if spark is None:
        spark = settings_session(RunSettings.of(config.properties), once=False)
    if parts is None:
        from mirror_lib.spark.materialize import maintain_tables  # lazy: pyspark

        return maintain_tables(
            config,
            spark=spark,
            retention_days=values["retention_days"] or None,  # empty: the config's setting
            vacuum_hours=values["vacuum_hours"] if values["vacuum_hours"] != "" else None,
        )
    from mirror_lib.spark.runner import run_flows  # lazy: pyspark

    def show(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            report(row)

    return run_flows(
        spark,
        config,
        flows,
        once=values["once"],
        duration_s=values["duration_seconds"] or None,
        parts=parts,
        report=report,
        on_progress=show,
        progress_interval_s=60,
    )


def main(name: str, args: Sequence[str] | None = None) -> int:
    """Entry of ``jobs/<name>.py``: parameters are checked before a Spark session is found."""
    argv = sys.argv[1:] if args is None else args
    return exit_code(lambda: run_task(name, argv), f"mirror task {name}")
