"""Every `mirror` command that talks to Kafka, with a cluster down: one line naming the cluster,
its role, its bootstrap servers and what was tried, exit 1, within about 10 s, and none of
librdkafka's own lines unless --verbose.

Cluster B is a real Apache Kafka cluster that this module starts and then stops (its port is
closed, as after a crash); cluster A is the session's source.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirror_lib.testing.kafka_broker import start_kafka, stop_kafka
from tests.helpers.mirror_cli import run_mirror
from tests.integration.conftest import flow_properties, write_properties

pytestmark = pytest.mark.real_kafka
#: A command's own bound (10 s per check, every cluster asked at once) plus a busy machine's
#: start-up of the interpreter; the message itself says the 10 s.
BOUND_S = 40
#: What librdkafka prints itself (``%3|...|FAIL|rdkafka#...``) or through a Python logger.
LIBRDKAFKA = ("rdkafka#", "|FAIL|", "FAIL [")

COMMANDS = {
    "translate": ["translate", "--group", "g1", "--source", "A", "--target", "B"],
    "translate-offsets": [
        "translate",
        "--offsets-json",
        '{"t": {"0": 5}}',
        "--source",
        "A",
        "--target",
        "B",
    ],
    "failover": ["failover", "--group", "g1", "--source", "A", "--target", "B"],
    "failover-apply": ["failover", "--group", "g1", "--source", "A", "--target", "B", "--apply"],
    "verify": ["verify", "--flow", "A->B"],
    "cutover": ["cutover", "--flow", "A->B"],
    "hand-back": ["hand-back", "--flow", "A->B"],
}


@pytest.fixture(scope="module")
def stopped_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of a Kafka cluster that answered once and is now stopped."""
    (broker,) = start_kafka(["B"], tmp_path_factory.mktemp("stopped-b"))
    servers = broker.bootstrap_servers
    stop_kafka([broker])
    yield servers


@pytest.fixture
def config_b_down(brokers, stopped_b: str, tmp_path: Path) -> Path:
    props = flow_properties(brokers.source, stopped_b, tmp_path / "state")
    return write_properties(tmp_path / "mm2.properties", props)


def mirror(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return out, time.monotonic() - started


def assert_one_line_naming(err: str, alias: str, role: str, servers: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err[-3000:]
    (line,) = lines
    assert line.startswith(f"mirror: failed: cannot reach cluster {alias} ({role}) at ")
    assert f"{alias}.bootstrap.servers = {servers}: no broker answered" in line
    assert "within 10s (tried " in line and "Connection refused" in line
    assert not any(mark in line for mark in LIBRDKAFKA)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_with_its_target_down_fails_in_one_line(
    command, config_b_down, stopped_b, subprocess_env
):
    name, *options = COMMANDS[command]
    out, elapsed = mirror(name, str(config_b_down), *options, env=subprocess_env)
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_naming(out.stderr, "B", "target of A->B", stopped_b)
    assert elapsed < BOUND_S, f"{command} took {elapsed:.0f}s"
    assert out.stdout == ""


def test_run_with_its_target_down_starts_nothing_and_says_it_in_one_line(
    config_b_down, stopped_b, subprocess_env
):
    started = time.monotonic()
    out = run_mirror(config_b_down, subprocess_env, "--once", timeout_s=120)
    elapsed = time.monotonic() - started
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_naming(out.stderr, "B", "target of A->B", stopped_b)
    assert elapsed < BOUND_S


def test_verbose_shows_librdkafkas_own_lines(config_b_down, stopped_b, subprocess_env):
    out, _ = mirror(
        "translate",
        str(config_b_down),
        "--group",
        "g1",
        "--source",
        "A",
        "--target",
        "B",
        "--verbose",
        env=subprocess_env,
    )
    assert out.returncode == 1
    shown = [line for line in out.stderr.splitlines() if line.startswith("librdkafka: FAIL ")]
    assert shown, out.stderr[-3000:]
    assert out.stderr.splitlines()[-1].startswith("mirror: failed: cannot reach cluster B")


def test_translate_reads_the_target_only_so_it_answers_with_the_source_down(
    brokers, stopped_b, tmp_path, subprocess_env
):
    """A failover's first question, while A is gone: B's checkpoints are all it needs."""
    props = flow_properties(stopped_b, brokers.target, tmp_path / "state")
    config = write_properties(tmp_path / "mm2.properties", props)
    out, _ = mirror(
        "translate",
        str(config),
        "--group",
        "nobody",
        "--source",
        "A",
        "--target",
        "B",
        "--json",
        env=subprocess_env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[]"
    assert not any(mark in out.stderr for mark in LIBRDKAFKA), out.stderr[-3000:]
