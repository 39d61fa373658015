"""Every notebook executed headless by nbval against two fresh brokers (Apache Kafka by default,
tansu under ``MIRROR_TEST_BROKER=tansu``).

Parameters reach the notebooks as ``MIRROR_<NAME>`` environment variables (the kernel inherits
the pytest subprocess's environment). ``--nbval-lax`` runs every cell (an exception fails it) and
compares the outputs of cells tagged ``nbval-check-output`` with the ones stored in the notebook.
Afterwards the test checks what the notebooks did: the saved config, the replicated records, the
committed failover offsets.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirror_lib.config.parse import load_config
from mirror_lib.replication.migration.failover import translate_group
from mirror_lib.testing import kafka_io
from mirror_lib.testing.clusters import start_clusters
from mirror_lib.testing.connect_server import start_connect_server

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
TOPICS = {"orders": 3, "payments": 2}
GROUP = "nb-orders-app"
PER_PARTITION = 40
NOTEBOOKS_UNDER_CONNECT = ["01_configure_flows.ipynb", "02_run_replication.ipynb"]

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    started = start_clusters(["nb-a", "nb-b"], tmp_path_factory.mktemp("nb-brokers"))
    try:
        yield started.bootstraps["nb-a"], started.bootstraps["nb-b"]
    finally:
        started.stop()


def _workload(source: str) -> None:
    for topic, partitions in TOPICS.items():
        kafka_io.create_topic(source, topic, partitions)
        kafka_io.produce_exact(
            source,
            topic,
            [
                {"key": f"k{i}", "value": f"{topic}-{i}", "partition": i % partitions}
                for i in range(PER_PARTITION * partitions)
            ],
        )
    consumer = Consumer({"bootstrap.servers": source, "group.id": GROUP})
    consumer.commit(
        offsets=[TopicPartition("orders", p, 10 + p) for p in range(TOPICS["orders"])],
        asynchronous=False,
    )
    consumer.close()


def _committed(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    tps = [TopicPartition(topic, p) for p in range(TOPICS["orders"])]
    offsets = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
    consumer.close()
    return offsets


def _nbval(notebooks: list[Path], cwd: Path, env: dict[str, str]) -> str:
    """Run notebooks with nbval in a subprocess; returns the output (asserts success)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "--nbval-current-env",
            "--nbval-cell-timeout=300",
            "-p",
            "no:cacheprovider",
            "-q",
            *map(str, notebooks),
        ],
        cwd=cwd,  # relative defaults (./mirror-state) land in tmp_path, not the repo
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    lines = [line for nb in notebooks for line in nb.read_text().splitlines()]
    cells = sum(1 for line in lines if '"cell_type": "code"' in line)
    assert f"{cells} passed" in output, output[-3000:]
    return output


def _pyspark_minor() -> tuple[int, int]:
    import pyspark

    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


def _main_pyspark() -> bool:
    """Whether this is the pyspark that constraints.txt pins: the main virtualenv's, whose full
    notebook test runs notebook 02 too."""
    pinned = re.search(r"^pyspark==(\d+)\.(\d+)\.", (REPO / "constraints.txt").read_text(), re.M)
    return pinned is not None and _pyspark_minor() == (int(pinned[1]), int(pinned[2]))


@pytest.mark.spark40
@pytest.mark.skipif(
    _main_pyspark(), reason="the full notebook test runs notebook 02 on this pyspark"
)
def test_the_replication_notebook_runs_on_this_pyspark(tmp_path):
    """Notebook 02 alone, for the tiers of other pysparks (make test-spark40, test-spark43):
    replicates, shows status."""
    started = start_clusters(["nb40-a", "nb40-b"], tmp_path / "brokers")
    try:
        source, target = started.bootstraps["nb40-a"], started.bootstraps["nb40-b"]
        _workload(source)
        config_path = tmp_path / "mm2.properties"
        props = {
            "clusters": "A, B",
            "A.bootstrap.servers": source,
            "B.bootstrap.servers": target,
            "A->B.enabled": "true",
            "A->B.topics": "orders, payments",
            "A->B.groups": "nb-.*",
            "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "mirror.state.dir": str(tmp_path / "state"),
        }
        config_path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
        env = {**os.environ, "PYTHONPATH": str(REPO), "MIRROR_CONFIG_PATH": str(config_path)}
        env["MIRROR_MODE"] = "once"
        env["MIRROR_DURATION_SECONDS"] = "300"  # the catch-up's bound (60 s) on a busy machine
        _nbval([REPO / "notebooks" / "02_run_replication.ipynb"], tmp_path, env)
        for topic, partitions in TOPICS.items():
            assert len(kafka_io.consume_all(target, f"A.{topic}")) == PER_PARTITION * partitions
    finally:
        started.stop()


def test_the_notebooks_run_headless_and_do_their_job(clusters, tmp_path):
    source, target = clusters
    _workload(source)
    config_path = tmp_path / "conf" / "mm2.properties"
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(REPO),
        MIRROR_SOURCE_BOOTSTRAP=source,
        MIRROR_TARGET_BOOTSTRAP=target,
        MIRROR_TOPICS="orders, payments",
        MIRROR_GROUPS="nb-.*",
        MIRROR_REPLICATION_FACTOR="1",
        MIRROR_STATE_DIR=str(tmp_path / "state"),
        MIRROR_CONFIG_PATH=str(config_path),
        MIRROR_MODE="once",
        MIRROR_GROUP=GROUP,
        MIRROR_APPLY="yes",
        MIRROR_CONFIRM_GROUP=GROUP,
    )
    _nbval(NOTEBOOKS, tmp_path, env)

    config = load_config(config_path)  # 01 saved a config the library reads back
    assert [f.name for f in config.enabled_flows()] == ["A->B"]
    for topic, partitions in TOPICS.items():  # 02 replicated every record
        copied = kafka_io.consume_all(target, f"A.{topic}")
        assert len(copied) == PER_PARTITION * partitions
    translated = {o.partition: o.offset for o in translate_group(config, GROUP, "A", "B")}
    assert translated == {p: 10 + p for p in range(TOPICS["orders"])}
    assert _committed(target, "A.orders") == translated  # 03 applied the failover

    # 03 without a group says what to set, and changes nothing
    env.update(MIRROR_GROUP="", MIRROR_APPLY="no", MIRROR_CONFIRM_GROUP="")
    _nbval([REPO / "notebooks" / "03_failover.ipynb"], tmp_path, env)  # every cell passes


def test_notebooks_01_and_02_run_under_spark_connect(tmp_path):
    """As on shared or serverless compute: the kernel has no JVM; ``get_spark()`` connects to
    ``SPARK_REMOTE``, a local Spark Connect server."""
    started = start_clusters(["nbc-a", "nbc-b"], tmp_path / "brokers")
    server = None
    try:
        server = start_connect_server(tmp_path / "connect")
        source, target = started.bootstraps["nbc-a"], started.bootstraps["nbc-b"]
        _workload(source)
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ)
        env.update(
            PYTHONPATH=path,
            SPARK_REMOTE=server.url,
            MIRROR_SOURCE_BOOTSTRAP=source,
            MIRROR_TARGET_BOOTSTRAP=target,
            MIRROR_TOPICS="orders, payments",
            MIRROR_GROUPS="nb-.*",
            MIRROR_REPLICATION_FACTOR="1",
            MIRROR_STATE_DIR=str(tmp_path / "state"),
            MIRROR_CONFIG_PATH=str(tmp_path / "conf" / "mm2.properties"),
            MIRROR_MODE="once",
        )
        _nbval([REPO / "notebooks" / n for n in NOTEBOOKS_UNDER_CONNECT], tmp_path, env)
        for topic, partitions in TOPICS.items():
            assert len(kafka_io.consume_all(target, f"A.{topic}")) == PER_PARTITION * partitions
        # 02's replication query ran on the server, not in a JVM of the kernel's own
        assert "Starting mirror-replication-A->B" in server.log_path.read_text()
    finally:
        if server is not None:
            server.stop()
        started.stop()


def test_every_notebook_follows_the_pattern():
    """widgets -> config -> one library call -> display: a parameters cell, no dbutils below it."""
    import nbformat

    assert [nb.name for nb in NOTEBOOKS] == [
        "01_configure_flows.ipynb",
        "02_run_replication.ipynb",
        "03_failover.ipynb",
        "04_latency_dashboard.ipynb",
        "05_cutover.ipynb",
    ]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        # first the Databricks install cell (a no-op elsewhere), then the parameters
        assert "install" in code[0].metadata.get("tags", []), path.name
        assert "%pip install" in code[0].source, path.name
        assert "parameters" in code[1].metadata.get("tags", []), path.name
        assert "Widgets(" in code[1].source, path.name
        for cell in code:  # golden outputs only where they are compared
            checked = "nbval-check-output" in cell.metadata.get("tags", [])
            assert bool(cell.get("outputs")) == checked, f"{path.name}: {cell.source[:60]}"
            # nbval reads the tag: no test marker in what a user reads (issue 55)
            assert "NBVAL" not in cell.source, f"{path.name}: {cell.source[:60]}"
        assert not any("dbutils." in c.source for c in code[1:]), path.name
    # one task per notebook: a group's failover (03) and a flow's cutover (05) apart (issue 55)
    params = {p.name: nbformat.read(p, as_version=4).cells[2].source for p in NOTEBOOKS}
    assert (
        '"group"' in params["03_failover.ipynb"] and "cutover_" not in params["03_failover.ipynb"]
    )
    assert (
        '"cutover_step"' in params["05_cutover.ipynb"]
        and '"group"' not in params["05_cutover.ipynb"]
    )
