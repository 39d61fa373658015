"""`mirror verify` against real brokers: complete after a copy, behind, records on the target that
the source never had (before, inside and after the replicated range)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mirror_lib.replication.migration.verify import verify_flow
from mirror_lib.spark.runner import run_flows
from mirror_lib.spark.views import create_views
from mirror_lib.tables.state_tables import read_rows
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.integration.conftest import flow_properties, write_properties
from tests.integration.test_replication import OLD_TIMESTAMP_MS

SQL_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "sql"

ONE_STRAY = "1 record on the target that is not a copy of a source record, at downstream offset"


def records(tag: str, n: int, partitions: int = 2) -> list[dict]:
    return [
        {
            "key": f"{tag}-k{i}".encode(),
            "value": None if i % 7 == 3 else f"{tag}-v{i}".encode(),
            "headers": [("h", f"{i}".encode()), ("n", None)][: i % 3],
            "partition": i % partitions,
            "timestamp": OLD_TIMESTAMP_MS + i,
        }
        for i in range(n)
    ]


def by_partition(report) -> dict[int, object]:
    return {p.partition: p for p in report.partitions}


def test_verify_complete_behind_and_first_difference(
    spark, brokers, tmp_path, unique_name, subprocess_env
):
    topic = unique_name
    create_topic(brokers.source, topic, 2)
    produce_exact(brokers.source, topic, records("a", 40))
    props = flow_properties(brokers.source, brokers.target, tmp_path / "state", topics=topic)
    from mirror_lib.config.parse import parse_config

    config = parse_config(props)
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)

    first = verify_flow(config, "A->B", spark=spark)  # one Spark task per partition
    assert [(p.partition, p.status, p.records) for p in first.partitions] == [
        (0, "complete", 20),
        (1, "complete", 20),
    ]
    assert first.ok and first.complete
    assert {p.upstream_to for p in first.partitions} == {20}

    produce_exact(brokers.source, topic, records("b", 10))  # not replicated yet
    second = verify_flow(config, "A->B")
    for p in second.partitions:
        assert (p.status, p.behind, p.describe()) == ("behind", 5, "behind by 5")
        assert (p.upstream_from, p.records, p.total_records) == (20, 0, 20)  # resumed
    assert second.ok and not second.complete

    (extra,) = produce_exact(brokers.target, f"A.{topic}", [{"value": b"forged", "partition": 0}])
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)
    third = by_partition(verify_flow(config, "A->B"))
    assert third[1].status == "complete" and third[1].total_records == 25
    bad = third[0]
    assert bad.status == "stray"
    assert (bad.diff_upstream_offset, bad.diff_downstream_offset) == (None, extra.offset)
    assert bad.describe() == f"stray: {ONE_STRAY} {extra.offset}"
    assert (bad.records, bad.upstream_to) == (5, 25)  # the copies after it were verified
    target = consume_all(brokers.target, f"A.{topic}", partitions=[0])
    assert [r.value for r in target if r.offset > extra.offset] == [
        r["value"] for r in records("b", 10) if r["partition"] == 0
    ], "the copy itself continued after the forged record"

    stored = [r for r in read_rows(config, "verifications") if r["topic"] == topic]
    assert len(stored) == 6
    assert {r["status"] for r in stored} == {"complete", "behind", "stray"}

    create_views(spark, config)  # the view and the dashboard tile read the same rows
    latest = spark.sql(
        f"SELECT partition, status, diff_downstream_offset FROM verification_status "
        f"WHERE topic = '{topic}' ORDER BY partition"
    ).collect()
    assert [tuple(r) for r in latest] == [(0, "stray", extra.offset), (1, "complete", None)]
    tile = spark.sql((SQL_DIR / "verifications.sql").read_text()).collect()
    assert [(r.partition, r.status) for r in tile if r.topic == topic] == [
        (0, "stray"),
        (1, "complete"),
    ]

    path = write_properties(tmp_path / "mm2.properties", props)
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirror_lib.app.cli",
            "verify",
            str(path),
            "--flow",
            "A->B",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=180,
    )
    assert cli.returncode == 1, cli.stderr
    out = json.loads(cli.stdout)
    assert not out["ok"]
    assert [p["result"] for p in out["partitions"]] == [
        f"stray: {ONE_STRAY} {extra.offset}",
        "complete",
    ]
    assert out["partitions"][0]["stray_offsets"] == str(extra.offset)


def test_verify_names_stray_records_before_inside_and_after_the_copy(
    spark, brokers, tmp_path, unique_name, subprocess_env
):
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(brokers.source, topic, 3)
    create_topic(brokers.target, remote, 3)  # as someone made it before the first run
    (before,) = produce_exact(brokers.target, remote, [{"value": b"before", "partition": 0}])
    produce_exact(brokers.source, topic, records("a", 30, partitions=3))
    props = flow_properties(brokers.source, brokers.target, tmp_path / "state", topics=topic)
    path = write_properties(tmp_path / "mm2.properties", props)
    from mirror_lib.config.parse import parse_config

    config = parse_config(props)
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)
    (inside,) = produce_exact(brokers.target, remote, [{"value": b"inside", "partition": 1}])
    produce_exact(brokers.source, topic, records("b", 30, partitions=3))
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)
    (after,) = produce_exact(brokers.target, remote, [{"value": b"after", "partition": 2}])
    strays = {0: before.offset, 1: inside.offset, 2: after.offset}
    copies = [(r.partition, r.offset) for r in consume_all(brokers.target, remote) if r.key]
    first, last = dict(reversed(copies)), dict(copies)
    assert before.offset < first[0] and first[1] < inside.offset < last[1]
    assert last[2] < after.offset

    for resumed in (False, True):  # the next run starts at the stored point and says it again
        report = verify_flow(config, "A->B")
        assert not report.ok
        for p in report.partitions:
            at = strays[p.partition]
            assert (p.status, p.stray, p.diff_downstream_offset) == ("stray", 1, at)
            assert p.describe() == f"stray: {ONE_STRAY} {at}"
            assert (p.upstream_to, p.total_records, p.records) == (20, 20, 0 if resumed else 20)

    cli = subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", "verify", str(path), "--flow", "A->B"],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=180,
    )
    assert cli.returncode == 1, cli.stderr
    lines = cli.stdout.splitlines()
    for partition, offset in strays.items():
        (line,) = [x for x in lines if x.startswith(topic) and x.split()[1] == str(partition)]
        assert line.endswith(f"stray: {ONE_STRAY} {offset}"), line
    assert lines[-1].startswith("A->B: 3 partitions, 0 different, 3 stray, 0 behind")
