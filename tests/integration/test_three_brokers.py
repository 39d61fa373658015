"""Clusters as people run them (docs/testing.md#production-shapes): A and B of three brokers
each, replication factor 3 and ``min.insync.replicas = 2`` for every topic, internal ones
included; a steady load on A and a continuous ``mirror run`` with four slots, exactly once. At
the load's rate the four slots share one copy task (the default; the fault matrix runs a task a
slot).

Two faults run in ``make test``, one after the other in one run: a rolling restart of B (each
broker stopped cleanly, kept down, started, and the cluster back in sync before the next), then
a SIGKILL of the broker that leads most of the remote partitions. The run ends with every
record exactly once and in order per partition in both views (the raw committed view and the
broker's ``read_committed``), and consumer groups committed on A that translate exactly. The
time from each fault to copying again is measured on B (:class:`tests.helpers.faults.Tail`)
and must be in the flow's events. The whole fault matrix (tests/faults/) runs with
``make fault-matrix``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mirror_lib.testing.kafka_cluster import COMBINED, KafkaCluster, start_clusters
from tests.helpers.faults import FaultFlow

pytestmark = [pytest.mark.real_kafka, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, ...]]:
    started = start_clusters(["A", "B"], tmp_path_factory.mktemp("three-brokers"), COMBINED)
    try:
        yield tuple(started)
    finally:
        for c in started:
            c.stop()


def test_a_rolling_restart_then_a_lost_leader_of_the_target_copy_every_record_exactly_once(
    clusters, tmp_path, unique_name, subprocess_env
):
    """Both faults in one run (one flow's start and checks, within CI's hour): B rolled broker
    by broker, then B's busiest leader SIGKILLed mid-copy and started again."""
    a, b = clusters
    flow = FaultFlow(a, b, tmp_path / "run", unique_name, subprocess_env).start()
    try:
        flow.steady(5)
        flow.roll(b)
        flow.steady(5)
        flow.kill(b, b.busiest_leader(flow.remote), settle_s=0)
        flow.conclude()
    finally:
        flow.stop()
        flow.report("rolling restart of B, then SIGKILL of its busiest leader (combined nodes)")
