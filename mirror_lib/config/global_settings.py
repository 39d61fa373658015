"""Process-wide ``mirror.*`` keys (top level, never per flow): MLflow, outages, tables, metrics,
the local Spark master.

Read one with :func:`global_setting`, or what they decide for a run at once with
:meth:`RunSettings.of`; per-flow keys are in :mod:`mirror_lib.config.settings`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, overload

from mirror_lib.config.setting_values import Setting, boolean, choice, int_at_least
from mirror_lib.errors import ConfigError


def _tracking_uri(key: str, raw: str) -> str:
    value = raw.strip()
    if value and value != "databricks" and not re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", value):
        raise ConfigError(
            key,
            raw,
            "an MLflow tracking URI such as sqlite:///path/mlflow.db, http(s)://host:port or "
            "databricks, or empty for the default",
        )
    return value


def _experiment(key: str, raw: str) -> str:
    if not raw.strip():
        raise ConfigError(key, raw, "a non-empty MLflow experiment name")
    return raw.strip()


TablesWriter = Literal["auto", "delta-rs", "spark"]

_SCHEMA = r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)?|`[^`]+`(\.`[^`]+`)?"


def _schema(key: str, raw: str) -> str:
    value = raw.strip()
    if value and not re.fullmatch(_SCHEMA, value):
        raise ConfigError(key, raw, "a schema name such as main.mirror (catalog.schema), or empty")
    return value


def _outage_seconds(key: str, raw: str) -> float | None:
    if not raw.strip():
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(key, raw, "a number of seconds > 0, or empty for the default") from None
    if not value > 0:
        raise ConfigError(key, raw, "a number of seconds > 0, or empty for the default")
    return value


#: Process-wide ``mirror.*`` keys (top level, never per flow); read with :func:`global_setting`.
GLOBAL_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "mirror.mlflow.enabled",
        "mlflow_enabled",
        "false",
        boolean,
        "log each `mirror run` as an MLflow run (also: `mirror run --mlflow`)",
    ),
    Setting(
        "mirror.mlflow.tracking.uri",
        "mlflow_tracking_uri",
        "",
        _tracking_uri,
        "MLflow tracking URI; empty: MLFLOW_TRACKING_URI, else databricks on Databricks, else "
        "sqlite:///<mirror.state.dir>/mlflow.db",
    ),
    Setting(
        "mirror.mlflow.experiment",
        "mlflow_experiment",
        "mirror_lib",
        _experiment,
        "MLflow experiment name (on Databricks a relative name goes under /Shared/)",
    ),
    Setting(
        "mirror.outage.max.seconds",
        "outage_max_seconds",
        "",
        _outage_seconds,
        "how long a run keeps retrying an unreachable cluster (or another transient failure) "
        "before it fails (for `--once` also: how long its slices may leave a partition where it "
        "was); empty: indefinitely for continuous runs, 120 s for `--once`",
    ),
)
GLOBAL_SETTINGS += (
    Setting(
        "mirror.tables.enabled",
        "tables_enabled",
        "true",
        boolean,
        "materialize the internal topics into Delta tables",
    ),
    Setting(
        "mirror.tables.writer",
        "tables_writer",
        "auto",
        choice(*get_args(TablesWriter)),
        "who writes the tables: auto (Delta's Spark writer where the session has Delta, as on "
        "Databricks; delta-rs in a local session), spark (local sessions then load delta-spark) "
        "or delta-rs",
    ),
    Setting(
        "mirror.tables.schema",
        "tables_schema",
        "",
        _schema,
        "catalog.schema of the tables and views with the Spark writer",
    ),
)


def _number_at_least(minimum: float, unit: str, off: bool = False) -> Any:
    """A parser of a number of ``unit`` >= ``minimum`` (``off``: or 0, which turns it off)."""
    expected = f"a number of {unit} >= {minimum:g}" + (", or 0 for never" if off else "")

    def parse(key: str, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ConfigError(key, raw, expected) from None
        if not math.isfinite(value) or not (value >= minimum or (off and value == 0)):
            raise ConfigError(key, raw, expected)
        return value

    return parse


#: The tables' maintenance (docs/operations/state.md): what a run does on its own, and what the
#: bundle's maintenance job and ``maintain_tables`` default to.
GLOBAL_SETTINGS += (
    Setting(
        "mirror.tables.maintenance.interval.seconds",
        "tables_maintenance_interval",
        "3600",
        _number_at_least(10, "seconds", off=True),
        "how often `mirror run` maintains the delta-rs tables on its tables thread: deletes "
        "rows older than the retention, compacts small files, writes a Delta checkpoint, "
        "removes expired log entries and vacuums; 0: never (the bundle's maintenance job, or "
        "`maintain_tables`, then has to)",
    ),
    Setting(
        "mirror.tables.retention.days",
        "tables_retention_days",
        "7",
        _number_at_least(1, "days"),
        "rows of the tables older than this (by `record_ts`) are deleted by maintenance; 7 "
        "days, as the metrics topic keeps its segments: at 5,000 records/s our state then "
        "holds about 2 GB (docs/operations/state.md)",
    ),
    Setting(
        "mirror.tables.history.hours",
        "tables_history_hours",
        "24",
        _number_at_least(0.01, "hours"),
        "how far back time travel reaches: Delta log entries and files that a newer version "
        "replaced are kept this long (`delta.logRetentionDuration`, "
        "`delta.deletedFileRetentionDuration`, VACUUM's retention), then removed; each hour "
        "of history keeps about an hour of the files compaction replaced "
        "(docs/operations/state.md)",
    ),
    Setting(
        "mirror.tables.checkpoint.interval",
        "tables_checkpoint_interval",
        "10",
        int_at_least(1),
        "a Delta checkpoint every this many commits of a table (`delta.checkpointInterval`): a "
        "reader replays at most this many log entries",
    ),
)


def _metrics_port(key: str, raw: str) -> int:
    expected = "a TCP port 1..65535 to serve Prometheus metrics on, or 0 / empty for none"
    try:
        port = int(raw.strip() or "0")
    except ValueError:
        raise ConfigError(key, raw, expected) from None
    if not 0 <= port <= 65535:
        raise ConfigError(key, raw, expected)
    return port


def _metrics_host(key: str, raw: str) -> str:
    value = raw.strip()
    if not value or re.search(r"[\s/]", value):
        raise ConfigError(
            key, raw, "an address to listen on: 127.0.0.1 (default), 0.0.0.0 or a name"
        )
    return value


GLOBAL_SETTINGS += (
    Setting(
        "mirror.metrics.port",
        "metrics_port",
        "0",
        _metrics_port,
        "serve Prometheus metrics from the driver of `mirror run` on this port (0: off; also "
        "`mirror run --metrics-port`)",
    ),
    Setting(
        "mirror.metrics.host",
        "metrics_host",
        "127.0.0.1",
        _metrics_host,
        "address the metrics endpoint listens on (also `mirror run --metrics-host`)",
    ),
)
EXECUTOR_MIN_MB = 450  # Spark refuses an executor below 1.5 x its 300 MB reserve
_MASTER = re.compile(r"local(\[(\d+|\*)\])?|local-cluster\[(\d+),(\d+),(\d+)\]")


def _spark_master(key: str, raw: str) -> str:
    value = raw.strip().replace(" ", "")
    match = _MASTER.fullmatch(value)
    counts = [int(g) for g in match.groups() if g and g.isdigit()] if match else []
    memory = match.group(5) if match else None
    too_small = memory is not None and int(memory) < EXECUTOR_MIN_MB
    if value and (match is None or 0 in counts or too_small):
        raise ConfigError(
            key,
            raw,
            "local, local[N], local[*] or local-cluster[E,C,M] (E executor processes of C "
            f"cores and M MB each; N, E, C > 0, M >= {EXECUTOR_MIN_MB}), or empty for "
            "local[6]; to run on another cluster, pass its session to run_flows",
        )
    return value


GLOBAL_SETTINGS += (
    Setting(
        "mirror.spark.master",
        "spark_master",
        "",
        _spark_master,
        "the master of the local Spark session a run starts when it finds none: local[N] or "
        "local-cluster[E,C,M] (separate executor processes, as on a cluster); empty: local[6]",
    ),
)
GLOBAL_BY_KEY: dict[str, Setting] = {s.key: s for s in GLOBAL_SETTINGS}


_Flag = Literal["mirror.mlflow.enabled", "mirror.tables.enabled"]
_Number = Literal[
    "mirror.tables.maintenance.interval.seconds",
    "mirror.tables.retention.days",
    "mirror.tables.history.hours",
]
_Text = Literal[
    "mirror.mlflow.tracking.uri",
    "mirror.mlflow.experiment",
    "mirror.tables.schema",
    "mirror.metrics.host",
    "mirror.spark.master",
]


# One overload per type of value, so that a caller's use of the value is type-checked and an
# unknown key is a type error.
@overload
def global_setting(props: Mapping[str, str], key: _Flag) -> bool: ...
@overload
def global_setting(props: Mapping[str, str], key: _Text) -> str: ...
@overload
def global_setting(
    props: Mapping[str, str], key: Literal["mirror.tables.writer"]
) -> TablesWriter: ...
@overload
def global_setting(
    props: Mapping[str, str],
    key: Literal["mirror.metrics.port", "mirror.tables.checkpoint.interval"],
) -> int: ...
@overload
def global_setting(
    props: Mapping[str, str], key: Literal["mirror.outage.max.seconds"]
) -> float | None: ...
@overload
def global_setting(props: Mapping[str, str], key: _Number) -> float: ...
def global_setting(props: Mapping[str, str], key: str) -> object:
    """The parsed value of a top-level key of :data:`GLOBAL_SETTINGS`, else its default."""
    setting = GLOBAL_BY_KEY[key]
    return setting.parse(key, props.get(key, setting.default))


#: How long a ``--once`` run waits through an outage, and lets its slices leave a partition where
#: it was, when ``mirror.outage.max.seconds`` is empty.
ONCE_OUTAGE_MAX_S = 120.0


@dataclass(frozen=True)
class RunSettings:
    """What the top-level settings decide for one ``mirror run``, read once: bad values fail in
    :meth:`of`, before anything starts."""

    outage_limit_s: float | None  # how long the run waits through an outage; None: forever
    stall_limit_s: float  # how long a --once slice may leave a partition where it was
    tables: bool  # mirror.tables.enabled
    tables_writer: TablesWriter  # mirror.tables.writer as set: auto, delta-rs or spark
    spark_master: str  # mirror.spark.master; empty: the session's default

    @classmethod
    def of(cls, props: Mapping[str, str], once: bool = False) -> RunSettings:
        """The settings of a run (``once``: a ``--once`` run) over the properties ``props``."""
        limit = global_setting(props, "mirror.outage.max.seconds")
        return cls(
            outage_limit_s=ONCE_OUTAGE_MAX_S if limit is None and once else limit,
            stall_limit_s=ONCE_OUTAGE_MAX_S if limit is None else limit,
            tables=global_setting(props, "mirror.tables.enabled"),
            tables_writer=global_setting(props, "mirror.tables.writer"),
            spark_master=global_setting(props, "mirror.spark.master"),
        )

    @property
    def session_delta(self) -> bool:
        """Whether a local session the run starts loads Delta: ``mirror.tables.writer = spark``
        (``auto`` keeps delta-rs locally, and so a lean session)."""
        return self.tables_writer == "spark"
