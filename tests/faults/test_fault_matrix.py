"""The fault matrix (docs/testing.md#the-fault-matrix): every fault of a production-shaped pair
of clusters, under a steady load, with four slots in four copy tasks, exactly once.

A is three combined nodes; B is three brokers and three dedicated controllers, every path of it
through a link that can be cut (:mod:`mirror_lib.testing.kafka_cluster`), so that two brokers
cut at once leave a quorum that fences them and shrinks the in-sync replicas below
``min.insync.replicas``. Each fault ends with every record exactly once and in order per
partition in both views, consumer groups that translate exactly, and the time from the fault to
copying again measured on B and found in the flow's events. ``make fault-matrix`` runs it (about
an hour on 2 cores) and writes each fault's figures to ``fault-figures.jsonl`` beside the runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime

import confluent_kafka as ck
import pytest

from mirror_lib.config.parse import load_config
from mirror_lib.replication.context import FlowContext
from mirror_lib.testing.embedded import free_port
from mirror_lib.testing.kafka_cluster import (
    COMBINED,
    PRODUCTION,
    KafkaCluster,
    start_clusters,
)
from tests.helpers.faults import FaultFlow, assert_told
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.real_kafka, pytest.mark.fault_matrix, pytest.mark.timeout(2400)]

CUT_S = 60  # how long a broker stays cut off


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, ...]]:
    root = tmp_path_factory.mktemp("fault-matrix")
    started = start_clusters(["A", "B"], root, {"A": COMBINED, "B": PRODUCTION})
    try:
        yield tuple(started)
    finally:
        for c in started:
            c.stop()


@pytest.fixture(autouse=True)
def healed(clusters: tuple[KafkaCluster, ...]) -> Iterator[None]:
    """Whatever a fault left (a node down, a cut link), the next test starts on whole clusters."""
    yield
    for c in clusters:
        c.heal()


def now_ms() -> float:
    return time.time() * 1000


#: Four copy tasks, one a slot: at the load's rate the slots would share one task, which
#: ``make test``'s three-broker tier takes through a roll and a lost leader.
TASK_A_SLOT = {"mirror.slots.shared.below.records.per.second": "0"}


def run(clusters, tmp_path, name, env, **extra: str) -> FaultFlow:
    a, b = clusters
    return FaultFlow(a, b, tmp_path / "run", name, env, extra=TASK_A_SLOT | extra).start()


def test_rolling_restart_of_b_then_of_a(clusters, tmp_path, unique_name, subprocess_env):
    a, b = clusters
    flow = run(clusters, tmp_path, unique_name, subprocess_env)
    try:
        flow.steady(5)
        flow.roll(b)
        flow.roll(a)
        flow.conclude()
    finally:
        flow.stop()
        flow.report("rolling restart of B, then of A")


@pytest.mark.parametrize("victim", ["busiest leader of B", "transaction coordinator of a slot"])
def test_sigkill_of_a_broker_of_b_mid_transaction(
    clusters, tmp_path, unique_name, subprocess_env, victim
):
    """With 400 records/s on eight partitions and a commit every 20 ms, every slot has a
    transaction open at any moment: the kill lands inside one."""
    _a, b = clusters
    flow = run(clusters, tmp_path, unique_name, subprocess_env)
    try:
        flow.steady(5)
        if victim.startswith("busiest"):
            node = b.busiest_leader(flow.remote)
        else:
            ctx = FlowContext.create(load_config(flow.workdir / "mm2.properties"), "A->B")
            node = b.coordinator_of(ctx.transactional_id(0))
        flow.kill(b, node)
        flow.conclude()
        assert flow.figures.get("told"), "the kill held the copy up, but nothing told it"
        for told in flow.figures["told"]:  # the broker killed, by its id
            assert f"broker {node} " in told["reason"], told
            assert "left the cluster" in told["reason"], told
    finally:
        flow.stop()
        flow.report(f"SIGKILL of the {victim}")


def test_sigkill_of_a_leader_of_a(clusters, tmp_path, unique_name, subprocess_env):
    a, _b = clusters
    flow = run(clusters, tmp_path, unique_name, subprocess_env)
    try:
        flow.steady(5)
        node = a.busiest_leader(flow.topic)
        flow.kill(a, node)
        flow.conclude()
        assert flow.figures.get("told"), "the kill held the copy up, but nothing told it"
        for told in flow.figures["told"]:  # the source's fault, by the broker killed
            assert "the target acknowledged late" not in told["reason"], told
            assert f"broker {node} had left the cluster" in told["reason"], told
    finally:
        flow.stop()
        flow.report("SIGKILL of A's busiest leader")


def test_one_broker_of_b_cut_off_shrinks_the_isr_and_writes_go_on(
    clusters, tmp_path, unique_name, subprocess_env
):
    _a, b = clusters
    flow = run(clusters, tmp_path, unique_name, subprocess_env)
    try:
        flow.steady(5)
        node = b.busiest_leader(flow.remote)
        flow.fault(lambda: b.cut(node))
        wait_for(lambda: node not in b.live_brokers(), 60, f"broker {node} fenced", flow.alive)
        flow.steady(max(0.0, CUT_S - (now_ms() - flow.faults[-1]) / 1000))
        # not as the cut broker answers: it still tells the in-sync replicas of its cut
        topics = b.metadata(flow.remote, without=node).topics
        isr = {len(p.isrs) for p in topics[flow.remote].partitions.values()}
        assert isr == {2}, f"in-sync replicas with broker {node} cut off: {isr}"
        b.mend(node)
        b.wait_in_sync()
        flow.conclude()
    finally:
        flow.stop()
        if flow.faults:
            flow.figures["markers_held_s"] = markers_held_s(b, node, flow.faults[0])
        flow.report("one broker of B cut off for 60 s")


def markers_held_s(cluster: KafkaCluster, node: int, since_ms: float) -> list[float]:
    """Seconds from ``since_ms`` until each time a transaction coordinator of ``cluster`` gave
    up a WriteTxnMarkers request held on its connection to ``node``, as the brokers' logs say:
    the transactions it carried stayed open to ``read_committed`` readers and their
    transactional ids busy until then, the broker's ``request.timeout.ms`` after the request
    was sent, a wait no client can shorten (docs/how-it-works.md)."""
    pattern = re.compile(
        r"^\[(\S+ \S+)\] .*Cancelled in-flight WRITE_TXN_MARKERS request .* due to node (\d+) "
        "being disconnected"
    )
    held = []
    for log in sorted(cluster.workdir.glob("node-*/server.log")):
        for line in log.read_text(errors="replace").splitlines():
            found = pattern.match(line)
            if found is None or int(found.group(2)) != node:
                continue
            # the brokers log local time, as this process reads it
            at_ms = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000
            if at_ms >= since_ms:
                held.append(round((at_ms - since_ms) / 1000, 2))
    return sorted(held)


def status(flow: FaultFlow) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", "status", str(flow.workdir / "mm2.properties"),
         "--json"],
        env=flow.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return json.loads(done.stdout) if done.stdout.strip() else {}


def writable(cluster: KafkaCluster) -> Callable[[], bool]:
    """Whether every partition of ``cluster`` has a leader and ``min.insync.replicas``."""

    def check() -> bool:
        try:
            return not cluster.out_of_sync(writable=True)
        except ck.KafkaException:
            return False

    return check


def test_two_brokers_of_b_cut_off_the_flow_waits_says_why_and_resumes(
    clusters, tmp_path, unique_name, subprocess_env
):
    """Two of three brokers gone: the in-sync replicas fall below ``min.insync.replicas`` and
    B refuses writes (NOT_ENOUGH_REPLICAS, which librdkafka retries in silence). The flow waits,
    says why in ``mirror status``, its events and its metrics, and resumes when one returns."""
    _a, b = clusters
    port = free_port(set())
    flow = run(
        clusters, tmp_path, unique_name, subprocess_env,
        **{"mirror.tables.enabled": "true", "mirror.metrics.port": str(port)},
    )  # fmt: skip
    try:
        flow.steady(5)
        first, second = sorted(b.live_brokers())[:2]
        fault = now_ms()
        b.cut(first)
        b.cut(second)

        def said() -> str:
            text = json.dumps(status(flow))
            return text if "NOT_ENOUGH_REPLICAS" in text else ""

        shown = wait_for(said, 300, "mirror status naming NOT_ENOUGH_REPLICAS", flow.alive)
        scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        assert b"mirror_outage_seconds{" in scraped and b'cause="not_enough_replicas"' in scraped
        flow.steady(max(0.0, CUT_S - (now_ms() - fault) / 1000))
        b.mend(first)
        mended = now_ms()
        wait_for(writable(b), 600, "every partition of B taking writes again", flow.alive)
        writable_at = now_ms()
        took = flow.recovered(fault, timeout_s=600)
        # the part B itself took: from the fault until every partition took writes again
        flow.figures["mended_s"] = round((mended - fault) / 1000, 2)
        flow.figures["writable_s"] = round((writable_at - fault) / 1000, 2)
        b.mend(second)
        b.wait_in_sync()
        flow.steady(5)
        flow.finish()
        flow.check_checkpoints()
        ended = flow.events("outage_ended")
        assert any(
            e.get("cause") == "not_enough_replicas"
            or "NOT_ENOUGH_REPLICAS" in e.get("last_error", "")
            for e in ended
        ), ended
        # B takes no write before a broker is back: an outage that ended sooner was told over
        # while the flow still waited (mirror status showed none)
        early = [e for e in ended if e["started_ms"] >= fault and e["ts_ms"] < mended]
        assert not early, early
        assert_told(flow, fault, took)
        # the wait is told by its cause: the outage the query was started again through, or
        # what its first commit after the restart saw, never the restart alone
        (told,) = flow.figures["told"]
        assert "copy task started again" not in told["reason"], told
        assert told.get("outage_id", ended[0]["outage_id"]) in {e["outage_id"] for e in ended}
        flow.figures["status"] = shown[:300]
    finally:
        flow.stop()
        flow.report("two brokers of B cut off (NOT_ENOUGH_REPLICAS)")


def test_the_active_controller_of_b_killed(clusters, tmp_path, unique_name, subprocess_env):
    _a, b = clusters
    flow = run(clusters, tmp_path, unique_name, subprocess_env)
    try:
        flow.steady(5)
        controller = b.active_controller()
        flow.fault(lambda: b.kill_node(controller))
        wait_for(lambda: b.active_controller() != controller, 60, "a new active controller")
        flow.steady(10)
        b.start_node(controller)
        flow.conclude()
    finally:
        flow.stop()
        flow.report("the active controller of B killed")
