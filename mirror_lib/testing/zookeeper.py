"""The ZooKeeper server of a ZooKeeper-mode Apache Kafka test cluster (Kafka 2.x): one standalone
server on a free loopback port, with its own folder, stopped by PID and restartable on its data.

It runs from the broker release's own jar set (Kafka's jars depend on the ZooKeeper it was built
with: 3.5.9 for Kafka 2.8), with the JVM command of :mod:`mirror_lib.testing.kafka_jvm`, as
Kafka's bin/zookeeper-server-start.sh runs it. A :class:`~mirror_lib.testing.kafka_broker.
KafkaBroker` of a ZooKeeper-mode release starts its server before itself
(``KafkaOptions(version="2.8")``); nothing here is needed directly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import time
from pathlib import Path

from mirror_lib.errors import EmbeddedBrokerError
from mirror_lib.testing import processes
from mirror_lib.testing.kafka_jvm import java_command, write_logging

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
#: ZooKeeper keeps only znodes: a small heap (bin/zookeeper-server-start.sh gives 512 MB).
HEAP_MB = 128
#: A tick of 500 ms lets a broker's session be as short as 1 s (two ticks): a broker killed and
#: started again registers within seconds, once its old session has expired.
TICK_MS = 500


@dataclasses.dataclass
class ZooKeeperServer(processes.ChildProcess):
    """One standalone ZooKeeper server: its port, folder and (while running) process."""

    workdir: Path
    port: int
    version: str  # the Kafka release whose jars it runs from

    @property
    def connect(self) -> str:
        """What a broker's ``zookeeper.connect`` names."""
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "zookeeper.log"

    def settings(self) -> dict[str, str]:
        """zoo.cfg: loopback only, no admin web server, ``ruok`` allowed (the readiness check)."""
        return {
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": "127.0.0.1",
            "tickTime": str(TICK_MS),
            "maxClientCnxns": "0",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok",
        }

    def command(self) -> list[str]:
        return java_command(
            self.workdir, HEAP_MB, MAIN_CLASS, str(self.workdir / "zoo.cfg"), version=self.version
        )

    def start(self, ready_timeout_s: float = 60) -> None:
        """Start the server on its port and data; wait until it answers ``ruok``."""
        if self.is_running():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "zoo.cfg").write_text(
            "".join(f"{k}={v}\n" for k, v in self.settings().items())
        )
        write_logging(self.workdir, self.version)
        self.spawn(self.command(), "java for ZooKeeper")
        self._wait_ready(time.monotonic() + ready_timeout_s)

    def _wait_ready(self, deadline: float) -> None:
        while True:
            exited = self.exit_report(f"ZooKeeper on port {self.port} exited during start")
            if exited is not None:
                raise EmbeddedBrokerError(exited)
            if _answers_ruok(self.port):
                return
            if time.monotonic() > deadline:
                raise EmbeddedBrokerError(
                    f"ZooKeeper did not answer ruok on {self.connect} in time; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.1)


def _answers_ruok(port: int) -> bool:
    with (
        contextlib.suppress(OSError),
        socket.create_connection(("127.0.0.1", port), timeout=1) as sock,
    ):
        sock.sendall(b"ruok")
        return sock.recv(4) == b"imok"
    return False
