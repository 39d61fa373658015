"""A continuous `mirror run` keeps going through outages of either cluster (TCP proxy faults).

One `mirror run` for each slot count (1 and 4), between two brokers that it reaches only through
loopback proxies; the tests produce and verify directly on the brokers' own ports. Each test
ends with every record exactly once (raw reader) and the run still alive.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mirror_lib.config.parse import load_config
from mirror_lib.replication.companions.supervise import current_outages
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.helpers import waiting
from tests.helpers.exactly_once import committed_count, wait_exactly_once
from tests.helpers.faults import ONE_SLOT
from tests.helpers.mirror_cli import kill_group, start_mirror
from tests.helpers.proxy import BLACKHOLE, OPEN, REFUSE, SLOW, TcpProxy, bootstrap, proxied_broker
from tests.integration.conftest import flow_properties, write_properties

OUTAGE_S = 60
PARTITIONS = 2


@dataclass
class Run:
    """The module's `mirror run` and its two clusters (direct ports and proxies)."""

    source: str  # direct bootstrap of A (tests produce here, also during an outage)
    target: str  # direct bootstrap of B
    proxy_a: TcpProxy
    proxy_b: TcpProxy
    proc: subprocess.Popen
    config: Path
    log: Path

    def assert_alive(self) -> None:
        assert self.proc.poll() is None, f"mirror run exited: {self.output()[-3000:]}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


# one slot: in `make fault-matrix` (the four slots hold every path one slot takes, and more)
@pytest.fixture(scope="module", params=[ONE_SLOT, 4], ids=["1-slot", "4-slots"])
def run(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Run]:
    if os.environ.get("MIRROR_TEST_EXTERNAL_CLUSTERS"):
        pytest.skip(
            "proxy fault tests run on brokers this run starts (not MIRROR_TEST_*_BOOTSTRAP)"
        )
    work = tmp_path_factory.mktemp("outages")
    with (
        proxied_broker("A", work / "a") as (broker_a, proxy_a),
        proxied_broker("B", work / "b") as (broker_b, proxy_b),
    ):
        props = flow_properties(
            bootstrap(proxy_a),
            bootstrap(proxy_b),
            work / "state",
            topics="outage_.*",
            **{"mirror.batch.max.records": "500", "tasks.max": str(request.param)},
        )
        config = write_properties(work / "mm2.properties", props)
        log = work / "mirror.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        proc = start_mirror(config, env, "--duration", "900", log=log)
        r = Run(broker_a.bootstrap_servers, broker_b.bootstrap_servers, proxy_a, proxy_b, proc,
                config, log)  # fmt: skip
        try:
            yield r
        finally:
            for proxy in (proxy_a, proxy_b):
                proxy.set_mode(OPEN)
            kill_group(proc)


def produce(bootstrap_servers: str, topic: str, start: int, n: int) -> None:
    produce_exact(
        bootstrap_servers,
        topic,
        [
            {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % PARTITIONS}
            for i in range(start, start + n)
        ],
    )


def wait_until(check, timeout_s: float, what: str, run: Run) -> None:
    """:func:`tests.helpers.waiting.wait_for` while ``run`` lives; its log tail on a timeout."""
    waiting.wait_for(
        check, timeout_s, what, run.assert_alive, poll_s=0.5,
        detail=lambda: f"log tail: {run.output()[-3000:]}",
    )  # fmt: skip


def replicated(run: Run, topic: str, n: int, timeout_s: float = 120) -> None:
    wait_until(
        lambda: committed_count(run.target, f"A.{topic}", PARTITIONS) >= n,
        timeout_s,
        f"{n} records of {topic} on B",
        run,
    )


def outage_events(run: Run) -> list[dict]:
    out = []
    for record in consume_all(run.target, "mm2-metrics.A.internal"):
        try:
            event = json.loads(record.value)
        except (TypeError, ValueError):
            continue
        if event.get("type", "").startswith("outage_"):
            out.append(event)
    return out


def hold_outage(run: Run, proxy: TcpProxy, mode: str, role: str, alias: str) -> None:
    """Keep ``proxy`` in ``mode`` for OUTAGE_S, and longer (up to 60 s more) until the run
    reports the outage in ``mirror status``: it notices when a client call times out, which on
    a busy machine can take most of a minute."""
    proxy.set_mode(mode)
    started = time.monotonic()
    config = load_config(run.config)
    noticed = False
    while time.monotonic() - started < OUTAGE_S or (
        not noticed and time.monotonic() - started < OUTAGE_S + 60
    ):
        run.assert_alive()
        waits = current_outages(config)
        noticed = noticed or any(o["cluster"] == alias and o["role"] == role for o in waits)
        time.sleep(1)
    proxy.set_mode(OPEN)
    assert noticed, f"no outage of {role} {alias} in mirror status; log: {run.output()[-3000:]}"


def check_events(run: Run, role: str, alias: str, since_ms: int) -> None:
    def both() -> bool:
        kinds = {
            e["type"]
            for e in outage_events(run)
            if e.get("cluster") == alias and e.get("role") == role and e["ts_ms"] >= since_ms
        }
        return kinds == {"outage_started", "outage_ended"}

    wait_until(both, 60, f"outage_started/outage_ended of {role} {alias}", run)


def test_run_survives_a_60s_target_outage_exactly_once(run: Run, unique_name: str) -> None:
    topic = f"outage_t_{unique_name}"
    create_topic(run.source, topic, PARTITIONS)
    produce(run.source, topic, 0, 400)
    replicated(run, topic, 400, timeout_s=180)  # includes the run's start-up
    since = int(time.time() * 1000)
    produce(run.source, topic, 400, 400)
    hold_outage(run, run.proxy_b, REFUSE, "target", "B")
    produce(run.source, topic, 800, 200)
    wait_exactly_once(
        run.source, topic, run.target, f"A.{topic}", PARTITIONS, 120, run.assert_alive
    )
    check_events(run, "target", "B", since)
    assert "waiting for target cluster B (bootstrap 127.0.0.1:" in run.output()
    run.assert_alive()


def test_run_survives_a_60s_source_outage_exactly_once(run: Run, unique_name: str) -> None:
    topic = f"outage_s_{unique_name}"
    create_topic(run.source, topic, PARTITIONS)
    produce(run.source, topic, 0, 300)
    replicated(run, topic, 300)
    since = int(time.time() * 1000)
    # Producers learn the proxy's address from Metadata too: write before the cut (the cut may
    # land while these are copied) and after it.
    produce(run.source, topic, 300, 500)
    hold_outage(run, run.proxy_a, BLACKHOLE, "source", "A")
    produce(run.source, topic, 800, 200)
    wait_exactly_once(
        run.source, topic, run.target, f"A.{topic}", PARTITIONS, 120, run.assert_alive
    )
    check_events(run, "source", "A", since)
    run.assert_alive()


def test_run_survives_flapping_and_slow_links_exactly_once(run: Run, unique_name: str) -> None:
    topic = f"outage_f_{unique_name}"
    create_topic(run.source, topic, PARTITIONS)
    produced = 0
    for i, (proxy, mode) in enumerate(
        [(run.proxy_b, BLACKHOLE), (run.proxy_a, REFUSE), (run.proxy_b, SLOW), (run.proxy_a, SLOW)]
        * 2
    ):
        produce(run.source, topic, produced, 150)
        produced += 150
        proxy.set_mode(mode, delay_s=0.05)
        time.sleep(3 + i % 3)  # the fault lasts a few seconds, at varied lengths
        run.assert_alive()
        proxy.set_mode(OPEN)
    wait_exactly_once(
        run.source, topic, run.target, f"A.{topic}", PARTITIONS, 150, run.assert_alive
    )
    run.assert_alive()
