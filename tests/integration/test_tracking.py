"""MLflow runs of real replication: an observed run_flows, a failing run, `mirror run --mlflow`."""

from __future__ import annotations

import importlib.util
import os
import time
import uuid
from pathlib import Path

import pytest

from mirror_lib.app.status import flow_status
from mirror_lib.app.tracking import MlflowRun
from mirror_lib.config.parse import parse_config
from mirror_lib.config.properties import REDACTED
from mirror_lib.errors import ConfigError
from mirror_lib.spark.runner import run_flows
from mirror_lib.testing.kafka_io import create_topic, produce_exact
from tests.helpers.mirror_cli import run_mirror
from tests.integration.conftest import flow_properties, write_properties

mlflow = pytest.importorskip("mlflow")

# Set while the tests are collected, before the session's JVM starts: Spark's Python workers
# inherit it, and they resolve the reference when they build the target's Kafka clients.
os.environ.setdefault("MIRROR_TEST_MLFLOW_SECRET", f"mlflow-secret-{uuid.uuid4().hex}")
SECRET = os.environ["MIRROR_TEST_MLFLOW_SECRET"]
SECRET_REF = {"B.ssl.key.password": "${env:MIRROR_TEST_MLFLOW_SECRET}"}  # unused on PLAINTEXT
DASHBOARD = (
    bool(importlib.util.find_spec("plotly"))
    and (Path(__file__).resolve().parents[2] / "mirror_lib" / "app" / "dashboard.py").exists()
)


def produce(bootstrap: str, n: int) -> str:
    topic = f"mlflow-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    produce_exact(bootstrap, topic, [{"value": f"v{i}", "partition": i % 2} for i in range(n)])
    return topic


def assert_secret_absent(folder: Path) -> None:
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path


def only_run(uri: str, experiment: str):
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None
    (run,) = client.search_runs([exp.experiment_id])
    return client, run


@pytest.fixture(scope="module")
def logged(spark, brokers, tmp_path_factory):
    """One `run_flows(once=True)` with tables, logged by an MlflowRun to a sqlite store."""
    root = tmp_path_factory.mktemp("mlflow")
    topic = produce(brokers.source, 40)
    uri = f"sqlite:///{root / 'store' / 'mlflow.db'}"
    extra = {
        "topics": topic,
        # the shared heartbeats topic on A (other tests fill it) would add to the run's records
        "heartbeats.replication.enabled": "false",
        "mirror.tables.enabled": "true",
        "mirror.mlflow.tracking.uri": uri,
        "mirror.mlflow.experiment": "it",
        **SECRET_REF,
    }
    config = parse_config(flow_properties(brokers.source, brokers.target, root / "state", **extra))
    lines: list[str] = []
    started = time.time() * 1000
    mlflow_run = MlflowRun(config, spark=spark, report=lines.append)
    run_flows(spark, config, once=True, timeout_s=180, report=lines.append, observer=mlflow_run)
    client, run = only_run(uri, "it")
    return {
        "client": client,
        "run": run,
        "config": config,
        "lines": lines,
        "root": root,
        "started": started,
    }


def test_run_has_redacted_params_and_versions(logged):
    params = logged["run"].data.params
    assert logged["run"].info.status == "FINISHED"
    assert params["config.B.ssl.key.password"] == REDACTED
    assert params["config.A_to_B.enabled"] == "true"
    assert params["flows"] == "A->B" and params["once"] == "True"
    assert params["version.mirror_lib"] and params["version.pyspark"]
    assert any(
        f"logging MLflow run {logged['run'].info.run_id}" in line for line in logged["lines"]
    )


def test_metrics_come_from_the_tables_of_the_run(logged):
    client, run = logged["client"], logged["run"]
    m = run.data.metrics
    assert m["records"] == 40
    assert 0 < m["latency_ms_p50"] <= m["latency_ms_p99"] <= m["latency_ms_max"]
    assert m["records_per_second"] > 0 and m["heartbeat_age_seconds"] >= 0
    lag = client.get_metric_history(run.info.run_id, "lag")
    (health,) = flow_status(logged["config"], now_ms=run.info.end_time)
    assert lag and lag[-1].value == health.lag  # the latest lag per partition, as `mirror status`
    assert lag[-1].timestamp == run.info.end_time
    assert all(logged["started"] <= p.timestamp <= run.info.end_time for p in lag)


def test_artifacts_and_no_secret_anywhere_in_the_store(logged):
    client, run = logged["client"], logged["run"]
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert "mm2.properties" in names
    text = Path(client.download_artifacts(run.info.run_id, "mm2.properties")).read_text()
    assert "B.ssl.key.password = <redacted>" in text
    if DASHBOARD:
        assert "dashboard.html" in names, run.data.tags.get("mirror.dashboard")
    else:
        assert "not logged" in run.data.tags["mirror.dashboard"]
    assert_secret_absent(logged["root"] / "store")


def test_failed_run_is_logged_and_the_error_re_raised(spark, brokers, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    extra = {"topics": "no-such-topic-.*", "mirror.mlflow.tracking.uri": uri}
    config = parse_config(flow_properties(brokers.source, brokers.target, tmp_path / "s", **extra))
    with pytest.raises(ConfigError, match=r"A->B\.topics"):
        quiet = MlflowRun(config, spark=spark, report=lambda *_: None)
        run_flows(spark, config, once=True, report=lambda *_: None, observer=quiet)
    _client, run = only_run(uri, "mirror_lib")
    assert run.info.status == "FAILED"
    assert run.data.tags["mirror.error"].startswith("ConfigError: A->B.topics")
    assert run.data.tags["mirror.metrics"] == "none: mirror.tables.enabled = false"


def test_mirror_run_mlflow_logs_to_the_state_dir(brokers, tmp_path, subprocess_env):
    """The CLI path with the default store; tables off keeps it short (no dashboard)."""
    topic = produce(brokers.source, 12)
    state = tmp_path / "state"
    props = flow_properties(brokers.source, brokers.target, state, topics=topic, **SECRET_REF)
    config_file = write_properties(tmp_path / "mm2.properties", props)
    env = {k: v for k, v in subprocess_env.items() if k != "MLFLOW_TRACKING_URI"}
    env.pop("DATABRICKS_RUNTIME_VERSION", None)
    out = run_mirror(config_file, env, "--once", "--mlflow", timeout_s=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    client, run = only_run(f"sqlite:///{state.resolve()}/mlflow.db", "mirror_lib")
    assert f"logging MLflow run {run.info.run_id}" in out.stdout
    assert run.info.status == "FINISHED" and run.data.params["flows"] == "A->B"
    assert run.data.params["config.topics"] == topic
    assert run.data.metrics["duration_seconds"] > 0
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["mm2.properties"]
    assert (state / "mlruns").is_dir() and not (tmp_path / "mlruns").exists()
    assert_secret_absent(state)
