"""Unit tests of MLflow tracking's pure parts: settings, URI choice, redacted params, metrics."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import mirror_lib
from mirror_lib.app.tracking import (
    artifact_location,
    experiment_name,
    mlflow_enabled,
    param_key,
    properties_text,
    run_params,
    start_run,
    tracking_uri,
    versions,
)
from mirror_lib.config.parse import parse_config
from mirror_lib.config.properties import REDACTED, parse_properties, redact
from mirror_lib.errors import ConfigError
from mirror_lib.tables.run_metrics import lag_series, summarize

SECRET = "s3cr3t-unit-value"


def cfg(tmp_path: Path, **extra: str):
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:9092",
        "B.bootstrap.servers": "b:9092",
        "A->B.enabled": "true",
        "mirror.state.dir": str(tmp_path / "state"),
    }
    props.update(extra)
    return parse_config(props)


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    return monkeypatch


def test_settings_defaults_and_validation(tmp_path):
    config = cfg(tmp_path)
    assert not mlflow_enabled(config)
    assert mlflow_enabled(cfg(tmp_path, **{"mirror.mlflow.enabled": "TRUE"}))
    with pytest.raises(ConfigError, match=r"mirror.mlflow.enabled = 'yes': expected true or false"):
        cfg(tmp_path, **{"mirror.mlflow.enabled": "yes"})
    with pytest.raises(ConfigError, match=r"mirror.mlflow.tracking.uri = '/tmp/x'.*sqlite:///"):
        cfg(tmp_path, **{"mirror.mlflow.tracking.uri": "/tmp/x"})
    with pytest.raises(ConfigError, match=r"mirror.mlflow.experiment = ' '.*non-empty"):
        cfg(tmp_path, **{"mirror.mlflow.experiment": " "})
    with pytest.raises(ConfigError, match=r"mirror.mlflow.enabled.*mirror.mlflow.experiment"):
        cfg(tmp_path, **{"mirror.mlflow.enable": "true"})  # typo: the valid keys are listed


def test_tracking_uri_precedence(tmp_path, clean_env):
    config = cfg(tmp_path)
    # built before "Databricks" below, which refuses a local mirror.state.dir
    explicit = cfg(tmp_path, **{"mirror.mlflow.tracking.uri": "sqlite:////x/m.db"})
    state = (tmp_path / "state").resolve()
    assert tracking_uri(config) == f"sqlite:///{state}/mlflow.db"
    assert artifact_location(tracking_uri(config)) == (state / "mlruns").as_uri()
    clean_env.setenv("DATABRICKS_RUNTIME_VERSION", "16.4")
    assert tracking_uri(config) == "databricks"
    clean_env.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert tracking_uri(config) == "http://mlflow:5000"
    assert tracking_uri(explicit) == "sqlite:////x/m.db"
    assert artifact_location("http://mlflow:5000") is None
    assert artifact_location("sqlite:////x/m.db") == "file:///x/mlruns"


def test_experiment_name_on_databricks_is_a_workspace_path(tmp_path):
    config = cfg(tmp_path)
    assert experiment_name(config, "sqlite:///m.db") == "mirror_lib"
    assert experiment_name(config, "databricks") == "/Shared/mirror_lib"
    mine = cfg(tmp_path, **{"mirror.mlflow.experiment": "/Users/me@x.com/mirror"})
    assert experiment_name(mine, "databricks") == "/Users/me@x.com/mirror"


def test_params_are_redacted_and_keys_valid(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRROR_UNIT_SECRET", SECRET)
    config = cfg(
        tmp_path,
        **{
            "B.sasl.jaas.config": "${env:MIRROR_UNIT_SECRET}",
            "B.ssl.key.password": SECRET,  # a literal secret
            "A.sasl.username": "${env:MIRROR_UNIT_SECRET}",  # not sensitive: stays a reference
            "mirror.mlflow.tracking.uri": "http://user:" + SECRET + "@mlflow:5000",
            "A->B.topics": "orders",
        },
    )
    params = run_params(config, ["A->B"])
    assert all(SECRET not in v for v in params.values())
    assert params["config.B.sasl.jaas.config"] == REDACTED
    assert params["config.B.ssl.key.password"] == REDACTED
    assert params["config.A.sasl.username"] == "${env:MIRROR_UNIT_SECRET}"
    assert params["config.mirror.mlflow.tracking.uri"] == "http://<redacted>@mlflow:5000"
    assert params["config.A_to_B.topics"] == "orders"
    assert params["flows"] == "A->B"
    assert params["version.mirror_lib"] == mirror_lib.__version__
    assert param_key("A->B.x y:z") == "A_to_B.x y_z"
    text = properties_text(config.properties)
    assert SECRET not in text
    assert parse_properties(text)["B.sasl.jaas.config"] == REDACTED


def test_properties_text_round_trips():
    props = {"a key=1": "v\\with\nnewline", "lead": "  spaces", "A->B.topics": "x, y"}
    assert parse_properties(properties_text(props)) == redact(props)


def test_versions_name_every_engine():
    import confluent_kafka
    import deltalake
    import pyspark

    v = versions()
    assert v["pyspark"] == pyspark.__version__
    assert v["deltalake"] == deltalake.__version__
    assert v["confluent_kafka"] == confluent_kafka.__version__
    assert v["librdkafka"] == confluent_kafka.libversion()[0]
    assert v["python"].count(".") == 2


def test_missing_mlflow_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow -> ImportError
    with pytest.raises(
        ConfigError, match=r"mirror.mlflow.enabled.*pip install 'mirror_lib\[mlflow\]'"
    ):
        start_run(cfg(tmp_path))


def row(ms: int, partition: int, lag: int, records: int = 10, p50: float = 5.0) -> dict:
    return {
        "flow": "A->B",
        "topic": "t",
        "partition": partition,
        "_ms": ms,
        "upstream_last": ms,
        "records": records,
        "bytes": records * 100,
        "lag": lag,
        "latency_ms_p50": p50,
        "latency_ms_p99": p50 * 2,
        "latency_ms_max": p50 * 3,
    }


def test_summary_counts_only_the_window_and_weights_latency():
    metrics = [
        row(500, 0, lag=7),  # before the run: not counted, but its lag is known
        row(600, 2, lag=3),  # ... and stays the latest of partition 2
        row(1_000, 0, lag=5, records=30, p50=10.0),
        row(1_200, 1, lag=4, records=10, p50=50.0),
        row(3_500, 1, lag=0, records=10, p50=20.0),
        row(9_000, 0, lag=1),  # after the run
        {**row(2_000, 0, lag=99), "flow": "B->A"},  # another flow
    ]
    heartbeats = [
        {"source": "A", "target": "B", "hops": 0, "_ms": 4_000},
        {"source": "A", "target": "B", "hops": 1, "_ms": 4_900},
    ]
    checkpoints = [{"source": "A", "target": "B", "_ms": 2_000}]
    out, series = summarize(metrics, heartbeats, checkpoints, [("A->B", "A", "B")], 1_000, 5_000)
    assert out["records"] == 50 and out["bytes"] == 5_000
    assert out["records_per_second"] == pytest.approx(50 / 4)
    assert out["records_per_second_replicating"] == pytest.approx(50 / 2.5)
    assert out["latency_ms_p50"] == pytest.approx((30 * 10 + 10 * 50 + 10 * 20) / 50)
    assert out["latency_ms_p99"] == 100 and out["latency_ms_max"] == 150
    assert out["heartbeat_age_seconds"] == 1.0  # hops=1 heartbeats do not count
    assert out["checkpoint_age_seconds"] == 3.0
    # lag = latest per partition: {0: 5, 1: 4, 2: 3} at 1.2 s, {0: 5, 1: 0, 2: 3} at 3.5 s, end
    assert [(v, step) for _k, v, _ts, step in series] == [(12.0, 0), (8.0, 2), (8.0, 4)]
    assert series[-1][2] == 5_000


def test_lag_series_is_bounded_on_long_runs():
    window = [row(i * 1_000, 0, lag=i) for i in range(5_000)]
    points = lag_series([], window, 0, 5_000_000)
    assert len(points) <= 1_001
    steps = [p[3] for p in points]
    assert steps == sorted(set(steps)) and points[-1][1] == 4_999


def test_mlflow_run_only_where_asked_for(tmp_path):
    from mirror_lib.app.tracking import MlflowRun

    assert MlflowRun.when_enabled(cfg(tmp_path)) is None  # mirror.mlflow.enabled: false
    assert isinstance(MlflowRun.when_enabled(cfg(tmp_path), True), MlflowRun)  # --mlflow
    enabled = cfg(tmp_path, **{"mirror.mlflow.enabled": "true"})
    assert isinstance(MlflowRun.when_enabled(enabled), MlflowRun)
    assert MlflowRun.when_enabled(enabled, False) is None
    assert not (tmp_path / "state").exists()  # no store was created


def test_interrupted_run_is_logged_killed(tmp_path, clean_env):
    from mlflow import MlflowClient

    from mirror_lib.app.tracking import MlflowRun
    from mirror_lib.spark.plan import RunPlan

    config = cfg(tmp_path, **{"mirror.mlflow.enabled": "true", "mirror.tables.enabled": "false"})
    lines: list[str] = []
    observer = MlflowRun(config, report=lines.append)
    observer.start(RunPlan.resolve(config, duration_s=5))
    observer.finish(KeyboardInterrupt())
    client = MlflowClient(tracking_uri(config))
    (run,) = client.search_runs([client.get_experiment_by_name("mirror_lib").experiment_id])
    assert run.info.status == "KILLED" and run.data.tags["mirror.error"] == "KeyboardInterrupt"
    assert run.data.params["duration_s"] == "5"
    assert run.data.metrics["duration_seconds"] >= 0
    assert (tmp_path / "state" / "mlruns").is_dir()
    assert any("metrics none: mirror.tables.enabled = false" in line for line in lines)
