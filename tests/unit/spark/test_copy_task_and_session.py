"""A copy task's summary row without pandas, and the local session of a run (bounded, or on
separate executors)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql.types import LongType, StructField, StructType

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError, MirrorRuntimeError
from mirror_lib.replication.copy.writer import CopyResult
from mirror_lib.spark import session
from mirror_lib.spark.copy_task import summary_batch
from mirror_lib.spark.delta_source import DeltaRsDataSource
from mirror_lib.spark.plan import RunPlan
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
    monkeypatch.setattr(
        session,
        "local_spark_session",
        lambda app_name, cores, delta, **conf: made.append({"delta": delta, **conf}) or "new",
    )
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


BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
}


def test_a_run_starts_its_local_session_on_mirror_spark_master():
    cluster = parse_config({**BASE, "mirror.spark.master": " local-cluster[2, 1, 1024] "})
    plan = RunPlan.resolve(cluster)
    assert plan.session_conf == {"spark.master": "local-cluster[2,1,1024]"}
    assert RunPlan.resolve(parse_config(BASE), once=True).session_conf == session.ONE_RUN_CONF


def test_one_shot_commands_start_the_session_a_once_run_starts(monkeypatch):
    """verify, cutover, status and the dashboard: mirror.spark.master too, not local[6]."""
    got = {}
    monkeypatch.setattr(session, "get_spark", lambda delta, **conf: got.update(conf) or delta)
    config = parse_config({**BASE, "mirror.spark.master": "local[2]"})
    assert session.command_session(config) is False
    assert got == {**session.ONE_RUN_CONF, "spark.master": "local[2]"}


@pytest.mark.parametrize(
    "master", ["yarn", "spark://h:7077", "local[0]", "local-cluster[2,1]", "local-cluster[2,1,256]"]
)
def test_a_master_a_local_run_cannot_start_is_refused_before_anything_starts(master):
    with pytest.raises(ConfigError) as err:
        parse_config({**BASE, "mirror.spark.master": master})
    assert err.value.key == "mirror.spark.master"
    assert "local-cluster[E,C,M]" in str(err.value) and "M >= 450" in str(err.value)


def test_local_cluster_executors_get_the_worker_memory_and_this_mirror_lib(monkeypatch):
    """A Python worker of an executor starts in the executor's work folder: it finds this
    checkout's mirror_lib only through PYTHONPATH."""
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setattr(session.site, "getsitepackages", lambda: ["/no/site-packages"])
    conf = session.cluster_conf("local-cluster[2,1,512]")
    assert conf["spark.executor.memory"] == "512m"  # the default 1g would never start on 512
    checkout = str(Path(session.__file__).resolve().parents[2])
    assert conf["spark.executorEnv.PYTHONPATH"].split(os.pathsep) == [checkout, "/elsewhere"]
    monkeypatch.setattr(session.site, "getsitepackages", lambda: [checkout])  # installed there
    assert "spark.executorEnv.PYTHONPATH" not in session.cluster_conf("local-cluster[2,1,512]")


def test_deltars_reader_takes_a_relative_path_as_the_driver_s(tmp_path, monkeypatch):
    """Executors read the table in their own work folder: the pickled reader holds an absolute
    path."""
    write_deltalake(str(tmp_path / "t"), pa.table({"n": pa.array([1], pa.int64())}))
    monkeypatch.chdir(tmp_path)
    schema = StructType([StructField("n", LongType())])
    assert DeltaRsDataSource({"path": "t"}).reader(schema).path == str(tmp_path / "t")


def test_a_copy_worker_ends_when_the_process_that_started_it_is_killed(tmp_path):
    """As a Python worker whose executor JVM is SIGKILLed (no pyspark daemon, ``--once``)."""
    started = tmp_path / "worker.pid"
    worker = tmp_path / "worker.py"
    worker.write_text(
        "import os, sys, time\n"
        "from mirror_lib.spark.copy_task import exit_with_parent\n"
        "exit_with_parent(0.1)\n"
        f"open({str(started)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(120)\n"
    )
    starter = f"import subprocess, sys, time; subprocess.Popen([sys.executable, {str(worker)!r}])"
    env = {**os.environ, "PYTHONPATH": str(Path(session.__file__).resolve().parents[2])}
    parent = subprocess.Popen([sys.executable, "-c", starter + "; time.sleep(120)"], env=env)
    try:
        deadline = time.monotonic() + 30
        while not (started.exists() and started.read_text()):
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.1)
        pid = int(started.read_text())
        parent.kill()  # SIGKILL
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _running(pid):
            assert time.monotonic() < deadline, "the worker outlived the process that started it"
            time.sleep(0.1)
    finally:
        parent.kill()


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for its (new) parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_more_copy_slots_than_the_session_has_cores_are_warned_about():
    from mirror_lib.spark.session import slots_text

    assert slots_text({"A->B": 2, "B->A": 2}, 6) is None
    assert slots_text({"A->B": 4}, None) is None  # Spark Connect does not say
    text = slots_text({"A->B": 4, "B->A": 4}, 6)
    assert text is not None
    assert text.startswith("8 copy slots (A->B: 4, B->A: 4; tasks.max of each)")
    assert "6 cores" in text and "mirror.spark.master = local[N]" in text
