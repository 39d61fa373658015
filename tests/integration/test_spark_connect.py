"""The library through a Spark Connect session: a local Connect server in its own JVM, a client
without one (as on Databricks shared and serverless compute).

One module fixture starts the server (mirror_lib.testing.connect_server) and replicates a flow
with ``run_flows(--once)`` and tables; the tests read what `mirror status`, `mirror translate` and
the SQL views answer through that session, run the continuous shape and the bundle's serverless
(catch-up) tasks on it, and check what serverless compute refuses before anything starts.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml

from mirror_lib.app.bundle_tasks import run_task
from mirror_lib.app.status import flow_status
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.replication.migration.failover import translate_group
from mirror_lib.spark.runner import run_flows
from mirror_lib.spark.session import connect_session, is_connect
from mirror_lib.spark.views import create_views
from mirror_lib.tables.health import latest_lag, read_rows
from mirror_lib.testing.connect_server import start_connect_server
from mirror_lib.testing.embedded import free_port
from mirror_lib.testing.kafka_io import create_topic, produce_exact
from tests.helpers.exactly_once import assert_exactly_once, committed_count
from tests.integration.conftest import flow_properties, write_properties
from tests.integration.test_tables import commit

REPO = Path(__file__).resolve().parents[2]
PER_ROUND = 300  # records per produce round, over 3 partitions
SERVERLESS = "client.4.1"  # DATABRICKS_RUNTIME_VERSION of serverless compute
KILL_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # a stopped query's copy task lives on until Spark kills its Python worker: this long here
    # (2 s by default), so that the run's fencing at its stop is what ends its copying
    conf = {"spark.python.task.killTimeout": f"{KILL_TIMEOUT_S}s"}
    started = start_connect_server(tmp_path_factory.mktemp("connect"), cores=4, conf=conf)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def remote(server):
    """A Spark Connect session to the server: no SparkContext, no JVM access."""
    session = connect_session(server.url)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="module")
def flow(remote, brokers, tmp_path_factory):
    """A flow with checkpoints and tables, caught up once through the Connect session."""
    name = f"sc-{int(time.time() * 1000) % 10**8}"
    props = flow_properties(
        brokers.source,
        brokers.target,
        tmp_path_factory.mktemp("connect-flow") / "state",
        topics=name,
        groups=f"{name}-g",
        **{"mirror.tables.enabled": "true", "emit.heartbeats.interval.seconds": "1"},
    )
    create_topic(brokers.source, name, 3)
    _produce(brokers.source, name, "a")
    commit(brokers.source, f"{name}-g", {(name, 0): 10, (name, 1): 20, (name, 2): 30})
    statuses = run_flows(remote, parse_config(props), once=True, timeout_s=180, report=print)
    return {"props": props, "name": name, "group": f"{name}-g", "statuses": statuses}


def _produce(bootstrap: str, topic: str, prefix: str) -> None:
    records = [{"value": f"{prefix}{i}".encode(), "partition": i % 3} for i in range(PER_ROUND)]
    produce_exact(bootstrap, topic, records)


def test_the_session_has_no_jvm(remote):
    assert is_connect(remote)
    with pytest.raises(Exception, match="JVM_ATTRIBUTE_NOT_SUPPORTED"):
        remote.sparkContext  # noqa: B018


def test_run_flows_once_replicates_and_materializes_through_connect(brokers, flow):
    assert list(flow["statuses"]) == ["A->B"]
    assert_exactly_once(brokers.source, flow["name"], brokers.target, f"A.{flow['name']}", 3)
    assert committed_count(brokers.target, f"A.{flow['name']}", 3) == PER_ROUND


def topic_lags(config, topic: str) -> list[int]:
    """The latest lag of each partition of ``topic`` in the flow's metrics table."""
    lags = latest_lag(read_rows(config, "replication_metrics"))
    return [lag for (_flow, t, _p), lag in sorted(lags.items()) if t == topic]


def test_status_translate_and_views_through_connect(remote, flow):
    config = parse_config(flow["props"])
    (health,) = flow_status(config, spark=remote)  # what `mirror status` prints
    # the session's brokers carry other tests' flows A->B too: their records and their
    # partitions' last lag count in the same metrics topic (as in test_tables.py), so at least
    # this flow's records, and no lag on this flow's topic
    assert (health.flow, health.error) == ("A->B", None)
    assert health.records >= PER_ROUND
    assert topic_lags(config, flow["name"]) == [0, 0, 0]
    translated = {  # what `mirror translate` prints
        (t.topic, t.partition): t.offset for t in translate_group(config, flow["group"], "A", "B")
    }
    topic = f"A.{flow['name']}"
    assert translated == {(topic, 0): 10, (topic, 1): 20, (topic, 2): 30}
    names = create_views(remote, config)
    assert "offset_translation" in names
    sql = remote.sql(f"SELECT * FROM offset_translation WHERE group_id = '{flow['group']}'")
    assert {(r["topic"], r["partition"]): r["offset"] for r in sql.collect()} == translated
    beats = remote.sql("SELECT * FROM heartbeat_freshness WHERE source = 'A' AND target = 'B'")
    assert beats.collect()[0]["heartbeats"] >= 1


def test_the_continuous_shape_runs_on_a_connect_session(remote, brokers, flow):
    """Databricks shared clusters are Spark Connect too, with every trigger. The driver cannot
    see a stopped query's copy tasks end there: the run fences their producers, and records
    produced after it returned stay uncopied although the task lives on (KILL_TIMEOUT_S)."""
    _produce(brokers.source, flow["name"], "b")
    config = parse_config(flow["props"])
    run_flows(remote, config, duration_s=25, report=print)
    assert not remote.streams.active
    remote_topic = f"A.{flow['name']}"
    assert_exactly_once(brokers.source, flow["name"], brokers.target, remote_topic, 3)
    assert committed_count(brokers.target, remote_topic, 3) == 2 * PER_ROUND
    _produce(brokers.source, flow["name"], "c")
    deadline = time.monotonic() + 10  # the task copied such records within a second
    while time.monotonic() < deadline:
        assert committed_count(brokers.target, remote_topic, 3) == 2 * PER_ROUND
        time.sleep(0.5)


def _job_tasks(job: str, values: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(task name, arguments) of a bundle job's tasks in order, job parameters filled in."""
    bundle = yaml.safe_load((REPO / "databricks.yml").read_text())
    tasks = []
    for task in bundle["resources"]["jobs"][job]["tasks"]:
        python_task = task["spark_python_task"]
        args = [
            re.sub(r"\{\{job\.parameters\.(\w+)\}\}", lambda m: values[m.group(1)], arg)
            for arg in python_task["parameters"]
        ]
        tasks.append((Path(python_task["python_file"]).stem, args))
    return tasks


def test_the_bundle_serverless_job_runs_through_connect(remote, brokers, flow, tmp_path):
    """mirror_catch_up's tasks (serverless: environment_key, no cluster) and the maintenance
    job's, with their arguments from databricks.yml, through the Connect session."""
    config_path = write_properties(tmp_path / "mm2.properties", flow["props"])
    _produce(brokers.source, flow["name"], "d")
    values = {
        "config_path": str(config_path),
        "tables_schema": "",
        "state_dir": flow["props"]["mirror.state.dir"],
        "flows": "",
        "retention_days": "30",
    }
    tasks = _job_tasks("mirror_catch_up", values)
    assert [name for name, _ in tasks] == ["replication", "companions", "materialization"]
    for name, args in [*tasks, *_job_tasks("mirror_maintenance", values)]:
        run_task(name, args, spark=remote, report=print)
    assert_exactly_once(brokers.source, flow["name"], brokers.target, f"A.{flow['name']}", 3)
    config = parse_config(flow["props"])
    (health,) = flow_status(config, spark=remote)
    assert health.records >= 4 * PER_ROUND  # and heartbeats
    assert topic_lags(config, flow["name"]) == [0, 0, 0]
    assert not remote.streams.active


def test_serverless_refuses_what_it_cannot_host_before_anything_starts(
    remote, flow, tmp_path, monkeypatch
):
    props = {**flow["props"], "mirror.state.dir": str(tmp_path / "untouched")}
    config = parse_config(props)  # parsed off Databricks: a local state dir is refused there
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", SERVERLESS)
    with pytest.raises(ConfigError) as refused:
        run_flows(remote, config, duration_s=5, report=print)
    assert "the continuous shape needs classic job compute" in str(refused.value)
    assert "on serverless use the catch-up job" in str(refused.value)
    port = free_port(set())
    with pytest.raises(ConfigError) as refused:
        run_flows(remote, config, once=True, metrics_port=port, report=print)
    assert f"--metrics-port = {port}" in str(refused.value)
    assert "the Prometheus endpoint needs classic job compute" in str(refused.value)
    assert not (tmp_path / "untouched").exists() and not remote.streams.active
    # the bundle's continuous job (a job cluster) on serverless: refused the same way
    values = {"config_path": "", "tables_schema": "", "state_dir": "/Volumes/main/mirror/state"}
    values["config_path"] = str(write_properties(tmp_path / "mm2.properties", props))
    values["flows"] = ""
    (name, args), *_ = _job_tasks("mirror_replication", values)
    with pytest.raises(ConfigError, match="continuous shape needs classic job compute"):
        run_task(name, args, spark=remote)


def test_a_static_setting_on_a_connect_session_is_refused(server):
    with pytest.raises(ConfigError) as refused:
        connect_session(server.url, **{"spark.driver.memory": "2g"})
    assert "spark.driver.memory = '2g'" in str(refused.value)
    assert "set it where the server starts" in str(refused.value)
    session = connect_session(server.url, **{"spark.sql.session.timeZone": "Europe/Paris"})
    assert session.conf.get("spark.sql.session.timeZone") == "Europe/Paris"
    session.conf.set("spark.sql.session.timeZone", "UTC")
