"""A Spark Kafka query's checkpoint translated to startingOffsets on the target, then consumed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

from mirror_lib.replication.migration.spark_checkpoint import spark_restart_on_target
from mirror_lib.spark.runner import run_flows
from mirror_lib.testing.kafka_io import consume_all, create_topic
from tests.integration.conftest import write_properties
from tests.integration.test_replication import transactional_source

META = (
    '{"batchWatermarkMs":0,"batchTimestampMs":%d,"conf":{"spark.sql.streaming.stateStore'
    '.providerClass":"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",'
    '"spark.sql.streaming.multipleWatermarkPolicy":"min","spark.sql.shuffle.partitions":"200"}}'
)


def write_checkpoint(root: Path, batches: list[dict], committed: int) -> None:
    """Offset log and commit log as Spark's Kafka source writes them (batches 0..n-1)."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "sources" / "0").mkdir(parents=True)
    (root / "metadata").write_text('{"id":"5f4c7c52-3f0e-4a4e-9d43-1b2a7f1c0b6e"}')
    for batch, offsets in enumerate(batches):
        line = json.dumps(offsets, separators=(",", ":"))
        text = f"v1\n{META % (1_700_000_000_000 + batch)}\n{line}"
        (root / "offsets" / str(batch)).write_text(text)
        (root / "offsets" / f".{batch}.crc").write_bytes(b"crc")
        if batch <= committed:
            (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def read_from(bootstrap: str, start: dict[str, dict[str, int]]) -> list[tuple[int, bytes]]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.partition.eof": True,
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    tps = [TopicPartition(t, int(p), o) for t, parts in start.items() for p, o in parts.items()]
    consumer.assign(tps)
    out, done, deadline = [], set(), time.monotonic() + 30
    while len(done) < len(tps) and time.monotonic() < deadline:
        for m in consumer.consume(500, timeout=0.5):
            if m.error() is None:
                out.append((m.partition(), m.value()))
            elif m.error().code() == KafkaError._PARTITION_EOF:
                done.add(m.partition())
    consumer.close()
    assert len(done) == len(tps), "the target partitions did not reach their end"
    return out


def test_spark_query_checkpoint_restarts_on_the_target_exactly(
    spark, brokers, make_config, tmp_path, unique_name, subprocess_env
):
    topic = unique_name
    create_topic(brokers.source, topic, 2)
    transactional_source(brokers.source, topic)  # markers and aborted runs: upstream gaps
    config = make_config(topics=topic)
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)
    source = consume_all(brokers.source, topic)
    p0 = [r for r in source if r.partition == 0]
    p1 = [r for r in source if r.partition == 1]
    processed = {"0": p0[4].offset + 1, "1": p1[-1].offset + 1}  # p1: everything, then a marker
    checkpoint = tmp_path / "query-checkpoint"
    write_checkpoint(
        checkpoint,
        [{topic: {"0": 2, "1": 1}}, {topic: processed}, {topic: {"0": p0[-1].offset + 1}}],
        committed=1,  # batch 2 was planned but never committed: not processed
    )

    restart = spark_restart_on_target(config, str(checkpoint), "A", "B")
    assert restart.batch_id == 1
    assert restart.options["subscribe"] == f"A.{topic}"
    start = json.loads(restart.options["startingOffsets"])
    assert set(start) == {f"A.{topic}"} and set(start[f"A.{topic}"]) == {"0", "1"}
    got = read_from(brokers.target, start)
    expected = [(r.partition, r.value) for r in source if r.offset >= processed[str(r.partition)]]
    assert got == expected and len(got) == len(p0) - 5

    path = write_properties(tmp_path / "mm2.properties", dict(config.properties))
    for extra in (["--spark-checkpoint", str(checkpoint)],
                  ["--offsets-json", json.dumps({topic: processed})]):  # fmt: skip
        cli = subprocess.run(
            [sys.executable, "-m", "mirror_lib.app.cli", "translate", str(path), "--source", "A",
             "--target", "B", "--json", *extra],
            capture_output=True, text=True, env=subprocess_env, timeout=120,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        assert json.loads(cli.stdout)["startingOffsets"] == start
