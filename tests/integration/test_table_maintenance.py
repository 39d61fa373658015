"""The tables thread keeps each delta-rs table bounded as it runs: with a short maintenance
interval and a short history, a table written every second for a minute and more holds a few
files and a bounded log, not one file and one log entry per write (issue 52)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("deltalake")

from confluent_kafka import Producer
from deltalake import DeltaTable

from mirror_lib.config.parse import parse_config
from mirror_lib.mm2.formats import Heartbeat
from mirror_lib.replication.companions.threads import TablesJob
from mirror_lib.tables.maintenance import last_maintained
from tests.helpers.waiting import wait_for
from tests.integration.conftest import flow_properties

HISTORY_S = 36  # mirror.tables.history.hours = 0.01
WRITES = 90  # commits of the heartbeats table (a run a second: longer than the history)


def files(table: Path) -> tuple[int, int, int]:
    """(data files on disk, data files of the current version, log entries)."""
    log = len(os.listdir(table / "_delta_log"))
    data = sum(1 for p in table.iterdir() if p.suffix == ".parquet")
    return data, len(DeltaTable(str(table)).file_uris()), log


def test_a_running_tables_thread_keeps_each_table_bounded(brokers, tmp_path):
    state = tmp_path / "state"
    config = parse_config(
        flow_properties(
            brokers.source, brokers.target, state,
            **{
                "mirror.tables.enabled": "true",
                "mirror.tables.maintenance.interval.seconds": "10",
                "mirror.tables.history.hours": str(HISTORY_S / 3600),
                "mirror.tables.checkpoint.interval": "5",
            },
        )
    )  # fmt: skip
    stop = threading.Event()

    def beat() -> None:  # the heartbeats of a flow, 20 a second, so that every run commits
        producer = Producer({"bootstrap.servers": brokers.target})
        while not stop.is_set():
            hb = Heartbeat("A", "B", int(time.time() * 1000))
            producer.produce("heartbeats", hb.value(), hb.key(), partition=0)
            producer.poll(0.05)
        producer.flush(10)

    writer = threading.Thread(target=beat, daemon=True)
    writer.start()
    job = TablesJob(config, "B", interval_s=1.0)
    job.start()
    table = state / "tables" / "heartbeats"
    try:
        wait_for(
            lambda: table.is_dir() and DeltaTable(str(table)).version() >= WRITES,
            300,
            f"{WRITES} commits of the heartbeats table",
            job.raise_if_failed,
        )
        job.raise_if_failed()
    finally:
        job.stop()
        stop.set()
        writer.join(15)
    on_disk, live, log = files(table)
    version = DeltaTable(str(table)).version()
    assert last_maintained(str(state)) is not None
    # a run commits about once a second: between two rounds (10 s, more on a busy machine)
    # about 10-20 small files; the round before compacted the rest into one
    assert live <= 30, f"{live} files in the current version after {version} commits"
    assert on_disk <= live + 30, f"{on_disk} files on disk, {live} referenced"
    # entries older than the history (36 s) are removed at each checkpoint (every 5 commits)
    log_dir = table / "_delta_log"
    entries = sorted(p for p in log_dir.iterdir() if p.suffix == ".json")
    assert int(entries[0].stem) > 0 and log < version, f"{log} log entries, version {version}"
    span = entries[-1].stat().st_mtime - entries[0].stat().st_mtime
    assert span <= HISTORY_S + 15, f"the log still holds {span:.0f} s of commits"
    config_now = DeltaTable(str(table)).metadata().configuration
    assert config_now["delta.logRetentionDuration"] == f"interval {HISTORY_S} seconds"
