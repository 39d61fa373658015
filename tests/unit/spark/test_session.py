"""Compute shapes and what serverless refuses (the Connect tier runs them for real)."""

from __future__ import annotations

import pytest

from mirror_lib.errors import ConfigError
from mirror_lib.spark.session import CLASSIC, CONNECT, SERVERLESS, check_compute, compute_shape

ON_SERVERLESS = {"DATABRICKS_RUNTIME_VERSION": "client.4.1"}
ON_A_CLUSTER = {"DATABRICKS_RUNTIME_VERSION": "17.3"}


def test_the_shape_of_a_run(monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert compute_shape(None, {}) == CLASSIC
    assert compute_shape(None, ON_A_CLUSTER) == CLASSIC
    assert compute_shape(None, ON_SERVERLESS) == SERVERLESS
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    assert compute_shape(None, {}) == CONNECT


def test_serverless_hosts_only_the_catch_up_shape(monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    check_compute(None, once=False, env=ON_A_CLUSTER)
    check_compute(None, once=True, env=ON_SERVERLESS)
    with pytest.raises(ConfigError, match="once = False: expected true on serverless compute"):
        check_compute(None, once=False, env=ON_SERVERLESS)
