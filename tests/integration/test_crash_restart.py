"""Kill -9 the whole `mirror run` process group mid-copy, restart: every record exactly once.

Exactly once is checked on the committed view computed by the raw reader and, on Apache Kafka,
on the broker's read_committed view too (they must agree). Kills land inside an open transaction
for sure through the test hook ``MIRROR_TEST_HOLD_BEFORE_COMMIT``
(mirror_lib/replication/testhooks.py). Each test runs with one slot and with four.

A hold before a copy task's second commit is a kill mid-copy only if that task's partitions need
more than one transaction. A transaction ends between two ``consume()`` calls of the task, each
taking up to ``CONSUME_BATCH`` records, so each partition holds more than that: with four slots
(one partition each) 6,000 records a partition went out in each task's first transaction, and
the only second one was a record of the session's ``heartbeats`` topic, held after every record
of the test's topic was committed. So only transactions that carry the test's topic count
(``MIRROR_TEST_HOLD_TOPIC``), and the run replicates heartbeats as it would anyway.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from mirror_lib.replication.copy.source_reader import CONSUME_BATCH
from mirror_lib.replication.testhooks import AFTER_ENV, HOLD_ENV, TOPIC_ENV
from mirror_lib.testing.kafka_io import create_topic, produce_exact
from tests.helpers.exactly_once import assert_exactly_once, committed_count
from tests.helpers.faults import ONE_SLOT
from tests.helpers.kafka_raw import aborted_records
from tests.helpers.mirror_cli import kill_group, run_mirror, start_mirror
from tests.helpers.waiting import keyed_records, process_alive, wait_for
from tests.integration.conftest import flow_properties, write_properties

PARTITIONS = 4
TOTAL = PARTITIONS * (CONSUME_BATCH + 2_000)  # two transactions at least in every partition


def loaded_flow(brokers, tmp_path: Path, topic: str, slots: int) -> Path:
    """``topic`` on the source with TOTAL records, and the config of a flow that copies it in
    transactions a kill or a Ctrl-C can land inside."""
    create_topic(brokers.source, topic, PARTITIONS)
    produce_exact(
        brokers.source,
        topic,
        keyed_records(TOTAL, PARTITIONS),
        # one record per produce request only where tansu needs it: 48k of them take 25 s
        config={"batch.num.messages": 10_000, "linger.ms": 20} if brokers.real_kafka else None,
        timeout_s=240,  # 48k records into a broker on a busy machine
    )
    props = flow_properties(
        brokers.source,
        brokers.target,
        tmp_path / "state",
        topics=topic,
        **{
            # a transaction ends after every consume batch: each task commits before it holds
            "mirror.commit.max.records": "50",
            "tasks.max": str(slots),
        },
    )
    return write_properties(tmp_path / "mm2.properties", props)


@pytest.mark.parametrize("slots", [ONE_SLOT, 4])
def test_sigkill_at_several_points_then_restart_delivers_exactly_once(
    brokers, tmp_path, unique_name, subprocess_env, slots
):
    config = loaded_flow(brokers, tmp_path, unique_name, slots)
    remote = f"A.{unique_name}"
    seen = []
    # (hold before commit number n of the copy task, or None: kill that many seconds after copying
    # began): a kill inside the second transaction, one inside the first transaction after a
    # restart that aborted one, then a kill at a varied moment.
    rounds = ((1, None), (0, None), (None, 0.5))
    for round_no, (hold_after, kill_after) in enumerate(rounds):
        env = dict(subprocess_env)
        held = Path(tmp_path / f"held-{round_no}")
        if hold_after is not None:
            env[HOLD_ENV], env[AFTER_ENV] = str(held), str(hold_after)
            env[TOPIC_ENV] = remote  # a heartbeats-only transaction neither counts nor holds
        start = committed_count(brokers.target, remote, PARTITIONS)
        proc = start_mirror(config, env, "--duration", "600", log=tmp_path / f"run-{round_no}.log")
        if hold_after is not None:  # a transaction is open and its records are written
            wait_for(
                held.exists, 300, f"the hold before commit (round {round_no})", process_alive(proc)
            )
        else:
            wait_for(
                lambda start=start: (
                    start < committed_count(brokers.target, remote, PARTITIONS) or start >= TOTAL
                ),
                300,
                f"progress in round {round_no}",
                process_alive(proc),
            )
            time.sleep(kill_after)  # a varied moment after copying began
        kill_group(proc)
        seen.append(committed_count(brokers.target, remote, PARTITIONS))
    assert 0 < seen[0] == seen[1] < TOTAL, f"the held kills must land mid-copy, saw {seen}"
    final = run_mirror(config, subprocess_env, "--once", "--timeout", "300", timeout_s=400)
    assert final.returncode == 0, final.stderr[-3000:]
    assert_exactly_once(brokers.source, unique_name, brokers.target, remote, PARTITIONS)
    # The held transactions were open at the kill and aborted by the restart's fencing.
    assert aborted_records(brokers.target, remote, PARTITIONS) > 0, (
        "no kill landed inside a transaction"
    )


@pytest.mark.parametrize("slots", [ONE_SLOT, 4])
def test_ctrl_c_inside_a_transaction_stops_quietly_and_delivers_exactly_once(
    brokers, tmp_path, unique_name, subprocess_env, slots
):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while a copy task holds
    an open transaction: the run stops its queries itself, exits 130 without Spark's "job
    cancelled" errors, and a following ``--once`` delivers every record exactly once."""
    config = loaded_flow(brokers, tmp_path, unique_name, slots)
    remote = f"A.{unique_name}"
    held, log = tmp_path / "held", tmp_path / "run.log"
    env = {**subprocess_env, HOLD_ENV: str(held), AFTER_ENV: "1", TOPIC_ENV: remote}
    proc = start_mirror(config, env, "--duration", "600", log=log)
    try:
        wait_for(held.exists, 300, "the hold before the second commit", process_alive(proc))
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(120) == 130
    finally:
        if proc.poll() is None:
            kill_group(proc)
    output = log.read_text(errors="replace")
    assert "interrupted; everything started was stopped" in output
    noise = [
        line
        for line in output.splitlines()
        if " ERROR " in line or "SPARK_JOB_CANCELLED" in line or "Traceback" in line
    ]
    assert not noise, "Ctrl-C logged errors:\n" + "\n".join(noise[:20])
    final = run_mirror(config, subprocess_env, "--once", "--timeout", "300", timeout_s=400)
    assert final.returncode == 0, final.stderr[-3000:]
    assert_exactly_once(brokers.source, unique_name, brokers.target, remote, PARTITIONS)
    assert aborted_records(brokers.target, remote, PARTITIONS) > 0, (
        "Ctrl-C did not land inside a transaction"
    )
