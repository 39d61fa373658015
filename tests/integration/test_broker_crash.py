"""A broker SIGKILLed in the middle of a slice and restarted on its log directory: the run goes on
(or ``--once`` fails clearly within ``mirror.outage.max.seconds``), and every record arrives
exactly once and in order.

Apache Kafka only: the embedded broker keeps everything in memory, so a crash cannot be tested on
it. The module starts its own two clusters (the session's are shared with other tests).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirror_lib.testing.kafka_broker import KafkaBroker, start_kafka, stop_kafka
from mirror_lib.testing.kafka_io import create_topic, produce_exact
from tests.helpers.exactly_once import assert_exactly_once, committed_count
from tests.helpers.mirror_cli import kill_group, run_mirror, start_mirror
from tests.helpers.waiting import process_alive, wait_for
from tests.integration.conftest import flow_properties, write_properties

pytestmark = pytest.mark.real_kafka

PARTITIONS = 4
OUTAGE_MAX_S = 120


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, KafkaBroker]]:
    brokers = start_kafka(["A", "B"], tmp_path_factory.mktemp("crash-kafka"))
    try:
        yield {b.alias: b for b in brokers}
    finally:
        stop_kafka(brokers)


def produce(broker: KafkaBroker, topic: str, start: int, n: int) -> None:
    produce_exact(
        broker.bootstrap_servers,
        topic,
        [
            {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % PARTITIONS}
            for i in range(start, start + n)
        ],
        timeout_s=120,
    )


def config(clusters: dict[str, KafkaBroker], tmp_path: Path, topic: str, slots: int) -> Path:
    props = flow_properties(
        clusters["A"].bootstrap_servers,
        clusters["B"].bootstrap_servers,
        tmp_path / "state",
        topics=topic,
        **{
            "tasks.max": str(slots),
            "mirror.commit.max.records": "50",  # many transactions: a kill lands inside one
            "mirror.outage.max.seconds": str(OUTAGE_MAX_S),
        },
    )
    return write_properties(tmp_path / "mm2.properties", props)


def tail(log: Path) -> str:
    try:
        return log.read_text(errors="replace")[-3000:]
    except OSError:
        return "<no output>"


def first_copies(target: KafkaBroker, remote: str, proc: subprocess.Popen, log: Path) -> None:
    """Wait until the run has committed records on the target: it copies now."""
    wait_for(
        lambda: committed_count(target.bootstrap_servers, remote, PARTITIONS) > 0,
        240,
        "the first copied records",
        process_alive(proc, detail=lambda: tail(log)),
        detail=lambda: tail(log),
    )


def crash_and_restart(broker: KafkaBroker, down_s: float) -> None:
    """SIGKILL the broker, keep it down ``down_s``, start it again on the same log directory."""
    broker.kill()
    time.sleep(down_s)  # the outage itself: how long the cluster is gone
    broker.start()


@pytest.mark.parametrize(
    ("victim", "slots"), [("B", 4), ("A", 4), pytest.param("B", 1, marks=pytest.mark.fault_matrix)]
)
def test_broker_sigkill_mid_slice_run_goes_on_exactly_once(
    clusters, tmp_path, unique_name, subprocess_env, victim, slots
):
    topic, remote = unique_name, f"A.{unique_name}"
    source, target = clusters["A"], clusters["B"]
    create_topic(source.bootstrap_servers, topic, PARTITIONS)
    produce(source, topic, 0, 6000)
    log = tmp_path / "run.log"
    proc = start_mirror(config(clusters, tmp_path, topic, slots), subprocess_env, log=log)
    try:
        first_copies(target, remote, proc, log)
        crash_and_restart(clusters[victim], down_s=3)
        assert clusters[victim].is_running()
        produce(source, topic, 6000, 2000)
        wait_for(
            lambda: committed_count(target.bootstrap_servers, remote, PARTITIONS) >= 8000,
            OUTAGE_MAX_S + 120,
            "all 8000 records on B after the crash",
            process_alive(proc, detail=lambda: tail(log)),
            detail=lambda: tail(log),
        )
        assert proc.poll() is None, f"the run ended after the crash of {victim}: {tail(log)}"
    finally:
        kill_group(proc)
    assert_exactly_once(
        source.bootstrap_servers, topic, target.bootstrap_servers, remote, PARTITIONS
    )


def test_broker_restart_during_once_ends_exactly_once(
    clusters, tmp_path, unique_name, subprocess_env
):
    """``--once`` with the target killed and restarted while it copies: it ends with exit 0 or
    fails clearly within its outage limit; a following ``--once`` completes the copy."""
    topic, remote = unique_name, f"A.{unique_name}"
    source, target = clusters["A"], clusters["B"]
    create_topic(source.bootstrap_servers, topic, PARTITIONS)
    produce(source, topic, 0, 20_000)
    path = config(clusters, tmp_path, topic, 4)
    log, err = tmp_path / "once.out", tmp_path / "once.err"
    proc = start_mirror(path, subprocess_env, "--once", log=log, err=err)
    try:
        first_copies(target, remote, proc, err)
        started = time.monotonic()
        target.restart()
        code = proc.wait(OUTAGE_MAX_S + 180)
        took = time.monotonic() - started
    finally:
        kill_group(proc)
    if code != 0:  # a clear failure within the outage limit, never a hang or a silent success
        assert code == 1, tail(err)
        assert took < OUTAGE_MAX_S + 120, f"--once failed only after {took:.0f}s"
        again = run_mirror(path, subprocess_env, "--once", "--timeout", "300", timeout_s=400)
        assert again.returncode == 0, again.stderr[-3000:]
    assert_exactly_once(
        source.bootstrap_servers, topic, target.bootstrap_servers, remote, PARTITIONS
    )
