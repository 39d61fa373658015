"""`mirror cutover` against real brokers and Spark: a dry run, then an applied run with 3 groups."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from mirror_lib.replication.migration.cutover import CutoverOptions, run_cutover
from mirror_lib.replication.migration.verify import verify_flow
from mirror_lib.spark.views import create_views
from mirror_lib.tables.state_tables import read_rows
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.integration.conftest import write_properties
from tests.integration.test_checkpoints import (
    FAST,
    consume_group,
    read_from_committed,
    running,
    wait_for,
)

SQL_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "sql"


def committed_on(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
        return [tp.offset for tp in tps]
    finally:
        consumer.close()


def test_cutover_dry_run_then_applied_with_three_groups(
    spark, brokers, make_config, tmp_path, unique_name, subprocess_env
):
    topic, remote = unique_name, f"A.{unique_name}"
    groups = [f"{unique_name}-g{i}" for i in range(3)]
    create_topic(brokers.source, topic, 2)
    produce_exact(
        brokers.source, topic, [{"value": f"r{i}", "partition": i % 2} for i in range(40)]
    )
    consumed = {g: consume_group(brokers.source, g, topic, 2, 5 * (i + 1)) for i, g in
                enumerate(groups)}  # fmt: skip
    config = make_config(topics=topic, groups=f"{unique_name}-.*", **FAST)
    dry = CutoverOptions(groups=groups, max_age_s=120, wait_s=90)
    with running(spark, config, ["A->B"]) as runners:
        wait_for(lambda: verify_flow(config, "A->B", record=False).complete, runners,
                 what="the copy to complete")  # fmt: skip
        first = wait_for(lambda: (r := run_cutover(config, "A->B", dry)).ok and r, runners,
                         what="readiness (checkpoints and heartbeats)")  # fmt: skip
        assert [(s.name, s.status) for s in first.steps] == [
            ("readiness", "ok"),
            ("producers", "waiting"),
        ]
        assert {(p.partition, p.status) for p in first.partitions} == {
            (0, "migrating"),
            (1, "migrating"),
        }
        path = write_properties(tmp_path / "mm2.properties", dict(config.properties))
        cli = subprocess.run(
            [sys.executable, "-m", "mirror_lib.app.cli", "cutover", str(path), "--flow", "A->B",
             "--groups", *groups, "--producers-stopped", "--max-age", "120"],
            capture_output=True, text=True, env=subprocess_env, timeout=300,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert "dry run" in cli.stdout and "would commit 6 offsets of 3 groups" in cli.stdout
        assert read_rows(config, "migrations") == [], "a dry run changed the migrations table"
        assert all(committed_on(brokers.target, g, remote, 2) == [-1001, -1001] for g in groups)

        started = run_cutover(config, "A->B", CutoverOptions(groups=groups, apply=True,
                                                              max_age_s=120))  # fmt: skip
        assert started.steps[-1].status == "waiting"
        assert {r["status"] for r in read_rows(config, "migrations")} == {"migrating"}
        # the last records producers wrote to A before moving to B
        produce_exact(brokers.source, topic, [{"value": f"late{i}", "partition": i % 2}
                                              for i in range(6)])  # fmt: skip
        applied = run_cutover(
            config,
            "A->B",
            CutoverOptions(
                groups=groups, producers_stopped=True, apply=True, max_age_s=120, wait_s=120
            ),
        )
    lifted = [("protection", "done")] if brokers.real_kafka else []  # tansu has no authorizer
    assert [(s.name, s.status) for s in applied.steps] == [
        ("readiness", "ok"),
        ("producers", "ok"),
        ("replicated", "ok"),
        ("groups", "done"),
        *lifted,
        ("report", "done"),
    ], applied.steps
    assert {g.action for g in applied.groups} == {"committed"} and len(applied.groups) == 6
    target = consume_all(brokers.target, remote)
    for p in applied.partitions:
        assert p.source_end_offset == 23
        assert p.target_offset == max(r.offset for r in target if r.partition == p.partition) + 1
    source = consume_all(brokers.source, topic)
    for group in groups:  # each group continues on B exactly after what it consumed on A
        seen = {(p, m.value()) for p, msgs in consumed[group].items() for m in msgs}
        expected = {(r.partition, r.value) for r in source} - seen
        resumed = read_from_committed(brokers.target, group, remote, 2)
        assert len(resumed) == len(set(resumed)) and set(resumed) == expected, group
    rows = read_rows(config, "migrations")
    assert sorted(r["status"] for r in rows) == ["migrated"] * 2 + ["migrating"] * 2
    assert {r["source_end_offset"] for r in rows if r["status"] == "migrated"} == {23}
    assert any(r["status"] == "complete" for r in read_rows(config, "verifications"))

    create_views(spark, config)
    status = spark.sql(
        f"SELECT partition, status, source_end_offset FROM migration_status "
        f"WHERE topic = '{topic}' ORDER BY partition"
    ).collect()
    assert [tuple(r) for r in status] == [(0, "migrated", 23), (1, "migrated", 23)]
    tile = spark.sql((SQL_DIR / "migrations.sql").read_text()).collect()
    assert {r.status for r in tile if r.topic == topic} == {"migrated"}

    again = run_cutover(config, "A->B", CutoverOptions(groups=groups, producers_stopped=True,
                                                       max_age_s=1e9, wait_s=5))  # fmt: skip
    assert {g.action for g in again.groups} == {"kept (the target is at or past it)"}

    retired = run_cutover(config, "A->B", CutoverOptions(retire=True, apply=True))
    assert retired.ok and {p.status for p in retired.partitions} == {"retired"}
    assert sorted(r["status"] for r in read_rows(config, "migrations"))[-2:] == ["retired"] * 2
