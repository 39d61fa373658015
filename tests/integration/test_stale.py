"""Stale-data policy against real brokers and local Spark (issue 17, part 2).

Records with an old CreateTime stand for what piled up during an outage (a paused flow): the
copier reaches them long after they were written. Fresh records around them must arrive exactly
once, the stale ones never, and every skipped range must be accounted for in the metrics topic
and in the Delta ``flow_events`` table, with offset translation mapping into the gap exactly.
"""

from __future__ import annotations

import itertools
import json
import time

from confluent_kafka import TopicPartition

from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.migration.failover import translate_group
from mirror_lib.replication.migration.verify import format_report, verify_flow
from mirror_lib.replication.translate import load_segments, translate
from mirror_lib.spark.runner import run_flows
from mirror_lib.testing.kafka_io import commit_group, create_topic, produce_exact
from tests.helpers.kafka_raw import committed_records, log_text
from tests.integration.conftest import metrics_events

HOUR_MS = 3_600_000


def produce(bootstrap: str, topic: str, partition: int, tags: str) -> list[bytes]:
    """One record per character of ``tags``: ``f`` fresh (now), ``o`` an hour old."""
    now = int(time.time() * 1000)
    values = [f"{topic}-p{partition}-{i}-{t}".encode() for i, t in enumerate(tags)]
    produce_exact(
        bootstrap,
        topic,
        [
            {"value": v, "partition": partition, "timestamp": now - (HOUR_MS if t == "o" else 0)}
            for v, t in zip(values, tags, strict=True)
        ],
    )
    return values


def target_values(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """The committed view of the remote topic (the test broker's read_committed is not)."""
    raw = committed_records(bootstrap, topic, partitions)
    return {p: [r.value for r in records] for p, records in raw.items()}


def skip_events(bootstrap: str, topic: str) -> list[dict]:
    return [e for e in metrics_events(bootstrap) if e["type"] == "skip" and e["topic"] == topic]


def run_once(spark, config) -> None:
    run_flows(spark, config, once=True, timeout_s=180, report=lambda *_: None)


def test_stale_records_are_skipped_accounted_for_and_translated(
    spark, brokers, make_config, unique_name
):
    topic, group = unique_name, f"{unique_name}-g"
    create_topic(brokers.source, topic, 2)
    # partition 0: 10 fresh, 30 stale (offsets 10..39), 20 fresh; partition 1: only fresh
    p0 = produce(brokers.source, topic, 0, "f" * 10 + "o" * 30 + "f" * 20)
    p1 = produce(brokers.source, topic, 1, "f" * 15)
    # committed inside the skipped range, at its first record, and after it
    commit_group(brokers.source, group, [TopicPartition(topic, 0, 25), TopicPartition(topic, 1, 7)])
    config = make_config(
        topics=topic,
        groups=group,
        **{
            "A->B.mirror.on.gap": "skip",
            "A->B.mirror.skip.older.than.ms": str(10 * 60_000),
            "mirror.tables.enabled": "true",
        },
    )
    run_once(spark, config)

    # fresh records exactly once, in order; the stale ones never
    got = target_values(brokers.target, f"A.{topic}", 2)
    assert got[0] == p0[:10] + p0[40:], (
        "source:\n" + log_text(brokers.source, topic, 0) + "\ntarget:\n"
        + log_text(brokers.target, f"A.{topic}", 0) + "\nevents of the topic:\n"
        + "\n".join(repr(e) for e in metrics_events(brokers.target) if e.get("topic") == topic)
    )  # fmt: skip
    assert got[1] == p1

    # one skip event for the range, in the metrics topic
    events = skip_events(brokers.target, topic)
    assert {e["partition"] for e in events} == {0}
    ranges = sorted((e["first_offset"], e["last_offset"]) for e in events)
    assert ranges[0][0] == 10 and ranges[-1][1] == 39
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges)), ranges
    assert sum(e["records"] for e in events) == 30
    assert sum(e["bytes"] for e in events) == sum(len(v) for v in p0[10:40])
    assert min(e["oldest_ts_ms"] for e in events) <= time.time() * 1000 - HOUR_MS
    assert {(e["reason"], e["remote_topic"], e["flow"]) for e in events} == {
        ("stale", f"A.{topic}", "A->B")
    }

    # ... and in the Delta flow_events table
    from mirror_lib.tables.delta_rs import read_table
    from mirror_lib.tables.location import tables_root

    rows = [
        r
        for r in read_table(tables_root(config), "flow_events").to_pylist()
        if r["type"] == "skip" and r["topic"] == topic
    ]
    assert len(rows) == len(events)
    details = [json.loads(r["details"]) for r in rows]
    assert sum(d["records"] for d in details) == 30
    assert {(r["partition"], r["reason"], r["action"]) for r in rows} == {(0, "stale", "skip")}

    # a skipped range is a gap: a group inside it maps to the next copied record
    indexes = load_segments(FlowContext.create(config, "A->B"))
    assert [translate(indexes, topic, 0, u) for u in (9, 10, 25, 39, 40, 45)] == [
        9,
        10,
        10,
        10,
        10,
        15,
    ]
    assert translate(indexes, topic, 1, 7) == 7
    checkpointed = {
        (t.topic, t.partition): t.offset for t in translate_group(config, group, "A", "B")
    }
    assert checkpointed == {(f"A.{topic}", 0): 10, (f"A.{topic}", 1): 7}

    # `mirror verify` excuses exactly the skip events' ranges and compares everything else
    report = verify_flow(config, "A->B", [topic], record=False)
    assert report.complete, format_report(report)
    assert [(p.partition, p.records, p.skipped) for p in report.partitions] == [
        (0, 30, 30),
        (1, 15, 0),
    ]


def test_the_record_cap_bounds_what_one_outage_skips(spark, brokers, make_config, unique_name):
    topic = unique_name
    create_topic(brokers.source, topic, 1)
    values = produce(brokers.source, topic, 0, "f" * 5 + "o" * 30 + "f" * 5)
    config = make_config(
        topics=topic,
        **{
            "mirror.on.gap": "skip",
            "mirror.skip.older.than.ms": str(10 * 60_000),
            "mirror.skip.max.records": "12",
            "mirror.skip.topics": rf"{topic}, other",
        },
    )
    run_once(spark, config)
    # 12 stale records (offsets 5..16) skipped, then the rest of the outage copied again
    assert target_values(brokers.target, f"A.{topic}", 1)[0] == values[:5] + values[17:]
    events = skip_events(brokers.target, topic)
    assert sum(e["records"] for e in events) == 12
    assert min(e["first_offset"] for e in events) == 5
    assert max(e["last_offset"] for e in events) == 16
