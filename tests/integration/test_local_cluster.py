"""Separate executors: `mirror run` on Spark's ``local-cluster[2,1,1024]`` master, chosen with
``mirror.spark.master``: one driver JVM and two executor JVMs, each with its own Python workers
and working folder, as on a cluster. The runs start from this checkout without PYTHONPATH, so
the executors' workers find this mirror_lib only because the session tells them where it is.

What Spark does when an executor JVM is SIGKILLed in the middle of a slice (the executors'
logs, ``$SPARK_HOME/work/app-*/<executor>/stderr``, show it): the driver logs ``Lost executor 0
... Command exited with code 137`` at once, and the killed executor's Python workers die with it
(pyspark's daemon sees its JVM gone and hangs up on them; in ``--once``, which runs no daemon,
the worker sees its parent change and exits: mirror_lib/spark/copy_task.py). The standalone
master inside the driver starts a new executor JVM on the worker that lost one, within about
3 s, and the task's next attempt (``task 1.1``) runs there some 6 s after the loss; the
surviving executor keeps its one core busy with its own slot until the slice ends, so the retry
does not wait for it. A cluster master allows ``spark.task.maxFailures`` = 4 attempts
(``local[N]`` allows one). The new attempt copies the same slot with the same transactional id,
which fences the killed attempt's open transaction (the broker aborts it), and continues from
the delivery ledger. The slice does not fail; the query and the run go on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from mirror_lib.config.parse import load_config
from mirror_lib.replication.testhooks import HOLD_ENV, SECONDS_ENV, TOPIC_ENV
from mirror_lib.tables.delta_rs import read_table
from mirror_lib.tables.location import tables_root
from mirror_lib.testing.kafka_io import commit_group, create_topic, produce_exact
from tests.helpers.exactly_once import assert_exactly_once, committed_count, wait_exactly_once
from tests.helpers.kafka_raw import aborted_records
from tests.helpers.mirror_cli import descendants, kill_group, start_mirror
from tests.helpers.waiting import keyed_records, process_alive, wait_for
from tests.integration.conftest import flow_properties, write_properties

pytestmark = pytest.mark.real_kafka  # transactions aborted under a killed task: tansu hides them

MASTER = "local-cluster[2,1,1024]"
PARTITIONS = 4
LIVE_RECORDS = 6000
HOLD_S = 120  # the held task is killed long before; the retry does not hold (the file exists)
REPO = Path(__file__).resolve().parents[2]


def checkout_env() -> dict[str, str]:
    """`mirror run` from a checkout, without PYTHONPATH: the driver imports this mirror_lib from
    its working folder, which the executors' Python workers do not start in."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@dataclass(frozen=True)
class Flow:
    """The module's flow A->B over the session brokers, on a local-cluster master."""

    name: str
    folder: Path
    config_path: Path
    source: str
    target: str

    def load(self, topic: str, records: int) -> None:
        create_topic(self.source, topic, PARTITIONS)
        produce_exact(
            self.source,
            topic,
            keyed_records(records, PARTITIONS),
            timeout_s=120,
        )


@pytest.fixture(scope="module")
def flow(brokers, tmp_path_factory: pytest.TempPathFactory) -> Flow:
    name = f"local-cluster-{uuid.uuid4().hex[:8]}"
    folder = tmp_path_factory.mktemp("local-cluster")
    props = flow_properties(
        brokers.source,
        brokers.target,
        folder / "state",
        topics=f"{name}-.*",
        groups=f"{name}-group",
        **{
            "mirror.spark.master": MASTER,
            "tasks.max": "2",
            # several transactions per partition: a held one is in the middle of the copy
            "mirror.commit.max.records": "200",
            "mirror.batch.duration.seconds": "20",
            "mirror.tables.enabled": "true",
            "emit.checkpoints.interval.seconds": "1",
            "emit.heartbeats.interval.seconds": "2",
            "sync.group.offsets.interval.seconds": "1",
            "refresh.topics.interval.seconds": "2",
        },
    )
    path = write_properties(folder / "mm2.properties", props)
    return Flow(name, folder, path, brokers.source, brokers.target)


def test_once_on_two_executors_with_one_killed_mid_slice(flow: Flow):
    """`--once` with two slots; the executor JVM whose copy task holds an open transaction is
    killed. In `--once` (no pyspark daemon) its Python worker is a child of that JVM and ends
    with it; the run ends well, every record exactly once."""
    topic = f"{flow.name}-once"
    flow.load(topic, 2000)
    held, out, err = (flow.folder / name for name in ("held-once", "once.out", "once.err"))
    env = {**checkout_env(), HOLD_ENV: str(held), TOPIC_ENV: f"A.{topic}", SECONDS_ENV: str(HOLD_S)}
    proc = start_mirror(
        flow.config_path, env, "--once", "--timeout", "300", log=out, err=err, cwd=REPO
    )
    worker = None
    try:
        worker, executor = held_task_executor(proc, held)
        os.kill(executor, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while running(worker):
            assert time.monotonic() < deadline, "the killed executor's Python worker lives on"
            time.sleep(0.2)
        assert proc.wait(400) == 0, err.read_text(errors="replace")[-3000:]
    finally:
        kill_group(proc)
        if worker is not None and running(worker):  # no longer in the run's process tree
            os.kill(worker, signal.SIGKILL)
    assert "A->B: caught up with" in out.read_text()
    assert_exactly_once(flow.source, topic, flow.target, f"A.{topic}", PARTITIONS)
    assert aborted_records(flow.target, f"A.{topic}", PARTITIONS) > 0, "no open transaction hit"


def held_task_executor(proc: subprocess.Popen, held: Path) -> tuple[int, int]:
    """The process ids of the copy task that holds its transaction open and of its executor JVM
    (one of two, found in the run's process tree)."""
    pid = int(
        wait_for(
            lambda: held.exists() and held.read_text().strip(), 300, "the hold", process_alive(proc)
        )
    )
    executors = executor_jvms(proc.pid)
    assert len(executors) == 2, f"expected two executor JVMs, found {executors}"
    (executor,) = [e for e in executors if pid in descendants(e)]
    return pid, executor


def running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def executor_jvms(run_pid: int) -> list[int]:
    """The executor JVMs in the run's process tree (its driver JVM starts them)."""
    return [pid for pid in descendants(run_pid) if b"CoarseGrainedExecutorBackend" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.fixture(scope="module")
def live(flow: Flow) -> Iterator[tuple[subprocess.Popen, str, Path]]:
    """A continuous run (checkpoints, heartbeats, tables) over a loaded topic; the first copy
    task to commit records of that topic holds its transaction open: one to kill its executor in."""
    topic = f"{flow.name}-live"
    flow.load(topic, LIVE_RECORDS)
    offsets = [TopicPartition(topic, p, 100) for p in range(PARTITIONS)]
    commit_group(flow.source, f"{flow.name}-group", offsets)  # for checkpoints to translate
    held = flow.folder / "held"
    env = {**checkout_env(), HOLD_ENV: str(held), TOPIC_ENV: f"A.{topic}", SECONDS_ENV: str(HOLD_S)}
    log = flow.folder / "live.log"
    proc = start_mirror(flow.config_path, env, "--duration", "900", log=log, cwd=REPO)
    try:
        yield proc, topic, held
    finally:
        kill_group(proc)


def test_executor_killed_mid_slice_then_every_record_arrives_exactly_once(flow: Flow, live):
    proc, topic, held = live
    remote = f"A.{topic}"
    _worker, victim = held_task_executor(proc, held)
    assert committed_count(flow.target, remote, PARTITIONS) < LIVE_RECORDS, "not mid-copy"
    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: victim not in (now := executor_jvms(proc.pid)) and len(now) == 2,
        120,
        "an executor JVM in place of the killed one",
        process_alive(proc),
    )
    wait_exactly_once(
        flow.source, topic, flow.target, remote, PARTITIONS, 300,
        alive=lambda: proc.poll() is None or pytest.fail("the run ended after the executor loss"),
    )  # fmt: skip
    assert aborted_records(flow.target, remote, PARTITIONS) > 0, (
        "the kill did not land inside a transaction"
    )
    assert proc.poll() is None, "the run did not survive the executor loss"


def test_continuous_run_lands_offset_syncs_heartbeats_and_checkpoints_in_the_tables(
    flow: Flow, live
):
    proc, topic, _held = live
    config = load_config(flow.config_path)
    root = tables_root(config)

    def landed() -> bool:
        syncs = read_table(root, "offset_syncs").to_pylist()
        beats = read_table(root, "heartbeats").to_pylist()
        checkpoints = read_table(root, "checkpoints").to_pylist()
        return (
            any(r["remote_topic"] == f"A.{topic}" for r in syncs)
            and any((r["source"], r["target"]) == ("A", "B") for r in beats)
            and any(r["group_id"] == f"{flow.name}-group" for r in checkpoints)
        )

    wait_for(
        landed, 240, "offset syncs, heartbeats and checkpoints in the tables", process_alive(proc)
    )
