"""TablesJob without brokers: its thread, and a stop that does not wait for a blocked run."""

from __future__ import annotations

import threading
import time

from mirror_lib.config.parse import parse_config
from mirror_lib.replication.companions import threads as companions

PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "127.0.0.1:1",
    "B.bootstrap.servers": "127.0.0.1:2",
    "A->B.enabled": "true",
}


def test_tables_job_names_its_cluster_and_stops_without_waiting_for_a_blocked_run(
    monkeypatch, tmp_path
):
    config = parse_config({**PROPS, "mirror.state.dir": str(tmp_path)})
    started, release = threading.Event(), threading.Event()
    calls = []

    def blocked(config, cluster, stopping=None):  # an outage: a look-up that takes its time
        calls.append(cluster)
        started.set()
        release.wait(60)
        return 0

    monkeypatch.setattr(companions, "materialize_once", blocked)
    job = companions.TablesJob(config, "B", interval_s=0.1)
    job.start()
    try:
        assert started.wait(10), "the thread did not run"
        status = job.status()
        assert (status.flow, status.job, status.active) == ("B", "tables", True)
        assert str(tmp_path) in job.checkpoint
        begun = time.monotonic()
        job.stop()
        assert time.monotonic() - begun < 20, "stop waited for the blocked run"
        assert not release.is_set() and calls == ["B"]
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while job.active and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not job.active, "the stopped thread ends once its run returns"
    assert calls == ["B"], "no run after the stop"
