"""Bundle job tasks over the test brokers: the entry file as a subprocess, others in-process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mirror_lib.app.bundle_tasks import run_task
from mirror_lib.config.parse import load_config
from mirror_lib.tables.delta_rs import read_table
from mirror_lib.tables.location import tables_root
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.integration.conftest import flow_properties, write_properties

REPO = Path(__file__).resolve().parents[2]


def test_job_tasks_replicate_checkpoint_materialize_and_maintain(
    spark, brokers, unique_name, tmp_path, subprocess_env
):
    topic = f"{unique_name}-t"
    props = flow_properties(
        brokers.source,
        brokers.target,
        tmp_path / "state",
        topics=topic,
        groups=f"{unique_name}-.*",
        **{"mirror.tables.enabled": "true", "emit.heartbeats.enabled": "false"},
    )
    config_path = write_properties(tmp_path / "mm2.properties", props)
    create_topic(brokers.source, topic, 2)
    produce_exact(
        brokers.source, topic, [{"value": f"v{i}", "partition": i % 2} for i in range(30)]
    )
    args = ["--config-path", str(config_path), "--once", "true"]

    done = subprocess.run(
        [sys.executable, str(REPO / "jobs" / "replication.py"), *args],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(consume_all(brokers.target, f"A.{topic}")) == 30
    assert "A->B: caught up with" in done.stdout  # 30 records, plus the shared heartbeats topic

    quiet = {"report": lambda *_: None}
    run_task("companions", args, spark, **quiet)
    run_task("materialization", args, spark, **quiet)
    config = load_config(config_path)
    syncs = read_table(tables_root(config), "offset_syncs").to_pylist()
    # B's internal topics are shared by every A->B flow of the test session: other topics too
    assert f"A.{topic}" in {r["remote_topic"] for r in syncs}
    result = run_task("maintenance", ["--config-path", str(config_path)], spark, **quiet)
    assert "offset_syncs" in result
    assert len(read_table(tables_root(config), "offset_syncs").to_pylist()) == len(syncs)


def test_continuous_run_reports_live_progress_for_the_chosen_parts(
    spark, make_config, brokers, unique_name
):
    from mirror_lib.spark.runner import run_flows

    topic = f"{unique_name}-t"
    config = make_config(topics=topic, groups="none")
    create_topic(brokers.source, topic, 2)
    produce_exact(brokers.source, topic, [{"value": f"v{i}"} for i in range(20)])
    seen: list[list[dict]] = []

    class Done(Exception):
        """Stops the run once the progress shows what the test waits for (no fixed sleep)."""

    def on_progress(rows: list[dict]) -> None:
        seen.append(rows)
        repl = next((r for r in rows if r["job"] == "replication"), None)
        lag = repl and repl["lag"]
        copied = repl and repl["copied"]
        if len(seen) >= 2 and (copied or 0) >= 20 and isinstance(lag, int) and lag <= 3:
            raise Done

    with pytest.raises(Done):
        run_flows(
            spark,
            config,
            duration_s=240,  # a deadline only: the run stops as soon as progress shows the copy
            parts=("replication", "heartbeats"),
            on_progress=on_progress,
            progress_interval_s=2,
            report=lambda *_: None,
        )
    assert len(seen) >= 2
    last = {row["job"]: row for row in seen[-1]}
    assert set(last) == {"replication", "heartbeats"}  # no checkpoints, no tables
    assert last["replication"]["copied"] >= 20, "progress counts copied records inside a slice"
    # the 20 records are copied; heartbeats (one a second, replicated too) may be in flight
    assert isinstance(last["replication"]["lag"], int) and 0 <= last["replication"]["lag"] <= 3
    assert len(consume_all(brokers.target, f"A.{topic}")) == 20


def test_continuous_run_materializes_delta_rs_tables_on_a_driver_thread(
    spark, make_config, brokers, unique_name
):
    """Over delta-rs the tables need no Spark query: a driver thread appends what arrives."""
    from mirror_lib.spark.runner import run_flows

    config = make_config(topics="none", groups="none", **{"mirror.tables.enabled": "true"})
    topic = f"{unique_name}.checkpoints.internal"  # a topic the materialization reads
    create_topic(brokers.target, topic, 1)
    produce_exact(brokers.target, topic, [{"value": b"junk", "partition": 0}] * 5)
    seen: list[tuple[list[dict], set[str]]] = []

    def held() -> list[int]:
        events = read_table(tables_root(config), "flow_events")  # junk -> decode_error rows
        pairs = zip(
            events["kafka_topic"].to_pylist(), events["kafka_offset"].to_pylist(), strict=True
        )
        return sorted(o for t, o in pairs if t == topic)

    class Done(Exception):
        """Stops the run once the rows are in the table (no fixed sleep)."""

    def on_progress(rows: list[dict]) -> None:
        seen.append((rows, {q.name for q in spark.streams.active}))
        if held() == list(range(5)):
            raise Done

    with pytest.raises(Done):
        run_flows(
            spark,
            config,
            duration_s=240,  # a deadline only
            parts=("tables",),
            on_progress=on_progress,
            progress_interval_s=1,
            report=lambda *_: None,
        )
    rows, queries = seen[-1]
    assert not queries, f"a Spark query ran: {queries}"
    (tables,) = rows
    assert (tables["flow"], tables["job"], tables["active"]) == ("B", "tables", True)
