"""A local Spark Connect server in a JVM of its own, for running the library over Spark Connect.

Notebooks on Databricks shared and serverless compute (and every notebook from DBR 14 on) talk to
Spark through Spark Connect: the Python process has no JVM and no SparkContext; queries, Python
data sources and ``foreachBatch`` functions run on the server. :func:`start_connect_server` starts
pyspark's own ``SparkConnectServer`` (the ``spark-connect`` jar ships in pyspark's ``jars``) with
``spark-submit`` on a free loopback port, so that a client connecting to :attr:`ConnectServer.url`
truly has no JVM. It is stopped by PID (SIGTERM; SIGKILL after a timeout) and its log stays in
:attr:`ConnectServer.log_path`.

The server's Python workers run this interpreter (``PYSPARK_PYTHON``) with this process's
``PYTHONPATH``, so they import the same mirror_lib as the client.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.spark.jvm import LEAN_OPTIONS, LOCAL_CONF, lean_spark_home
from mirror_lib.testing import processes
from mirror_lib.testing.embedded import free_port

MAIN_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
READY_LINE = "Spark Connect server started at"


@dataclasses.dataclass(kw_only=True)
class ConnectServer(processes.ChildProcess):
    """A running Spark Connect server: :attr:`url` for ``SparkSession.builder.remote``."""

    workdir: Path
    port: int

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "connect-server.log"


def _spark_home() -> str:
    """pyspark's folder (``bin``, ``jars``), found without importing pyspark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise MirrorRuntimeError("pyspark is not installed: `make venv` installs it")
    return os.environ.get("SPARK_HOME") or next(iter(spec.submodule_search_locations))


def _command(spark_home: str, port: int, cores: int, conf: Mapping[str, str]) -> list[str]:
    settings = {
        **LOCAL_CONF,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        **conf,
    }
    command = [os.path.join(spark_home, "bin", "spark-submit"), "--class", MAIN_CLASS]
    command += ["--master", f"local[{cores}]", "--name", "mirror-connect-server"]
    command += ["--driver-java-options", " ".join(LEAN_OPTIONS)]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command


def start_connect_server(
    workdir: Path,
    *,
    cores: int = 4,
    conf: Mapping[str, str] | None = None,
    timeout_s: float = 180,
) -> ConnectServer:
    """Start a Spark Connect server (``local[cores]``) and wait until it accepts connections.

    ``conf``: more ``--conf`` settings of the server (its static settings: a Connect client
    cannot change them).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    spark_home = _spark_home()
    if "SPARK_HOME" not in os.environ:  # pip's pyspark: workers import it compiled
        spark_home = lean_spark_home(spark_home)
    server = ConnectServer(workdir=workdir, port=free_port(set()))
    env = {
        **os.environ,
        "SPARK_HOME": spark_home,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    env.pop("SPARK_REMOTE", None)  # the server is the classic session the clients connect to
    with open(server.log_path, "ab") as log:
        try:  # own session: a Ctrl-C in the terminal reaches only us; we stop the server
            proc = subprocess.Popen(
                _command(spark_home, server.port, cores, conf or {}),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=workdir,  # spark-warehouse/, derby.log of the server land here
                start_new_session=True,
            )
        except OSError as e:
            raise MirrorRuntimeError(f"cannot start the Spark Connect server: {e}") from e
    server.adopt(proc)
    try:
        _wait_ready(server, time.monotonic() + timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: ConnectServer, deadline: float) -> None:
    """Wait for the server's "started" line and its port to accept a connection."""
    while True:
        exited = server.exit_report("the Spark Connect server exited during start")
        if exited is not None:
            raise MirrorRuntimeError(exited)
        if READY_LINE in server.log_tail(400):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", server.port), timeout=0.5).close()
                return
        if time.monotonic() > deadline:
            raise MirrorRuntimeError(
                f"the Spark Connect server did not start on {server.url} in time; "
                f"log {server.log_path}:\n{server.log_tail()}"
            )
        time.sleep(0.2)
