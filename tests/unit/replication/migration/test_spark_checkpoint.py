"""Spark offset logs and consumer offsets JSON: parsed exactly, bad input named before any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mirror_lib.errors import ConfigError, MirrorRuntimeError
from mirror_lib.replication.migration.spark_checkpoint import (
    ConsumerRestart,
    format_restart,
    parse_offset_log,
    parse_offsets_json,
    read_spark_checkpoint,
)

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "mm2.properties"
META = '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{"a":"b"}}'


def folder(tmp_path: Path, offsets: dict[int, str], commits: list[int]) -> Path:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch, text in offsets.items():
        (tmp_path / "offsets" / str(batch)).write_text(text)
        (tmp_path / "offsets" / f".{batch}.crc").write_text("x")
    for batch in commits:
        (tmp_path / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return tmp_path


def test_offset_log_with_several_sources_merges_the_kafka_ones():
    text = f'v1\n{META}\n{{"orders":{{"1":40,"0":12}}}}\n-\n{{"logOffset":3}}\n{{"pay":{{"0":7}}}}'
    assert parse_offset_log(text) == {"orders": {0: 12, 1: 40}, "pay": {0: 7}}


def test_offset_log_without_version_line_is_refused():
    with pytest.raises(ConfigError, match="a Spark offset log starting with v1"):
        parse_offset_log('{"orders":{"0":1}}', "offsets/3")


def test_latest_committed_batch_wins_over_a_planned_one(tmp_path):
    path = folder(
        tmp_path,
        {
            4: f'v1\n{META}\n{{"t":{{"0":5}}}}',
            5: f'v1\n{META}\n{{"t":{{"0":9}}}}',
            6: f'v1\n{META}\n{{"t":{{"0":20}}}}',
        },
        commits=[4, 5],
    )
    got = read_spark_checkpoint(str(path))
    assert (got.batch_id, got.offsets) == (5, {"t": {0: 9}})


def test_checkpoint_without_commits_or_offsets_file(tmp_path):
    with pytest.raises(ConfigError, match="a Spark checkpoint folder with a committed batch"):
        read_spark_checkpoint(str(tmp_path))
    path = folder(tmp_path, {}, commits=[2])
    with pytest.raises(MirrorRuntimeError, match="offsets/2 is missing"):
        read_spark_checkpoint(str(path))


def test_offsets_json_inline_or_file(tmp_path):
    assert parse_offsets_json('{"t": {"0": 3, "2": 8}}') == {"t": {0: 3, 2: 8}}
    file = tmp_path / "offsets.json"
    file.write_text('{"t": {"1": 4}}')
    assert parse_offsets_json(str(file)) == {"t": {1: 4}}
    for bad in ('{"t": [1, 2]}', '{"t": {"x": 1}}', str(tmp_path / "missing.json")):
        with pytest.raises(ConfigError, match="--offsets-json"):
            parse_offsets_json(bad)


def test_restart_options_for_subscribe_and_assign():
    restart = ConsumerRestart(
        "A",
        "B",
        [
            {
                "topic": "t",
                "partition": 1,
                "upstream_offset": 9,
                "remote_topic": "A.t",
                "offset": 7,
            },
            {
                "topic": "t",
                "partition": 0,
                "upstream_offset": 3,
                "remote_topic": "A.t",
                "offset": 3,
            },
        ],
        batch_id=5,
        topics={"t": "A.t"},
    )
    assert restart.options == {"subscribe": "A.t", "startingOffsets": '{"A.t": {"0": 3, "1": 7}}'}
    assert restart.assign == '{"A.t": [0, 1]}'
    text = format_restart(restart)
    assert "last committed batch: 5" in text and "NEW checkpointLocation" in text


def test_cli_translate_needs_a_group_or_a_consumer_offsets_source():
    out = subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", "translate", str(EXAMPLE), "--source", "A",
         "--target", "B"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "--group = <missing>" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", "translate", str(EXAMPLE), "--source", "A",
         "--target", "B", "--offsets-json", "{nope"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "--offsets-json" in out.stderr


def test_an_offset_older_than_the_segments_kept_is_refused_not_moved_forward(monkeypatch):
    """Retention removed the metrics topic's oldest segments: a query that stopped before them
    gets an error naming the partition, not the first kept segment's start (records skipped)."""
    from mirror_lib.config.parse import parse_config
    from mirror_lib.kafka import reach
    from mirror_lib.offsets.segments import Segment, SegmentIndex
    from mirror_lib.replication import translate
    from mirror_lib.replication.migration.spark_checkpoint import translate_consumer_offsets
    from mirror_lib.replication.translate import SegmentScan

    kept = {("orders", 0): SegmentIndex([Segment(10_000, 19_999, 10_000, 19_999)])}
    scan = SegmentScan(kept, 5010, complete=False, floor={("orders", 0): 10_000})
    monkeypatch.setattr(translate, "scan_segments", lambda ctx, needed: scan)
    monkeypatch.setattr(reach, "check_flow_clusters", lambda *a, **kw: None)  # the scan is fake
    props = {"clusters": "A, B", "A->B.enabled": "true"}
    props |= {"A.bootstrap.servers": "127.0.0.1:1", "B.bootstrap.servers": "127.0.0.1:2"}
    config = parse_config(props)
    restart = translate_consumer_offsets(config, {"orders": {0: 12_000}}, "A", "B")
    assert [r["offset"] for r in restart.rows] == [12_000]
    with pytest.raises(MirrorRuntimeError, match=r"orders\[0\] at offset 500: older than"):
        translate_consumer_offsets(config, {"orders": {0: 500}}, "A", "B")


def test_an_offset_mirrormaker_2_copied_before_the_take_over_is_refused(monkeypatch):
    """A flow that took ``orders[0]`` over from MM2 at upstream 1000 (our first segment starts
    there): a query at 500 would otherwise be moved to our first record, past MM2's copies."""
    from mirror_lib.config.parse import parse_config
    from mirror_lib.kafka import reach
    from mirror_lib.offsets.segments import Segment, SegmentIndex
    from mirror_lib.replication import translate
    from mirror_lib.replication.migration.spark_checkpoint import translate_consumer_offsets
    from mirror_lib.replication.translate import SegmentScan

    ours = {("orders", 0): SegmentIndex([Segment(999, 1999, 990, 1990)])}
    scan = SegmentScan(ours, 10, complete=True, mm2_below={("orders", 0): 999})
    monkeypatch.setattr(translate, "scan_segments", lambda ctx, needed: scan)
    monkeypatch.setattr(reach, "check_flow_clusters", lambda *a, **kw: None)  # the scan is fake
    props = {"clusters": "A, B", "A->B.enabled": "true"}
    props |= {"A.bootstrap.servers": "127.0.0.1:1", "B.bootstrap.servers": "127.0.0.1:2"}
    config = parse_config(props)
    restart = translate_consumer_offsets(config, {"orders": {0: 999}}, "A", "B")
    assert [r["offset"] for r in restart.rows] == [990]
    with pytest.raises(MirrorRuntimeError, match=r"orders\[0\] at offset 500: copied by Mirr"):
        translate_consumer_offsets(config, {"orders": {0: 500}}, "A", "B")
