"""Job task parameters are checked before anything starts; SQL maintenance for Spark's writer."""

from __future__ import annotations

import pytest

from mirror_lib.app.bundle_tasks import TASKS, main, run_task
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.replication.companions.threads import PARTS
from mirror_lib.spark import runner, session
from mirror_lib.spark.materialize import maintain_tables
from mirror_lib.tables.schemas import TABLES


def test_bad_parameters_fail_before_anything_starts(tmp_path, capsys):
    with pytest.raises(ConfigError, match="config_path = <missing>"):
        run_task("replication", [])
    with pytest.raises(ConfigError, match="job parameter --once"):
        run_task("replication", ["--config-path", "x", "--once", "maybe"])
    with pytest.raises(ConfigError, match="one of replication, companions"):
        run_task("backup", [])
    assert main("maintenance", ["--config-path", str(tmp_path / "none.properties")]) == 2
    assert "CONFIG = " in capsys.readouterr().err
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n")
    assert main("replication", ["--config-path", str(config), "--flows", "A->C"]) == 2
    assert "A->C" in capsys.readouterr().err


def test_a_task_outside_databricks_starts_its_session_on_mirror_spark_master(tmp_path, monkeypatch):
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "A->B.enabled = true\nmirror.spark.master = local-cluster[2,1,1024]\n"
    )
    asked: list[dict[str, str]] = []
    monkeypatch.setattr(
        session, "get_spark", lambda delta=False, **conf: asked.append(conf) or "spark"
    )
    monkeypatch.setattr(runner, "run_flows", lambda spark, *a, **k: spark)
    assert run_task("replication", ["--config-path", str(config)]) == "spark"
    assert asked == [{"spark.master": "local-cluster[2,1,1024]"}]


class RecordingSpark:
    """The SQL a Databricks cluster would run (Delta's Spark writer detected by cluster tags)."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.conf = {"spark.databricks.clusterUsageTags.clusterId": "0101-abc"}
        self.catalog = self

    def tableExists(self, name: str) -> bool:
        return True

    def sql(self, statement: str) -> None:
        self.statements.append(" ".join(statement.split()))


def test_maintenance_with_spark_writer_is_sql_in_the_tables_schema():
    config = parse_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:1",
            "B.bootstrap.servers": "b:1",
            "A->B.enabled": "true",
            "mirror.tables.schema": "main.mirror",
        }
    )
    spark = RecordingSpark()
    done = maintain_tables(config, spark=spark, retention_days=2, vacuum_hours=200)
    assert set(done) == {*TABLES, "views"}
    for table in TABLES:
        assert (
            f"DELETE FROM main.mirror.{table} WHERE record_ts < current_timestamp() - "
            "make_dt_interval(0, 0, 0, 172800)" in spark.statements
        )
        assert f"OPTIMIZE main.mirror.{table}" in spark.statements
        assert (
            f"ALTER TABLE main.mirror.{table} SET TBLPROPERTIES ('delta.checkpointInterval' = "
            "'10', 'delta.deletedFileRetentionDuration' = 'interval 86400 seconds', "
            "'delta.enableExpiredLogCleanup' = 'true', 'delta.logRetentionDuration' = "
            "'interval 86400 seconds', 'delta.targetFileSize' = '33554432')" in spark.statements
        )
        assert f"VACUUM main.mirror.{table} RETAIN 200 HOURS" in spark.statements
    assert "CREATE OR REPLACE VIEW main.mirror.offset_translation AS" in " ".join(spark.statements)


def test_the_running_tasks_split_the_parts_of_a_run_between_them():
    running = [parts for parts, _params in TASKS.values() if parts is not None]
    together = [part for parts in running for part in parts]
    assert sorted(together) == sorted(PARTS), "each part of a run in exactly one task"


def test_maintenance_parameters_left_empty_take_the_configs_settings(tmp_path, monkeypatch):
    """Job parameters are text: an empty one means the config's setting, a number a number."""
    from mirror_lib.spark import materialize

    config = tmp_path / "mm2.properties"
    config.write_text("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n")
    asked: list[tuple[object, object]] = []
    monkeypatch.setattr(
        materialize, "maintain_tables", lambda c, spark, retention_days, vacuum_hours: asked.append(
            (retention_days, vacuum_hours)
        ),
    )  # fmt: skip
    run_task("maintenance", ["--config-path", str(config)], spark="spark")
    run_task("maintenance", ["--config-path", str(config), "--retention-days", "3",
                             "--vacuum-hours", "0"], spark="spark")  # fmt: skip
    assert asked == [(None, None), (3.0, 0.0)]
