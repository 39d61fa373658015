"""The top-level settings a run reads once: :class:`RunSettings`."""

from __future__ import annotations

import pytest

from mirror_lib.config.global_settings import ONCE_OUTAGE_MAX_S, RunSettings
from mirror_lib.errors import ConfigError


def test_outage_limits_are_forever_for_continuous_runs_bounded_for_once_or_as_set():
    continuous = RunSettings.of({})
    assert continuous.outage_limit_s is None and continuous.stall_limit_s == ONCE_OUTAGE_MAX_S
    assert RunSettings.of({}, once=True).outage_limit_s == ONCE_OUTAGE_MAX_S == 120
    for once in (False, True):
        limited = RunSettings.of({"mirror.outage.max.seconds": " 30 "}, once)
        assert limited.outage_limit_s == limited.stall_limit_s == 30
    with pytest.raises(ConfigError, match=r"mirror\.outage\.max\.seconds = '-1'.*> 0"):
        RunSettings.of({"mirror.outage.max.seconds": "-1"})


def test_a_local_session_loads_delta_only_when_the_spark_writer_is_chosen():
    assert not RunSettings.of({}).session_delta  # auto: delta-rs locally, a lean JVM
    assert not RunSettings.of({"mirror.tables.writer": "delta-rs"}).session_delta
    assert RunSettings.of({"mirror.tables.writer": " Spark "}).session_delta
    with pytest.raises(ConfigError, match=r"mirror\.tables\.writer = 'hive'.*auto, delta-rs"):
        RunSettings.of({"mirror.tables.writer": "hive"})


def test_tables_and_the_spark_master_are_read_with_their_defaults():
    default = RunSettings.of({})
    assert default.tables and default.tables_writer == "auto" and default.spark_master == ""
    off = RunSettings.of({"mirror.tables.enabled": "FALSE", "mirror.spark.master": "local[2]"})
    assert not off.tables and off.spark_master == "local[2]"
    with pytest.raises(ConfigError, match=r"mirror\.tables\.enabled = 'sometimes'.*true or false"):
        RunSettings.of({"mirror.tables.enabled": "sometimes"})
