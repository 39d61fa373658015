"""Pure pieces of the Spark side: progress parsing, the run plan's parts, writer choice."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError, MirrorRuntimeError
from mirror_lib.spark.plan import RunPlan
from mirror_lib.spark.progress import end_offsets
from mirror_lib.tables.location import (
    catalog_tables,
    save_table,
    spark_table_name,
    table_folder,
    tables_writer,
)
from tests.helpers.fake_spark_conf import FakeSpark


def test_progress_offsets_parse_from_python_repr_and_json():
    repr_form = "{'v': 1, 'topics': {'t': {'id': 'x', 'p': {'0': 5, '1': 7}}}}"
    json_form = '{"v": 1, "topics": {"t": {"id": "x", "p": {"0": 5, "1": 7}}}}'
    for raw in (repr_form, json_form):
        assert end_offsets({"sources": [{"endOffset": raw}]}) == {("t", 0): 5, ("t", 1): 7}
    assert end_offsets(None) == {}


BASE = {"clusters": "A,B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1"}


def test_writer_is_spark_where_delta_exists_else_delta_rs(monkeypatch):
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    config = parse_config(BASE)
    assert tables_writer(FakeSpark(), config) == "delta-rs"
    databricks = FakeSpark(**{"spark.databricks.clusterUsageTags.clusterId": "0123"})
    assert tables_writer(databricks, config) == "spark"
    delta = FakeSpark(**{"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"})
    assert tables_writer(delta, config) == "spark"
    forced = parse_config({**BASE, "mirror.tables.writer": "delta-rs"})
    assert tables_writer(databricks, forced) == "delta-rs"


def test_a_bad_tables_writer_fails_when_the_config_is_parsed():
    with pytest.raises(ConfigError, match=r"mirror\.tables\.writer = 'hive'"):
        parse_config({**BASE, "mirror.tables.writer": "hive"})


def test_spark_writer_tables_are_the_delta_rs_folders_outside_a_catalog(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    local = parse_config({**BASE, "mirror.state.dir": str(tmp_path / "st`ate")})
    folder = str((tmp_path / "st`ate").resolve() / "tables" / "heartbeats")
    assert not catalog_tables(local)
    assert table_folder(local, "heartbeats") == folder
    assert spark_table_name(local, "heartbeats") == "delta.`" + folder.replace("`", "``") + "`"
    in_schema = parse_config({**BASE, "mirror.tables.schema": "main.mirror"})
    assert catalog_tables(in_schema)
    assert spark_table_name(in_schema, "heartbeats") == "main.mirror.heartbeats"


def test_saving_through_spark_without_delta_fails_before_writing(monkeypatch):
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    config = parse_config({**BASE, "mirror.tables.writer": "spark"})
    with pytest.raises(MirrorRuntimeError, match=r"has no Delta.*nothing was written"):
        save_table(object(), FakeSpark(), config, "heartbeats")


def test_bad_tables_settings_name_key_and_valid_values():
    with pytest.raises(ConfigError, match=r"mirror\.tables\.writer"):
        tables_writer(FakeSpark(), parse_config({**BASE, "mirror.tables.writer": "hive"}))
    with pytest.raises(ConfigError, match="true or false"):
        RunPlan.resolve(parse_config({**BASE, "mirror.tables.enabled": "sometimes"}))


def test_no_checkpoint_job_runs_without_emitted_checkpoints(monkeypatch):
    """As MM2 (no checkpoint tasks): sync.group.offsets alone starts no job, and a --once round
    neither runs a cycle nor reports checkpoints."""
    from mirror_lib.replication.context import FlowContext
    from mirror_lib.spark import runner

    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:1",
        "B.bootstrap.servers": "b:1",
        "A->B.enabled": "true",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "true",
        "emit.heartbeats.enabled": "false",
    }
    config = parse_config(props)
    assert runner.companion_jobs(RunPlan.resolve(config, ["A->B"])) == []
    cycles, reports = [], []
    monkeypatch.setattr(runner.SavedCheckpoints, "run", lambda *a, **k: cycles.append(a))
    runner._one_round(FlowContext.create(config, "A->B"), reports.append)
    assert cycles == [] and reports == []


def test_writer_is_spark_on_serverless_whose_conf_refuses_unset_keys(monkeypatch):
    # serverless raises [CONFIG_NOT_AVAILABLE] for configs outside its allowlist, even with a
    # default (databricks-sdk-py#1112); its runtime sets DATABRICKS_RUNTIME_VERSION
    config = parse_config(BASE)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    assert tables_writer(FakeSpark(serverless=True), config) == "delta-rs"
    delta = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}
    assert tables_writer(FakeSpark(serverless=True, **delta), config) == "spark"
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "client.4.0")
    assert tables_writer(FakeSpark(serverless=True), config) == "spark"
    assert tables_writer(FakeSpark(), config) == "spark"
