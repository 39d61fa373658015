"""Fixtures for integration tests: a local SparkSession and flow configs over the test brokers."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mirror_lib.config.model import MirrorConfig
from mirror_lib.config.parse import parse_config
from mirror_lib.testing.clusters import FLOW_SETTINGS, broker_kind


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """One local[2] session for the whole run (start-up costs ~6 s); tables a test saves go to
    a temporary warehouse, not to ./spark-warehouse."""
    from mirror_lib.spark.session import local_spark_session

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = local_spark_session("mirror-tests", **{"spark.sql.warehouse.dir": str(warehouse)})
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(autouse=True)
def no_query_left_behind(request: pytest.FixtureRequest):
    """A test that fails while its queries run must not fail the next ones (query names are
    unique per session): stop whatever the test left active."""
    yield
    if "spark" in request.fixturenames:
        session = request.getfixturevalue("spark")
        for query in session.streams.active:
            query.stop()


def flow_properties(source: str, target: str, state_dir: Path, **extra: str) -> dict[str, str]:
    """mm2.properties of a one-way A->B flow between two bootstrap strings."""
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": source,
        "B.bootstrap.servers": target,
        "A->B.enabled": "true",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "mirror.state.dir": str(state_dir),
        "mirror.trigger.interval.seconds": "0.5",
        # one slot (the product's default is 2): tests of several slots say so, and on tansu a
        # kill with several slots can lose a ledger entry (test_tansu_limits.py)
        "tasks.max": "1",
        "mirror.tables.enabled": "false",  # materialization has its own tests
        **FLOW_SETTINGS[broker_kind()],
    }
    props.update(extra)
    return props


@pytest.fixture
def make_config(brokers, tmp_path) -> Callable[..., MirrorConfig]:
    """Build a config for A->B over the session brokers; keyword args add/override keys."""

    def make(**extra: str) -> MirrorConfig:
        return parse_config(
            flow_properties(brokers.source, brokers.target, tmp_path / "state", **extra)
        )

    return make


def write_properties(path: Path, props: dict[str, str]) -> Path:
    """Write props as an mm2.properties file."""
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return path


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """Environment for `mirror` subprocesses (same interpreter and package)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def metrics_events(bootstrap: str, topic: str = "mm2-metrics.A.internal") -> list[dict]:
    """Decodable events of a metrics topic (other tests write corrupt records on purpose)."""
    import json

    from mirror_lib.testing.kafka_io import consume_all

    out = []
    for record in consume_all(bootstrap, topic):
        try:
            out.append(json.loads(record.value))
        except (ValueError, TypeError):
            continue
    return out
