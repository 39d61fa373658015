"""A local SparkSession for the embedded default and tests, and the data source registration.

On Databricks the notebook/job passes its own ``spark``; nothing here is used there except
:func:`register_sources`.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from typing import Any

from mirror_lib.config.databricks import on_databricks
from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.spark.delta_source import DeltaRsDataSource
from mirror_lib.spark.jvm import driver_java_options, lean_spark_home, wait_for_archive_at_exit
from mirror_lib.spark.records_source import RecordsDataSource
from mirror_lib.spark.source import MirrorDataSource


def check_java() -> str:
    """The ``java`` local Spark will start; fails early with a clear message when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise MirrorRuntimeError(
            "Java was not found (JAVA_HOME unset and no `java` on PATH): local Spark needs "
            "Java 17 or 21 (e.g. `apt-get install openjdk-17-jre-headless`); nothing was started"
        )
    return java


#: Delta in a local session: the SQL extension and catalog, and a state reconstruction of the
#: small tables here in 2 tasks rather than Delta's default 50 (tens of seconds on 2 cores).
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "2",
}


def with_delta(builder: Any, packages: str = "") -> Any:
    """``builder`` with Delta's Spark writer: ``configure_spark_with_delta_pip`` of the installed
    ``delta-spark`` (its jars and ``packages`` in ``spark.jars.packages``) and
    :data:`DELTA_CONF`.

    Spark resolves the jars with Ivy when the session starts: the first time from Maven Central
    into ``~/.ivy2.5.2``, then from there (docs/testing.md).
    """
    try:
        from delta import configure_spark_with_delta_pip  # lazy: optional extra "delta-spark"
    except ImportError as exc:
        raise MirrorRuntimeError(
            "mirror.tables.writer = spark needs Delta's Spark writer in a local session: "
            "`pip install 'mirror_lib[delta-spark]'` (or set mirror.tables.writer = delta-rs); "
            "nothing was started"
        ) from exc
    extra = [p.strip() for p in packages.split(",") if p.strip()]
    builder = configure_spark_with_delta_pip(builder, extra_packages=extra)
    for key, value in DELTA_CONF.items():
        builder = builder.config(key, value)
    return builder


def local_spark_session(
    app_name: str = "mirror", cores: int = 6, delta: bool = False, **conf: str
) -> Any:
    """Start (or reuse) a local[cores] session tuned for small machines; needs pyspark + Java.

    ``cores`` are task slots, not CPUs: copy tasks hold a slot for a whole slice while mostly
    waiting on Kafka, so there are more slots than CPUs, leaving room for materialization.
    ``delta``: with Delta's Spark writer (:func:`with_delta`).
    """
    java = check_java()
    try:
        import pyspark  # lazy: optional extra "spark"
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise MirrorRuntimeError(
            "pyspark is not installed: `pip install mirror_lib[spark]` (or run `make venv`)"
        ) from exc
    spark_home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, never the LAN
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        # A task killed by a query's stop returned its worker to the reuse pool before the worker
        # died, and the next query's task failed on it ("Python worker exited unexpectedly").
        # Copy tasks live for a slice, so a fresh worker per task costs nothing measurable.
        .config("spark.python.worker.reuse", "false")
        .config("spark.python.worker.faulthandler.enabled", "true")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
    )
    launches = SparkContext._gateway is None  # JVM options only matter to a JVM not yet running
    if launches and "SPARK_HOME" not in os.environ:  # pip's pyspark: workers import it compiled
        spark_home = lean_spark_home(spark_home)
    if launches:
        builder = builder.config(
            "spark.driver.extraJavaOptions", driver_java_options(java, spark_home)
        )
    for key, value in conf.items():
        builder = builder.config(key, value)
    if delta:
        builder = with_delta(builder, conf.get("spark.jars.packages", ""))
    spark = _launch(builder, spark_home if launches else None)
    if launches and SparkContext._gateway is not None:
        wait_for_archive_at_exit(spark, SparkContext._gateway)
    spark.sparkContext.setLogLevel("ERROR")
    register_sources(spark)
    return spark


def _launch(builder: Any, spark_home: str | None) -> Any:
    """``builder.getOrCreate()``, launching the JVM from ``spark_home`` (only this launch sees
    it: the environment is restored after)."""
    if spark_home is None or os.environ.get("SPARK_HOME") == spark_home:
        return builder.getOrCreate()
    before = os.environ.get("SPARK_HOME")
    os.environ["SPARK_HOME"] = spark_home
    try:
        return builder.getOrCreate()
    finally:
        if before is None:
            os.environ.pop("SPARK_HOME", None)
        else:
            os.environ["SPARK_HOME"] = before


#: A local session for one bounded run (``mirror run --once``): no pyspark daemons. A daemon per
#: kind of Python process (task worker, each planner) imports pyspark once and then forks; a
#: bounded run uses each kind once or twice, so the daemons only stay behind, idle, at 45-70 MB
#: each. A continuous run keeps them: there tasks recur, and forking is cheaper than starting.
ONE_RUN_CONF = {"spark.python.use.daemon": "false"}


def get_spark(delta: bool = False, **conf: str) -> Any:
    """The active session (Databricks, a notebook) or a new local one with ``conf`` added
    (``delta``: with Delta's Spark writer, see :func:`local_spark_session`)."""
    try:
        from pyspark.sql import SparkSession  # lazy: optional extra "spark"

        active = SparkSession.getActiveSession()
        if active is None and on_databricks():
            active = SparkSession.builder.getOrCreate()  # a job task: the cluster's session
    except ImportError:
        active = None
    if active is not None:
        register_sources(active)
        return active
    return local_spark_session(delta=delta, **conf)


def session_for_run(delta: bool = False, **conf: str) -> Any:
    """:func:`get_spark` for a run that stops its own queries on Ctrl-C: this process keeps the
    SIGINT handler it had.

    A new SparkContext installs pyspark's handler, which cancels every Spark job before it raises
    KeyboardInterrupt, so each copy task still running was logged as a cancelled job with its
    stack trace. The run stops its queries itself when KeyboardInterrupt arrives, quietly
    (:func:`~mirror_lib.spark.progress.stop_query`), and the transactions they leave open are
    fenced by the next run.
    """
    if threading.current_thread() is not threading.main_thread():
        return get_spark(delta, **conf)  # only the main thread handles signals
    handler = signal.getsignal(signal.SIGINT)
    spark = get_spark(delta, **conf)
    if handler is not None:  # None: a handler installed outside Python, which stays anyway
        signal.signal(signal.SIGINT, handler)
    return spark


def register_sources(spark: Any) -> None:
    """Register mirror_lib's Python data sources on ``spark`` (idempotent)."""
    for source in (
        MirrorDataSource,
        RecordsDataSource,
        DeltaRsDataSource,
    ):
        spark.dataSource.register(source)
