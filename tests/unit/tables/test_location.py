"""Which writer holds the tables, asked the same way by every command that reads or keeps them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.tables.location import (
    ensure_spark_tables,
    spark_table_name,
    spark_writer_expected,
    spark_writes_tables,
    table_folder,
)
from mirror_lib.tables.schemas import SCHEMAS
from tests.helpers.fake_spark_conf import FakeSpark, SavingSpark

BASE = {"clusters": "A,B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1"}
DELTA = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}


def test_spark_writes_the_tables_only_over_a_session_with_delta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    config = parse_config(BASE)
    assert not spark_writes_tables(None, config)  # no session: delta-rs
    assert not spark_writes_tables(FakeSpark(), config)
    assert spark_writes_tables(FakeSpark(**DELTA), config)
    forced = parse_config({**BASE, "mirror.tables.writer": "delta-rs"})
    assert not spark_writes_tables(FakeSpark(**DELTA), forced)


def test_a_command_without_a_session_expects_spark_where_the_config_or_databricks_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    assert not spark_writer_expected(parse_config(BASE))  # auto, locally: delta-rs
    assert spark_writer_expected(parse_config({**BASE, "mirror.tables.writer": "spark"}))
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    assert spark_writer_expected(parse_config({**BASE, "mirror.state.dir": "/Volumes/c/s/v"}))
    forced = {**BASE, "mirror.tables.writer": "delta-rs", "mirror.state.dir": "/Volumes/c/s/v"}
    assert not spark_writer_expected(parse_config(forced))


def test_with_sparks_writer_only_the_missing_tables_are_created_and_empty(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The views read every table; one a run already wrote is left as it is."""
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    config = parse_config({**BASE, "mirror.state.dir": str(tmp_path)})
    (Path(table_folder(config, "heartbeats")) / "_delta_log").mkdir(parents=True)
    spark = SavingSpark(**DELTA)
    created = ensure_spark_tables(spark, config)
    missing = [name for name in SCHEMAS if name != "heartbeats"]
    assert created == [spark_table_name(config, n) for n in missing]
    assert spark.saved == [("delta", "ignore", table_folder(config, n), 0) for n in missing]
