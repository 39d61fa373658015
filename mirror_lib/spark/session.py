"""The Spark session of a run: a local one for the embedded default and tests, the data source
registration, and the compute shape a session gives, with what a shape cannot host.

On Databricks the notebook/job passes its own ``spark``; nothing here starts a session there.
The compute shapes (:func:`compute_shape`), refused before anything starts where a run needs
what its shape lacks (:func:`check_compute`):

* classic: a driver JVM in this process (a local session, a Databricks job cluster);
* Spark Connect: no JVM and no SparkContext here (Databricks shared clusters, a Spark Connect
  server such as :mod:`mirror_lib.testing.connect_server`); queries, Python data sources and
  ``foreachBatch`` run on the server, driver threads (checkpoints, heartbeats, delta-rs tables)
  in this process. Everything ``run_flows`` does runs there;
* serverless: Databricks serverless compute, Spark Connect with only ``availableNow`` triggers
  and no driver port anyone can reach. Only the catch-up shape (``once``) runs there.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mirror_lib.config.databricks import on_databricks
from mirror_lib.config.global_settings import RunSettings
from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError, MirrorRuntimeError
from mirror_lib.replication.metrics.metrics_endpoint import MetricsEndpoint
from mirror_lib.spark.delta_source import DeltaRsDataSource
from mirror_lib.spark.jvm import (
    LEAN_OPTIONS,
    LOCAL_CONF,
    driver_java_options,
    lean_spark_home,
    wait_for_archive_at_exit,
)
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
    ``spark.master`` in ``conf`` replaces ``local[cores]``: ``local-cluster[E,C,M]`` starts E
    executor processes (:func:`cluster_conf`), so that tasks run as on a cluster, away from the
    driver's process and working folder.
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
    master = conf.pop("spark.master", "") or f"local[{cores}]"
    builder = SparkSession.builder.master(master).appName(app_name).config(map=LOCAL_CONF)
    launches = SparkContext._gateway is None  # JVM options only matter to a JVM not yet running
    if launches and "SPARK_HOME" not in os.environ:  # pip's pyspark: workers import it compiled
        spark_home = lean_spark_home(spark_home)
    if launches:
        builder = builder.config(
            "spark.driver.extraJavaOptions", driver_java_options(java, spark_home)
        )
    if launches and master.startswith("local-cluster"):
        conf = {**cluster_conf(master), **conf}
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


def cluster_conf(master: str) -> dict[str, str]:
    """Executor settings of a ``local-cluster[E,C,M]`` session.

    - ``spark.executor.memory`` = M MB: Spark's default (1g) is more than a smaller worker
      offers, and then no executor would ever start;
    - the driver's lean JVM options (:mod:`mirror_lib.spark.jvm`; records never pass through
      an executor's JVM either), without its class archive, made for the driver's class path;
    - ``PYTHONPATH`` with the folder this ``mirror_lib`` was imported from, unless it is
      installed in site-packages: a Python worker of an executor starts in that executor's work
      folder, so a ``mirror_lib`` that the driver found in its working folder would not be found.
    """
    memory_mb = master.rstrip("]").split(",")[-1].strip()
    conf = {
        "spark.executor.memory": f"{memory_mb}m",
        "spark.executor.extraJavaOptions": " ".join(LEAN_OPTIONS),
        # each session leaves its executors' folders (their logs) in $SPARK_HOME/work; the
        # workers of a later session remove those older than a day
        "spark.worker.cleanup.enabled": "true",
        "spark.worker.cleanup.interval": "60",
        "spark.worker.cleanup.appDataTtl": str(24 * 3600),
    }
    root = str(Path(__file__).resolve().parents[2])
    site_dirs = (*site.getsitepackages(), site.getusersitepackages())
    installed = {str(Path(p).resolve()) for p in site_dirs}
    if root not in installed:
        paths = [root, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
        conf["spark.executorEnv.PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return conf


#: A local session for one bounded run (``mirror run --once``): no pyspark daemons. A daemon per
#: kind of Python process (task worker, each planner) imports pyspark once and then forks; a
#: bounded run uses each kind once or twice, so the daemons only stay behind, idle, at 45-70 MB
#: each. A continuous run keeps them: there tasks recur, and forking is cheaper than starting.
ONE_RUN_CONF = {"spark.python.use.daemon": "false"}


def run_conf(master: str, once: bool) -> dict[str, str]:
    """The conf of the local session a run starts: ``master`` (``mirror.spark.master``; empty:
    the default), and :data:`ONE_RUN_CONF` for ``--once``."""
    return {**(ONE_RUN_CONF if once else {}), **({"spark.master": master} if master else {})}


def get_spark(delta: bool = False, **conf: str) -> Any:
    """The active session (Databricks, a notebook), a Spark Connect session to ``SPARK_REMOTE``,
    or a new local one; ``conf`` is added to a new session (``delta``: with Delta's Spark
    writer, see :func:`local_spark_session`)."""
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
    url = connect_url()
    if url is not None:
        # ONE_RUN_CONF is about the daemons of a JVM this process starts: a Connect server's
        # workers are the server's business.
        return connect_session(url, **{k: v for k, v in conf.items() if k not in ONE_RUN_CONF})
    return local_spark_session("mirror", 6, delta, **conf)


def command_session(config: MirrorConfig) -> Any:
    """:func:`get_spark` for a one-shot command over ``config`` (``status``, ``verify``,
    ``cutover``, ``dashboard``): a new local session is the one ``mirror run --once`` starts for
    it (Delta's writer, ``mirror.spark.master``)."""
    return settings_session(RunSettings.of(config.properties, once=True), once=True)


def settings_session(settings: RunSettings, once: bool) -> Any:
    """:func:`get_spark`, a new local session loading Delta and on the master as ``settings``
    ask (``once``: a bounded run's, without the pyspark daemons)."""
    return get_spark(settings.session_delta, **run_conf(settings.spark_master, once))


def connect_url() -> str | None:
    """``SPARK_REMOTE`` (pyspark's own variable, e.g. ``sc://127.0.0.1:15002``): the Spark
    Connect server that :func:`get_spark` connects to instead of starting a local session."""
    return os.environ.get("SPARK_REMOTE", "").strip() or None


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session: no JVM and no SparkContext in this process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def connect_session(url: str, **conf: str) -> Any:
    """A Spark Connect session to ``url`` with the runtime settings ``conf``.

    A static setting (the driver's memory, the warehouse folder, ...) belongs to the server,
    which already runs: it is refused, not dropped as pyspark's builder does with a warning.
    """
    try:
        from pyspark.sql.connect.session import SparkSession  # lazy: optional extra "connect"
    except ImportError as exc:
        raise MirrorRuntimeError(
            f"SPARK_REMOTE = {url} needs pyspark's Spark Connect client: "
            f"`pip install mirror_lib[connect]` (or run `make venv`); {exc}"
        ) from exc
    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in conf.items():
        if not spark.conf.isModifiable(key):
            raise ConfigError(
                key,
                value,
                "a runtime setting: a Spark Connect session cannot change the server's static "
                "settings; set it where the server starts (spark-submit --conf, the cluster)",
                where=f"the Spark Connect session to {url}",
            )
        spark.conf.set(key, value)
    register_sources(spark)
    return spark


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


CLASSIC = "classic"
CONNECT = "Spark Connect"
SERVERLESS = "serverless"


def compute_shape(spark: Any, env: Mapping[str, str] | None = None) -> str:
    """:data:`CLASSIC`, :data:`CONNECT` or :data:`SERVERLESS` for ``spark`` (None: the session
    :func:`get_spark` would give)."""
    env = os.environ if env is None else env
    # serverless notebooks and jobs report their client environment, e.g. "client.4.1"
    if env.get("DATABRICKS_RUNTIME_VERSION", "").startswith("client."):
        return SERVERLESS
    remote = is_connect(spark) if spark is not None else connect_url() is not None
    return CONNECT if remote else CLASSIC


def check_compute(
    spark: Any,
    *,
    once: bool,
    endpoint: MetricsEndpoint | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Refuse (ConfigError) what the run's compute shape cannot host, naming what to use;
    ``endpoint``: the metrics endpoint the run serves, if any."""
    shape = compute_shape(spark, env)
    if shape != SERVERLESS:
        return
    if not once:
        raise ConfigError(
            "once",
            False,
            "true on serverless compute: the continuous shape needs classic job compute "
            "(processingTime triggers, companion threads that outlive a query); on serverless "
            "use the catch-up job (the bundle's mirror_catch_up, --once=true)",
        )
    if endpoint is not None:
        raise ConfigError(
            endpoint.port_key,
            endpoint.port,
            "unset on serverless compute: the Prometheus endpoint needs classic job compute, "
            "whose driver port a scraper can reach; on serverless read the tables instead "
            "(mirror status, the views, the dashboard)",
        )


def session_cores(spark: Any) -> int | None:
    """The cores a classic session runs tasks on (``local[N]``: N; a cluster: its executors'
    cores); None under Spark Connect, which does not say."""
    if is_connect(spark):
        return None
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # a session that cannot tell is not refused for it
        return None


def slots_text(slots: Mapping[str, int], cores: int | None) -> str | None:
    """A warning when the copy slots of a run's queries (``tasks.max`` of each) outnumber the
    session's cores: a slot beyond them waits for a free core a whole slice at a time, so its
    partitions fall behind; None when they fit."""
    total = sum(slots.values())
    if cores is None or total <= cores:
        return None
    each = ", ".join(f"{name}: {n}" for name, n in slots.items())
    return (
        f"{total} copy slots ({each}; tasks.max of each) but the Spark session has {cores} cores: "
        "the slots beyond them wait for a free core a slice at a time, so their partitions fall "
        "behind. Lower tasks.max, or give the session more cores (mirror.spark.master = "
        "local[N] for a local run, more workers on a cluster)"
    )
