"""Delta tables and SQL over a real flow: materialization, views, dashboard SQL, time travel."""

from __future__ import annotations

import datetime
import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from mirror_lib.replication.migration.failover import translate_group, translate_group_as_of
from mirror_lib.replication.testhooks import CLOSING_DELAY_ENV
from mirror_lib.spark.materialize import (
    maintain_tables,
    materialize_caught_up,
    start_materialization,
)
from mirror_lib.spark.runner import run_flows
from mirror_lib.spark.views import create_views
from mirror_lib.tables.location import tables_writer
from mirror_lib.testing.kafka_io import commit_group, create_topic, produce_exact
from tests.integration.conftest import metrics_events

SQL_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "sql"
TOTAL = 600


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    commit_group(bootstrap, group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])


@pytest.fixture(scope="module")
def flow(spark, brokers, tmp_path_factory):
    """One flow replicated twice (two runs) with checkpoints and materialized tables."""
    from mirror_lib.config.parse import parse_config
    from tests.integration.conftest import flow_properties

    name = f"tables-{int(time.time() * 1000) % 10**8}"
    group = f"{name}-g"
    state = tmp_path_factory.mktemp("tables") / "state"
    config = parse_config(
        flow_properties(
            brokers.source,
            brokers.target,
            state,
            topics=name,
            groups=group,
            **{"mirror.tables.enabled": "true", "emit.heartbeats.interval.seconds": "1"},
        )
    )
    create_topic(brokers.source, name, 3)
    produce_exact(
        brokers.source,
        name,
        [{"value": f"v{i}".encode(), "partition": i % 3} for i in range(TOTAL // 2)],
    )
    commit(brokers.source, group, {(name, 0): 10, (name, 1): 20, (name, 2): 30})
    started = time.monotonic()
    run_flows(spark, config, once=True, timeout_s=180, report=lambda *_: None)
    first_version = version_of(state, "checkpoints")
    time.sleep(1.1)
    first_ts = datetime.datetime.now(datetime.timezone.utc).isoformat()
    time.sleep(1.1)
    produce_exact(
        brokers.source,
        name,
        [{"value": f"w{i}".encode(), "partition": i % 3} for i in range(TOTAL // 2)],
    )
    commit(brokers.source, group, {(name, 0): 150, (name, 1): 160, (name, 2): 170})
    run_flows(spark, config, duration_s=12, report=lambda *_: None)
    run_flows(spark, config, once=True, timeout_s=180, report=lambda *_: None)
    create_views(spark, config)
    return {
        "config": config,
        "name": name,
        "group": group,
        "state": state,
        "first_version": first_version,
        "first_ts": first_ts,
        "wall_s": time.monotonic() - started,
    }


def version_of(state: Path, table: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(state.resolve() / "tables" / table)).version()


def rows(spark, sql: str) -> list[dict]:
    return [r.asDict() for r in spark.sql(sql).collect()]


def test_offset_syncs_hold_every_committed_segment(spark, brokers, flow):
    segments = set()
    for event in metrics_events(brokers.target):
        if event["type"] == "segments" and event["topic"] == flow["name"]:
            segments |= {(event["partition"], *s) for s in event["segments"]}
    table = {
        (
            r["partition"],
            r["upstream_start"],
            r["upstream_end"],
            r["downstream_start"],
            r["downstream_end"],
        )
        for r in rows(
            spark,
            f"SELECT * FROM t_offset_syncs WHERE topic = '{flow['name']}' AND kind = 'segment'",
        )
    }
    assert segments and table == segments


@pytest.mark.spark40
def test_metrics_add_up_and_latency_is_plausible(spark, flow):
    name = flow["name"]
    (total,) = rows(
        spark, f"SELECT sum(records) AS n FROM t_replication_metrics WHERE topic = '{name}'"
    )
    assert total["n"] == TOTAL
    lat = rows(spark, f"SELECT * FROM latency_per_minute WHERE topic = 'A.{name}'")
    assert lat
    for row in lat:
        assert 0 < row["latency_ms_p50"] <= row["latency_ms_p99"] < flow["wall_s"] * 1000


@pytest.mark.spark40
def test_sql_translation_equals_library_translation(spark, flow):
    library = {
        (r.topic, r.partition): r.offset
        for r in translate_group(flow["config"], flow["group"], "A", "B")
    }
    sql = {
        (r["topic"], r["partition"]): r["offset"]
        for r in rows(spark, f"SELECT * FROM offset_translation WHERE group_id = '{flow['group']}'")
    }
    assert len(library) == 3
    assert sql == library
    latest = {
        (r["topic"], r["partition"]): r["downstream_offset"]
        for r in rows(spark, f"SELECT * FROM latest_checkpoints WHERE group_id = '{flow['group']}'")
    }
    assert latest == library


def test_heartbeats_and_every_dashboard_query_run(spark, flow):
    beats = rows(spark, "SELECT * FROM heartbeat_freshness WHERE source = 'A' AND target = 'B'")
    assert beats and beats[0]["hops"] == 0 and beats[0]["heartbeats"] >= 1
    files = sorted(SQL_DIR.glob("*.sql"))
    assert len(files) >= 6
    for path in files:
        spark.sql(path.read_text()).collect()
    ready = rows(spark, f"SELECT * FROM failover_readiness WHERE group_id = '{flow['group']}'")
    assert ready[0]["partitions"] == 3 and ready[0]["checkpoint_age_seconds"] >= 0


def test_time_travel_gives_the_earlier_translation(spark, flow):
    then = translate_group_as_of(
        flow["config"], flow["group"], "A", "B", version=flow["first_version"]
    )
    assert {(r.topic, r.partition): r.offset for r in then} == {
        (f"A.{flow['name']}", 0): 10,
        (f"A.{flow['name']}", 1): 20,
        (f"A.{flow['name']}", 2): 30,
    }
    at = translate_group_as_of(flow["config"], flow["group"], "A", "B", timestamp=flow["first_ts"])
    assert at == then
    create_views(spark, flow["config"], as_of_timestamp=flow["first_ts"], prefix="asof_")
    old = rows(spark, f"SELECT * FROM asof_offset_translation WHERE group_id = '{flow['group']}'")
    assert sorted(r["offset"] for r in old) == [10, 20, 30]


@pytest.mark.spark40
def test_restarted_materialization_writes_no_duplicates(spark, brokers, flow):
    config = flow["config"]
    query = start_materialization(
        spark, config, "B", writer=tables_writer(spark, config), interval_s=0.2
    )
    deadline = time.monotonic() + 120
    while not query.recentProgress and time.monotonic() < deadline:  # a batch written, at least
        assert query.exception() is None, query.exception()
        time.sleep(0.2)
    query.stop()  # mid-stream; the restart replays from the checkpoint
    materialize_caught_up(spark, config, "B", timeout_s=120, writer=tables_writer(spark, config))
    create_views(spark, config)
    in_kafka = sum(1 for e in metrics_events(brokers.target) if e.get("type") == "batch")
    (in_table,) = rows(
        spark,
        "SELECT count(*) AS n FROM t_replication_metrics "
        "WHERE kafka_topic = 'mm2-metrics.A.internal'",
    )
    assert in_table["n"] == in_kafka, "the restarted materialization is behind or duplicated"
    for table in ("offset_syncs", "checkpoints", "heartbeats", "replication_metrics"):
        (dup,) = rows(
            spark,
            f"SELECT count(*) - count(DISTINCT kafka_topic, kafka_partition, "
            f"kafka_offset, coalesce(upstream_start_key, 0)) AS d FROM "
            f"(SELECT *, {seg_key(table)} AS upstream_start_key FROM t_{table})",
        )
        assert dup["d"] == 0, f"duplicate rows in {table}"


def test_once_catch_up_that_crashed_resumes_without_duplicates(brokers, flow, monkeypatch):
    """The driver's --once catch-up dies after committing chunks but before saving where it got
    to; the next one re-reads from its last saved point and the tables keep every record once."""
    from mirror_lib.tables import catch_up
    from mirror_lib.tables.delta_rs import read_table
    from mirror_lib.tables.location import tables_root

    config, topic = flow["config"], f"crash-{uuid.uuid4().hex[:8]}.checkpoints.internal"

    def offsets_held() -> list[int]:
        events = read_table(tables_root(config), "flow_events")  # junk -> decode_error events
        topics, offsets = events["kafka_topic"].to_pylist(), events["kafka_offset"].to_pylist()
        pairs = zip(topics, offsets, strict=True)
        return sorted(o for t, o in pairs if t == topic)

    create_topic(brokers.target, topic, 1)
    produce_exact(brokers.target, topic, [{"value": b"junk", "partition": 0}] * 30)
    monkeypatch.setattr(catch_up, "CHUNK_RECORDS", 7)
    real_save, saves = catch_up._save, []

    def crash_on_second(path, done):
        saves.append(dict(done))
        if len(saves) == 2:
            raise RuntimeError("killed after the chunk's commits")
        real_save(path, done)

    monkeypatch.setattr(catch_up, "_save", crash_on_second)
    with pytest.raises(RuntimeError, match="killed after"):
        catch_up.materialize_once(config, "B", timeout_s=120)
    held = offsets_held()
    assert 7 <= len(held) < 30 and held == list(range(len(held))), held
    monkeypatch.setattr(catch_up, "_save", real_save)
    assert catch_up.materialize_once(config, "B", timeout_s=120) >= 30 - len(held)  # re-read
    assert offsets_held() == list(range(30))
    assert catch_up.materialize_once(config, "B", timeout_s=120) == 0, "read again from the end"
    # the topic is deleted and created again: its offsets start over, and are new records
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": brokers.target})  # alive while the futures run
    for future in admin.delete_topics([topic]).values():
        future.result(30)
    deadline = time.monotonic() + 60
    while True:  # the broker may still be dropping the old partition
        try:
            create_topic(brokers.target, topic, 1)
            break
        except Exception:
            assert time.monotonic() < deadline, "could not create the topic again"
            time.sleep(0.5)
    produce_exact(brokers.target, topic, [{"value": b"junk", "partition": 0}] * 3)
    assert catch_up.materialize_once(config, "B", timeout_s=120) == 3
    assert offsets_held() == sorted([*range(30), 0, 1, 2])


def test_once_catch_up_reads_a_transaction_committed_just_before_it(brokers, flow, monkeypatch):
    """A commit returns before the broker writes its markers: records the run's last commit
    wrote may still lie past the last stable offset when the catch-up lists it. The catch-up
    waits for them (settled_bounds) instead of leaving the run's last metrics out."""
    import threading

    from confluent_kafka import Producer

    from mirror_lib.kafka import lookups
    from mirror_lib.tables import catch_up
    from mirror_lib.tables.delta_rs import read_table
    from mirror_lib.tables.location import tables_root

    config, topic = flow["config"], f"late-{uuid.uuid4().hex[:8]}.checkpoints.internal"
    create_topic(brokers.target, topic, 1)
    catch_up.materialize_once(config, "B", timeout_s=120)  # everything before this test
    producer = Producer({"bootstrap.servers": brokers.target, "transactional.id": topic})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(5):
        producer.produce(topic, b"junk", partition=0)
    producer.flush(30)
    listed = threading.Event()
    real_bounds = lookups.partition_bounds

    def bounds_then_commit(*args, **kwargs):
        found = real_bounds(*args, **kwargs)
        listed.set()  # the last stable offset is listed while the transaction is open
        return found

    monkeypatch.setattr(lookups, "partition_bounds", bounds_then_commit)
    read: list[int] = []
    job = threading.Thread(target=lambda: read.append(catch_up.materialize_once(config, "B", 120)))
    job.start()
    assert listed.wait(60), "the catch-up never listed the offsets"
    producer.commit_transaction(30)
    job.join(120)
    assert read == [5]
    events = read_table(tables_root(config), "flow_events")  # junk -> decode_error events
    pairs = zip(events["kafka_topic"].to_pylist(), events["kafka_offset"].to_pylist(), strict=True)
    assert sorted(o for t, o in pairs if t == topic) == list(range(5))


def seg_key(table: str) -> str:
    return "upstream_start" if table == "offset_syncs" else "0"


def test_topics_written_by_a_real_mm2_are_materialized(spark, brokers, flow):
    key = bytes.fromhex(
        "0010636f6e73756d65722d67726f75702d3100147072696d6172792e746573742d746f7069632d3100000003"
    )
    value = bytes.fromhex("000000000000000003e800000000000003e60000")
    create_topic(brokers.target, "primary.checkpoints.internal", 1)
    produce_exact(
        brokers.target,
        "primary.checkpoints.internal",
        [
            {"key": key, "value": value, "partition": 0},
            {"key": b"junk", "value": b"\x00\x01", "partition": 0},
        ],
    )
    materialize_caught_up(
        spark, flow["config"], "B", timeout_s=120, writer=tables_writer(spark, flow["config"])
    )
    create_views(spark, flow["config"])
    got = rows(
        spark,
        "SELECT * FROM latest_checkpoints "
        "WHERE group_id = 'consumer-group-1' AND source = 'primary'",
    )
    assert [
        (r["source"], r["topic"], r["partition"], r["upstream_offset"], r["downstream_offset"])
        for r in got
    ] == [("primary", "primary.test-topic-1", 3, 1000, 998)]
    errors = rows(spark, "SELECT * FROM flow_events_recent WHERE type = 'decode_error'")
    assert errors


def test_maintenance_compacts_and_keeps_tables_readable(spark, flow):
    result = maintain_tables(flow["config"], retention_days=3650)
    assert set(result) >= {"checkpoints", "offset_syncs"}
    create_views(spark, flow["config"])
    assert rows(spark, "SELECT count(*) AS n FROM t_checkpoints")[0]["n"] > 0


def test_mirror_status_reads_the_tables(flow, tmp_path, subprocess_env):
    import subprocess
    import sys

    from mirror_lib.app.status import flow_status
    from tests.integration.conftest import write_properties

    (health,) = flow_status(flow["config"])
    assert health.flow == "A->B" and health.records >= TOTAL
    assert health.lag is not None and health.lag >= 0
    assert 0 < health.latency_ms_p50 <= health.latency_ms_p99
    assert health.checkpoint_age_seconds >= 0 and health.heartbeat_age_seconds >= 0
    config_file = write_properties(tmp_path / "mm2.properties", dict(flow["config"].properties))
    out = subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", "status", str(config_file), "--json"],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["A->B"]["records"] == health.records


@pytest.mark.spark40
def test_one_health_for_either_writer_and_the_views(spark, flow):
    """The same numbers from delta-rs files, from Spark-held tables and from the SQL views."""
    from mirror_lib.app.status import flow_status
    from mirror_lib.config.parse import parse_config
    from mirror_lib.spark.delta_source import register_tables
    from mirror_lib.tables.location import tables_root

    now = time.time() * 1000
    (local,) = flow_status(flow["config"], now_ms=now)
    # The same rows as Spark tables in a schema, read through the writer = spark branch, are
    # what Databricks has (test_delta_writers.py writes them through Delta's Spark writer).
    schema = f"health_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {schema}")
    register_tables(spark, tables_root(flow["config"]), prefix="h_")
    for table in (
        "replication_metrics",
        "checkpoints",
        "heartbeats",
        "offset_syncs",
        "flow_events",
    ):
        spark.table(f"h_{table}").write.format("parquet").saveAsTable(f"{schema}.{table}")
    props = dict(flow["config"].properties)
    props.update({"mirror.tables.writer": "spark", "mirror.tables.schema": schema})
    (held,) = flow_status(parse_config(props), now_ms=now, spark=spark)
    assert held == local
    create_views(spark, flow["config"])
    lag = rows(spark, "SELECT sum(lag) AS lag FROM replication_lag WHERE flow = 'A->B'")
    assert lag[0]["lag"] == local.lag
    latency = rows(
        spark,
        "SELECT sum(latency_ms_p50 * records) / sum(records) AS p50, max(latency_ms_p99) AS p99"
        " FROM latency_per_minute WHERE flow = 'A->B'",
    )[0]
    assert latency["p50"] == pytest.approx(local.latency_ms_p50)
    assert latency["p99"] == pytest.approx(local.latency_ms_p99)


def test_the_end_of_mirror_run_once_lands_in_the_tables(brokers, tmp_path, subprocess_env):
    """`mirror run --once` owns its session and stops it on a thread after the catch-up, while
    the heartbeat, the checkpoint round and the delta-rs tables are written: all of them land.
    The copy tasks tell their metrics only when their slice closes, and wait before it: the
    run lets the slice end, and the tables count every record."""
    from mirror_lib.config.parse import parse_config
    from mirror_lib.tables.delta_rs import read_table
    from mirror_lib.tables.location import tables_root
    from tests.helpers.mirror_cli import run_mirror
    from tests.integration.conftest import flow_properties, write_properties

    name = f"tail-{uuid.uuid4().hex[:8]}"
    group, state = f"{name}-g", tmp_path / "state"
    props = flow_properties(
        brokers.source,
        brokers.target,
        state,
        topics=name,
        groups=group,
        **{"mirror.tables.enabled": "true", "mirror.metrics.interval.ms": "600000"},
    )
    create_topic(brokers.source, name, 2)
    produce_exact(brokers.source, name, [{"value": b"v", "partition": i % 2} for i in range(40)])
    commit(brokers.source, group, {(name, 0): 7, (name, 1): 20})
    env = {**subprocess_env, CLOSING_DELAY_ENV: "5"}
    out = run_mirror(write_properties(tmp_path / "mm2.properties", props), env, "--once",
                     timeout_s=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "stopping a part of the run failed" not in out.stderr
    root = tables_root(parse_config(props))
    checkpoints = [r for r in read_table(root, "checkpoints").to_pylist() if r["group_id"] == group]
    assert sorted((r["partition"], r["upstream_offset"]) for r in checkpoints) == [(0, 7), (1, 20)]
    assert all(r["downstream_offset"] >= r["upstream_offset"] for r in checkpoints)
    assert read_table(root, "heartbeats").num_rows > 0
    metrics = read_table(root, "replication_metrics").to_pylist()
    assert sum(r["records"] for r in metrics if r["topic"] == name) == 40
    # the run's own start and stop are flow_events rows (the metrics topic is shared by every
    # test's runs: this one's are those naming its state dir), one run, in that order
    run = sorted(
        (
            r
            for r in read_table(root, "flow_events").to_pylist()
            if r["type"] in ("start", "stop", "error")
            and json.loads(r["details"])["state_dir"] == str(state)
        ),
        key=lambda r: r["kafka_offset"],
    )
    assert [(r["type"], r["action"]) for r in run] == [("start", "started"), ("stop", "stopped")]
    details = [json.loads(r["details"]) for r in run]
    assert {d["mode"] for d in details} == {"once"} and len({d["run_id"] for d in details}) == 1
    assert "caught up" in run[1]["reason"]
