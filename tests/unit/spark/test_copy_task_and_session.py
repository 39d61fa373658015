"""A copy task's summary row without pandas, and the local session of a bounded run."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.replication.copy.writer import CopyResult
from mirror_lib.spark import session
from mirror_lib.spark.copy_task import summary_batch
from mirror_lib.spark.source import SCHEMA


def test_summary_batch_holds_the_row_in_the_schema_of_the_source():
    batch = summary_batch(3, CopyResult(3, records=2**40 + 7, transactions=12))
    assert batch.to_pylist() == [{"slot": 3, "records": 2**40 + 7, "transactions": 12}]
    assert ", ".join(f"{f.name} {f.type}" for f in batch.schema) == SCHEMA.replace(
        " int,", " int32,"
    ).replace(" long", " int64")


def test_summary_batch_does_not_import_pandas():
    """pyarrow's ``pa.array`` imports pandas on first use (40 MB in every copy worker)."""
    code = textwrap.dedent(
        """
        import sys
        from mirror_lib.replication.copy.writer import CopyResult
        from mirror_lib.spark.copy_task import summary_batch
        summary_batch(0, CopyResult(0, records=1, transactions=1))
        import pyarrow as pa
        print("pandas" in sys.modules)
        pa.array([1])  # the check itself can fail: this is what imports pandas
        print("pandas" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_get_spark_adds_conf_to_a_new_local_session_only(monkeypatch):
    made: list[dict[str, str]] = []
    monkeypatch.setattr(session, "local_spark_session", lambda **conf: made.append(conf) or "new")
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    assert session.get_spark(**session.ONE_RUN_CONF) == "new"
    assert session.get_spark(delta=True) == "new"
    assert made == [{"delta": False, "spark.python.use.daemon": "false"}, {"delta": True}]


def test_a_local_session_without_delta_spark_says_what_to_install(monkeypatch):
    """mirror.tables.writer = spark in a local session needs the delta-spark package."""
    import builtins

    real_import = builtins.__import__

    def no_delta(name: str, *args: object, **kwargs: object) -> object:
        if name == "delta":
            raise ImportError("No module named 'delta'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_delta)
    with pytest.raises(MirrorRuntimeError, match=r"mirror_lib\[delta-spark\].*nothing was started"):
        session.with_delta(object())


def test_a_run_keeps_its_ctrl_c_handler_when_spark_installs_its_own(monkeypatch):
    """pyspark's SparkContext replaces the SIGINT handler with one that cancels every job."""

    def pyspark_handler(signum: int, frame: object) -> None:
        raise AssertionError("pyspark's handler must not stay")

    def fake_get_spark(delta: bool = False, **conf: str) -> str:
        signal.signal(signal.SIGINT, pyspark_handler)
        return "session"

    monkeypatch.setattr(session, "get_spark", fake_get_spark)
    before = signal.getsignal(signal.SIGINT)
    try:
        assert session.session_for_run() == "session"
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGINT, before)
