"""Kill -9 the whole `mirror run` process group mid-copy, restart: every record exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

from confluent_kafka.admin import AdminClient

from mirror_lib.embedded import consume_all, create_topic, produce_exact
from tests.integration.conftest import flow_properties, write_properties

TOTAL = 24_000


def start_mirror(config_path, env, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "mirror_lib.cli", "run", str(config_path), *extra],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: JVM and Python workers die with it
    )


def kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def target_count(bootstrap: str, topic: str) -> int:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return len(consume_all(bootstrap, topic)) if topic in topics else 0


def test_sigkill_at_several_points_then_restart_delivers_exactly_once(
    brokers, tmp_path, unique_name, subprocess_env
):
    create_topic(brokers.source, unique_name, 4)
    produce_exact(
        brokers.source,
        unique_name,
        [
            {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 4}
            for i in range(TOTAL)
        ],
    )
    remote = f"A.{unique_name}"
    props = flow_properties(
        brokers.source,
        brokers.target,
        tmp_path / "state",
        topics=unique_name,
        **{"mirror.batch.max.records": "1500"},
    )
    config = write_properties(tmp_path / "mm2.properties", props)
    seen = []
    for kill_after in (0.3, 1.5, 0.1):
        proc = start_mirror(config, subprocess_env, "--duration", "600")
        deadline = time.monotonic() + 120
        start = target_count(brokers.target, remote)
        while target_count(brokers.target, remote) <= start and time.monotonic() < deadline:
            assert proc.poll() is None, "mirror run exited early"
            time.sleep(0.2)
        time.sleep(kill_after)
        kill_group(proc)
        seen.append(target_count(brokers.target, remote))
    assert 0 < seen[0] < TOTAL, f"the first kill must land mid-copy, saw {seen}"
    final = start_mirror(config, subprocess_env, "--once", "--timeout", "240")
    assert final.wait(300) == 0
    copied = consume_all(brokers.target, remote)
    counts = Counter(r.value for r in copied)
    assert len(copied) == TOTAL, f"{len(copied)} records after restarts (kills at {seen})"
    assert max(counts.values()) == 1, "a record was delivered twice"
    source = consume_all(brokers.source, unique_name)
    assert [(r.partition, r.key, r.value) for r in copied] == [
        (r.partition, r.key, r.value) for r in source
    ]


def test_unreachable_cluster_fails_fast_with_a_clear_message(brokers, tmp_path, subprocess_env):
    props = flow_properties(brokers.source, "127.0.0.1:1", tmp_path / "state")
    config = write_properties(tmp_path / "mm2.properties", props)
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "mirror_lib.cli", "run", str(config), "--once"],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert "cannot reach cluster B at B.bootstrap.servers=127.0.0.1:1" in out.stderr
    assert "nothing was started" in out.stderr
    assert time.monotonic() - started < 60
