"""Log a `mirror run` as an MLflow run: redacted config, versions, metrics and artifacts.

Params: the config's properties with secrets redacted (references are never resolved here), the
flows and the versions. Metrics come from the Delta tables of the run's time window, read with
delta-rs (no Spark): records, bytes, throughput, latency, heartbeat and checkpoint age, and ``lag``
as a history whose last point is the final lag. Artifacts: ``mm2.properties`` (redacted) and
``dashboard.html``. Tracking URI: ``mirror.mlflow.tracking.uri``, else ``MLFLOW_TRACKING_URI``,
else ``databricks`` on a Databricks runtime, else ``sqlite:///<mirror.state.dir>/mlflow.db``. With
a sqlite store, a new experiment keeps its artifacts in ``mlruns`` beside the database file.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import mirror_lib
from mirror_lib.config.databricks import on_databricks
from mirror_lib.config.global_settings import global_setting
from mirror_lib.config.model import MirrorConfig
from mirror_lib.config.properties import format_properties, redact
from mirror_lib.errors import ConfigError, MirrorError, MirrorRuntimeError
from mirror_lib.tables.run_metrics import Series, window_metrics

if TYPE_CHECKING:
    from mirror_lib.spark.plan import RunPlan

_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")  # user:password@ in URIs


def mlflow_enabled(config: MirrorConfig) -> bool:
    """``mirror.mlflow.enabled`` (default false)."""
    return bool(global_setting(config.properties, "mirror.mlflow.enabled"))


def tracking_uri(config: MirrorConfig) -> str:
    """The setting, else MLFLOW_TRACKING_URI, else ``databricks`` there, else a sqlite file."""
    if explicit := global_setting(config.properties, "mirror.mlflow.tracking.uri"):
        return explicit
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    if on_databricks():
        return "databricks"
    return "sqlite:///" + (Path(config.state_dir).resolve() / "mlflow.db").as_posix()


def experiment_name(config: MirrorConfig, uri: str) -> str:
    """``mirror.mlflow.experiment``; on Databricks a relative name goes under ``/Shared/``."""
    name = global_setting(config.properties, "mirror.mlflow.experiment")
    return f"/Shared/{name}" if uri.startswith("databricks") and not name.startswith("/") else name


def artifact_location(uri: str) -> str | None:
    """``mlruns`` beside a sqlite database; None (the server decides) for other stores."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri[len("sqlite:///") :]).resolve().parent / "mlruns").as_uri()


def hide_credentials(text: str) -> str:
    """``scheme://user:password@host`` -> ``scheme://<redacted>@host``."""
    return _CREDENTIALS.sub("<redacted>@", text)


def param_key(text: str) -> str:
    """A valid MLflow key: ``A->B.topics`` -> ``A_to_B.topics``."""
    return re.sub(r"[^\w.\- /]", "_", text.replace("->", "_to_"))[:250]


def _value(value: Any) -> str:
    return hide_credentials(str(value))[:6000]


def versions() -> dict[str, str]:
    """mirror_lib (and its git commit in a checkout), python, pyspark, Kafka client, deltalake."""
    out = {"mirror_lib": mirror_lib.__version__, "python": platform.python_version()}
    for name in ("pyspark", "confluent_kafka", "deltalake"):
        try:
            out[name] = str(importlib.import_module(name).__version__)
        except ImportError:
            out[name] = "not installed"
    with contextlib.suppress(ImportError):
        out["librdkafka"] = importlib.import_module("confluent_kafka").libversion()[0]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        here = Path(mirror_lib.__file__).resolve().parent
        git = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True
        )
        if git.returncode == 0 and git.stdout.strip():
            out["mirror_lib_git"] = git.stdout.strip()
    return out


def run_params(config: MirrorConfig, flow_names: Sequence[str]) -> dict[str, str]:
    """``config.<key>`` (redacted), ``flows``, ``config_file`` and ``version.<name>``."""
    params = {f"config.{param_key(k)}": v for k, v in redact(config.properties).items()}
    params.update(flows=", ".join(flow_names), config_file=config.origin)
    params.update({f"version.{k}": v for k, v in versions().items()})
    return {k: _value(v) for k, v in params.items()}


def properties_text(props: Mapping[str, str]) -> str:
    """The configuration as ``mm2.properties`` text, secrets redacted."""
    safe = {k: hide_credentials(v) for k, v in redact(props).items()}
    return format_properties(
        safe, header="logged by mirror_lib.app.tracking; sensitive values are <redacted>"
    )


def _client_class() -> Any:
    """mlflow's ``MlflowClient``; a ConfigError naming the install command without the package."""
    try:
        from mlflow import MlflowClient  # lazy: optional extra "mlflow"
    except ImportError:
        raise ConfigError(
            "mirror.mlflow.enabled",
            "true",
            "the mlflow package: pip install 'mirror_lib[mlflow]' (or turn MLflow logging off)",
        ) from None
    return MlflowClient


def _client(config: MirrorConfig) -> tuple[Any, str]:
    uri = tracking_uri(config)
    return _client_class()(tracking_uri=uri), uri


@contextlib.contextmanager
def _mlflow_errors(uri: str) -> Iterator[None]:
    try:
        yield
    except MirrorError:
        raise
    except Exception as exc:
        where = hide_credentials(uri)
        raise MirrorRuntimeError(f"MLflow tracking at {where} failed: {exc}") from exc


def _log_batch(client: Any, run_id: str, params: dict[str, str], metrics: Series) -> None:
    from mlflow.entities import Metric, Param  # lazy: optional extra "mlflow"

    items = list(params.items())  # MLflow's batch limits: 100 params, 1000 metrics
    for i in range(0, len(items), 100):
        client.log_batch(run_id, params=[Param(k, v) for k, v in items[i : i + 100]])
    for i in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=[Metric(*m) for m in metrics[i : i + 1000]])


def _flow_names(config: MirrorConfig, flow_names: Sequence[str] | None) -> list[str]:
    return [config.flow(n).name for n in flow_names or [f.name for f in config.enabled_flows()]]


def start_run(
    config: MirrorConfig,
    *,
    flow_names: Sequence[str] | None = None,
    run_name: str | None = None,
    extra_params: Mapping[str, Any] | None = None,
) -> str:
    """Create a RUNNING MLflow run with the params and ``mm2.properties``; returns its id."""
    names = _flow_names(config, flow_names)
    client, uri = _client(config)
    with _mlflow_errors(uri), tempfile.TemporaryDirectory() as tmp:
        name = experiment_name(config, uri)
        found = client.get_experiment_by_name(name)
        if found is None:
            exp_id = client.create_experiment(name, artifact_location(uri))
        else:
            exp_id = found.experiment_id
        flows = ", ".join(names)
        run = client.create_run(
            exp_id, run_name=run_name or f"mirror {flows}", tags={"mirror.flows": flows}
        )
        run_id = run.info.run_id
        extra = {param_key(k): _value(v) for k, v in (extra_params or {}).items()}
        _log_batch(client, run_id, {**run_params(config, names), **extra}, [])
        (Path(tmp) / "mm2.properties").write_text(properties_text(config.properties), "utf-8")
        client.log_artifact(run_id, str(Path(tmp) / "mm2.properties"))
    return run_id


def log_run(
    config: MirrorConfig,
    *,
    started_ms: float,
    ended_ms: float,
    run_id: str | None = None,
    spark: Any = None,
    flow_names: Sequence[str] | None = None,
    status: str = "FINISHED",
    error: BaseException | None = None,
    extra_params: Mapping[str, Any] | None = None,
    extra_metrics: Mapping[str, float] | None = None,
    artifacts: Sequence[str | os.PathLike[str]] = (),
    dashboard: bool = True,
    run_name: str | None = None,
    report: Any = print,
) -> str:
    """Log the run of ``started_ms..ended_ms`` (epoch ms), or complete ``run_id`` of start_run.

    ``extra_params`` go with a run created here. What cannot be read (tables, dashboard) is
    skipped with a warning and a ``mirror.<what>`` tag. ``status``: FINISHED, FAILED or KILLED.
    """
    names = _flow_names(config, flow_names)
    if run_id is None:
        run_id = start_run(config, flow_names=names, run_name=run_name, extra_params=extra_params)
    client, uri = _client(config)
    notes: dict[str, str] = {}
    summary = {"duration_seconds": (ended_ms - started_ms) / 1000}
    series: Series = []
    tables = global_setting(config.properties, "mirror.tables.enabled")
    if not tables:
        notes["mirror.metrics"] = "none: mirror.tables.enabled = false"
    else:
        try:
            summary, series = window_metrics(config, names, started_ms, ended_ms, spark)
        except Exception as exc:  # log what exists
            notes["mirror.metrics"] = f"not read: {exc}"
    summary.update(extra_metrics or {})
    end = int(ended_ms)
    points = [(param_key(k), float(v), end, 0) for k, v in summary.items()] + series
    with _mlflow_errors(uri), tempfile.TemporaryDirectory() as tmp:
        _log_batch(client, run_id, {}, points)
        for path in artifacts:
            client.log_artifact(run_id, str(path))
        if dashboard and tables:
            try:
                from mirror_lib.app.dashboard import write_dashboard  # lazy: plotly is an extra

                html = write_dashboard(spark, config, Path(tmp) / "dashboard.html")
                client.log_artifact(run_id, str(html))
            except Exception as exc:  # the run is logged without it
                notes["mirror.dashboard"] = f"not logged: {exc}"
        if error is not None:
            notes["mirror.error"] = ": ".join(filter(None, (type(error).__name__, str(error))))
        for key, value in notes.items():
            client.set_tag(run_id, key, hide_credentials(value)[:5000])
            if key != "mirror.error":
                report(f"warning: MLflow run {run_id}: {key[7:]} {value}")
        client.set_terminated(run_id, status, end_time=end)
    return run_id


class _Completion(TypedDict):
    """What :meth:`MlflowRun.finish` passes to :func:`log_run` whatever the run's outcome."""

    run_id: str | None
    spark: Any
    flow_names: list[str]
    report: Callable[[str], object]


class _Failure(TypedDict):
    """What :meth:`MlflowRun.finish` adds for a run that failed or was stopped."""

    status: str
    error: BaseException
    dashboard: bool


class MlflowRun:
    """Logs one :func:`~mirror_lib.spark.runner.run_flows` call as an MLflow run: an observer
    passed to it (``run_flows(..., observer=MlflowRun(config))``).

    The run is created when the plan is resolved, before the checks and the queries (a bad
    tracking store fails fast), and completed after the queries stopped: FINISHED, or FAILED
    (KILLED on Ctrl-C) with what exists; the run's own error is raised as before. ``spark``:
    the session that reads the tables where Delta's Spark writer holds them.
    """

    def __init__(
        self,
        config: MirrorConfig,
        *,
        spark: Any = None,
        run_name: str | None = None,
        report: Callable[[str], object] = print,
    ) -> None:
        _client_class()  # no mlflow package: a ConfigError before anything starts
        self.config, self.spark, self.run_name, self.report = config, spark, run_name, report
        self.run_id: str | None = None
        self.flow_names: list[str] = []
        self.started_ms = 0.0

    @classmethod
    def when_enabled(
        cls, config: MirrorConfig, enabled: bool | None = None, **kwargs: Any
    ) -> MlflowRun | None:
        """A run to log when ``enabled`` (``None``: ``mirror.mlflow.enabled``), else None."""
        on = mlflow_enabled(config) if enabled is None else enabled
        return cls(config, **kwargs) if on else None

    def start(self, plan: RunPlan) -> None:
        """Create the RUNNING run with the plan's flows and mode."""
        self.started_ms = time.time() * 1000
        self.flow_names = plan.names
        modes = {"once": plan.once, "duration_s": plan.duration_s, "timeout_s": plan.timeout_s}
        self.run_id = start_run(
            self.config, flow_names=self.flow_names, run_name=self.run_name, extra_params=modes
        )
        uri = hide_credentials(tracking_uri(self.config))
        self.report(f"logging MLflow run {self.run_id} to {uri}")

    def finish(self, error: BaseException | None) -> None:
        """Complete the run: FINISHED, or FAILED (KILLED on Ctrl-C, without the dashboard) with
        the error; a failure to log a failed run is a warning, the run's own error counts."""
        done: _Completion = {"run_id": self.run_id, "spark": self.spark,
                             "flow_names": self.flow_names, "report": self.report}  # fmt: skip
        if error is None:
            ended = time.time() * 1000
            log_run(self.config, **done, started_ms=self.started_ms, ended_ms=ended)
            return
        killed = isinstance(error, KeyboardInterrupt)  # no dashboard: the user wants to stop
        try:
            ended = time.time() * 1000
            status = "KILLED" if killed else "FAILED"
            failed: _Failure = {"status": status, "error": error, "dashboard": not killed}
            log_run(self.config, **done, **failed, started_ms=self.started_ms, ended_ms=ended)
        except Exception as log_exc:  # keep the run's own error
            self.report(f"warning: MLflow run {self.run_id} was not completed: {log_exc}")
