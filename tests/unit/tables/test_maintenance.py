"""Maintenance of the delta-rs tables: its settings, the properties that bound each table's
log, and a round only when one is due."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")

from mirror_lib.config.parse import parse_config  # noqa: E402
from mirror_lib.errors import ConfigError  # noqa: E402
from mirror_lib.tables import delta_rs as store  # noqa: E402
from mirror_lib.tables import maintenance, positions  # noqa: E402
from mirror_lib.tables.maintenance import MaintenancePolicy, maintain_if_due  # noqa: E402
from mirror_lib.tables.schemas import SCHEMAS  # noqa: E402


def config(tmp_path, **props: str):
    return parse_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:1",
            "B.bootstrap.servers": "b:1",
            "A->B.enabled": "true",
            "mirror.state.dir": str(tmp_path / "state"),
            **props,
        }
    )


def beats(first: int, n: int = 3) -> pa.Table:
    now = datetime.now(timezone.utc)
    rows = [
        {"cluster": "B", "source": "A", "target": "B", "heartbeat_ts": now, "hops": 0,
         "kafka_topic": "heartbeats", "kafka_partition": 0, "kafka_offset": i, "record_ts": now}
        for i in range(first, first + n)
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=SCHEMAS["heartbeats"])


def test_the_defaults_and_their_table_properties(tmp_path):
    policy = MaintenancePolicy.of(config(tmp_path))
    assert (policy.interval_s, policy.retention_days, policy.history_hours) == (3600, 7, 24)
    assert policy.table_properties() == {
        "delta.checkpointInterval": "10",
        "delta.logRetentionDuration": "interval 86400 seconds",
        "delta.deletedFileRetentionDuration": "interval 86400 seconds",
        "delta.enableExpiredLogCleanup": "true",
        "delta.targetFileSize": str(32 * 1024 * 1024),
    }
    short = MaintenancePolicy.of(config(tmp_path, **{"mirror.tables.history.hours": "1.5"}))
    assert short.vacuum_hours == 1  # VACUUM counts whole hours, never more than the history
    assert short.table_properties()["delta.logRetentionDuration"] == "interval 5400 seconds"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mirror.tables.maintenance.interval.seconds", "5"),
        ("mirror.tables.retention.days", "0"),
        ("mirror.tables.history.hours", "nan"),
        ("mirror.tables.checkpoint.interval", "0"),
    ],
)
def test_bad_values_are_refused_naming_the_key(tmp_path, key, value):
    with pytest.raises(ConfigError, match=key):
        MaintenancePolicy.of(config(tmp_path, **{key: value}))


def test_a_round_sets_the_properties_then_the_log_stays_bounded(tmp_path):
    cfg = config(tmp_path, **{"mirror.tables.checkpoint.interval": "5"})
    root = cfg.state_dir
    store.ensure_tables(root)
    path = store.table_path(root, "heartbeats")
    report = maintain_if_due(cfg)
    assert report is not None and report["heartbeats"]["properties"]["delta.checkpointInterval"]
    for i in range(12):
        positions.append_unseen(root, {"heartbeats": beats(3 * i)}, f"b{i}")
    log = os.listdir(os.path.join(path, "_delta_log"))
    assert any(name.endswith(".checkpoint.parquet") for name in log), sorted(log)
    assert deltalake.DeltaTable(path).metadata().configuration["delta.checkpointInterval"] == "5"


def test_a_round_runs_only_when_due_and_compacts(tmp_path):
    cfg = config(tmp_path, **{"mirror.tables.maintenance.interval.seconds": "600"})
    root = cfg.state_dir
    store.ensure_tables(root)
    for i in range(4):
        positions.append_unseen(root, {"heartbeats": beats(3 * i)}, f"b{i}")
    first = maintain_if_due(cfg, now=1_000_000_000.0)
    assert first is not None and first["heartbeats"]["compact"]["numFilesRemoved"] == 4
    dt = deltalake.DeltaTable(store.table_path(root, "heartbeats"))
    assert len(dt.file_uris()) == 1 and dt.count() == 12
    assert maintenance.last_maintained(root) is not None
    assert maintain_if_due(cfg) is None  # the marker says it ran just now
    later = maintenance.last_maintained(root) + 601
    assert maintain_if_due(cfg, now=later) is not None


def test_zero_turns_the_runs_maintenance_off(tmp_path):
    cfg = config(tmp_path, **{"mirror.tables.maintenance.interval.seconds": "0"})
    store.ensure_tables(cfg.state_dir)
    assert maintain_if_due(cfg) is None
    assert maintenance.last_maintained(cfg.state_dir) is None


def test_a_failed_round_is_retried_at_the_next_call(tmp_path, monkeypatch, caplog):
    cfg = config(tmp_path)
    store.ensure_tables(cfg.state_dir)

    def refuse(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(store, "maintain", refuse)
    assert maintain_if_due(cfg) is None
    assert "disk full" in caplog.text and maintenance.last_maintained(cfg.state_dir) is None
    monkeypatch.undo()
    assert maintain_if_due(cfg) is not None


def test_compaction_rewrites_only_files_under_the_target_size(tmp_path, monkeypatch):
    """A round's compaction follows ``delta.targetFileSize``: a file at or over it is never
    rewritten again (each replaced file stays on disk for the whole history). With a target of
    one byte every file is at it, and the round rewrites nothing."""
    monkeypatch.setattr(maintenance, "TARGET_FILE_BYTES", 1)
    cfg = config(tmp_path)
    root = cfg.state_dir
    store.ensure_tables(root)
    for i in range(4):
        positions.append_unseen(root, {"heartbeats": beats(3 * i)}, f"b{i}")
    report = store.maintain(root, properties=MaintenancePolicy.of(cfg).table_properties())
    assert report["heartbeats"]["compact"]["numFilesRemoved"] == 0
    dt = deltalake.DeltaTable(store.table_path(root, "heartbeats"))
    assert dt.metadata().configuration["delta.targetFileSize"] == "1"
    assert len(dt.file_uris()) == 4 and dt.count() == 12
