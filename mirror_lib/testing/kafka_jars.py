"""Apache Kafka's jars from Maven Central, fetched once into a cache outside the repository.

The broker of the integration tests and the bench is Apache Kafka itself (``kafka.Kafka`` from
``org.apache.kafka:kafka_2.13``), and MirrorMaker 2 is ``org.apache.kafka:connect-mirror`` at the
same version. Both are resolved with Maven (``mvn dependency:copy-dependencies`` on a throw-away
POM), so every runtime dependency comes along, and copied into
``$MIRROR_JARS_CACHE/<set>-<version>/`` (default ``~/.cache/mirror_lib/jars``). A finished set
has a ``.complete`` marker; a half-fetched one is never used. A file lock lets several test
workers ask at once: one fetches, the others wait and reuse.

Version 4.3.1 is the default: the newest Apache Kafka release whose broker *and* MirrorMaker 2
both resolve from Maven Central here (``connect-mirror:4.4.0`` is not served), so the broker and
MM2 we test against are one release, as a user's would be. The broker of the other releases in
:data:`RELEASES` (the ones people migrate from, and the newest) is fetched the same way on first
use: ``jar_dir("kafka", "2.8")``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mirror_lib.errors import ConfigError, EmbeddedBrokerError

KAFKA_VERSION = "4.3.1"
CACHE_ENV = "MIRROR_JARS_CACHE"
MAVEN_ENV = "MIRROR_MVN"
_CENTRAL = "Maven Central (the repository configured for mvn on this machine)"


def _log4j2(version: str) -> tuple[str, ...]:
    """The SLF4J 1.x binding of log4j2 ``version``: how Kafka 4.x logs (its jars bring log4j2
    itself, not the binding)."""
    return (f"org.apache.logging.log4j:log4j-slf4j-impl:{version}",)


#: How Kafka 2.8 and 3.x log: log4j 1.2's API through reload4j (its maintained drop-in, which
#: Apache Kafka's own distribution ships since 2.8.2 and 3.1.1), bound to SLF4J 1.7.
_RELOAD4J = ("ch.qos.reload4j:reload4j:1.2.25", "org.slf4j:slf4j-reload4j:1.7.36")


@dataclasses.dataclass(frozen=True)
class Release:
    """One Apache Kafka release the tests run as a broker.

    ``zookeeper``: its metadata lives in ZooKeeper (2.x; the ZooKeeper server comes in the same
    jar set, as Kafka's jars depend on it); else KRaft. ``logging``: the SLF4J binding added to
    its jars; ``log4j2`` says whether that is log4j 2 (Kafka 4.x) or log4j 1.2's API (older)."""

    version: str
    logging: tuple[str, ...]
    zookeeper: bool = False

    @property
    def log4j2(self) -> bool:
        return any(c.startswith("org.apache.logging.log4j:") for c in self.logging)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


#: The broker releases the tests run, by version; :func:`release` also takes ``major.minor``.
RELEASES: dict[str, Release] = {
    r.version: r
    for r in (
        Release(KAFKA_VERSION, _log4j2("2.25.3")),  # the log4j2 that kafka 4.3.1's jars use
        Release("4.4.0", _log4j2("2.25.5")),
        Release("3.9.1", _RELOAD4J),
        Release("2.8.2", _RELOAD4J, zookeeper=True),  # ZooKeeper 3.5.9, from kafka's own POM
    )
}


def release(version: str = KAFKA_VERSION) -> Release:
    """The release ``version`` (``"2.8.2"`` or ``"2.8"``) of :data:`RELEASES`."""
    by_minor = {r.version.rsplit(".", 1)[0]: r for r in RELEASES.values()}
    found = RELEASES.get(version) or by_minor.get(version)
    if found is None:
        valid = ", ".join(sorted(RELEASES, key=lambda v: [int(p) for p in v.split(".")]))
        raise ConfigError("Kafka release", version, f"one of {valid} (or its major.minor)")
    return found


def coordinates(name: str, version: str = KAFKA_VERSION) -> tuple[str, ...]:
    """What jar set ``name`` holds at ``version``, as Maven coordinates ``group:artifact:version``:
    ``kafka`` (the broker of any release in :data:`RELEASES`) or ``mm2`` (MirrorMaker 2, of the
    default release only)."""
    rel = release(version)
    if name == "kafka":
        return (f"org.apache.kafka:kafka_2.13:{rel.version}", *rel.logging)
    if name == "mm2" and rel.version == KAFKA_VERSION:
        return (
            f"org.apache.kafka:connect-mirror:{rel.version}",
            f"org.apache.kafka:connect-mirror-client:{rel.version}",
            *rel.logging,
        )
    if name == "mm2":
        raise ConfigError("MirrorMaker 2 release", version, f"{KAFKA_VERSION} (the one served)")
    raise EmbeddedBrokerError(f"unknown jar set {name!r}: one of ['kafka', 'mm2']")


def cache_root() -> Path:
    """Where jar sets are kept: ``$MIRROR_JARS_CACHE`` or ``~/.cache/mirror_lib/jars``."""
    override = os.environ.get(CACHE_ENV, "").strip()
    return Path(override) if override else Path.home() / ".cache" / "mirror_lib" / "jars"


def jar_dir(name: str = "kafka", version: str = KAFKA_VERSION) -> Path:
    """The folder of jar set ``name`` at ``version`` (see :func:`coordinates`), fetched on first
    use."""
    wanted = coordinates(name, version)
    full = release(version).version
    target = cache_root() / f"{name}-{full}"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{name}-{full}.lock"):
        if not (target / ".complete").exists():
            _fetch(wanted, target)
    return target


def classpath(*names: str, version: str = KAFKA_VERSION) -> str:
    """A ``java -cp`` value holding the jar sets ``names`` (default: the broker's) at
    ``version``."""
    return os.pathsep.join(str(jar_dir(n, version) / "*") for n in (names or ("kafka",)))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pom(coordinates: tuple[str, ...]) -> str:
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in (c.split(":") for c in coordinates)
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>mirror-lib.local</groupId><artifactId>jar-fetch</artifactId>"
        f"<version>1</version><packaging>pom</packaging><dependencies>{deps}</dependencies>"
        "</project>"
    )


def _fetch(coordinates: tuple[str, ...], target: Path) -> None:
    mvn = os.environ.get(MAVEN_ENV) or shutil.which("mvn")
    what = ", ".join(coordinates)
    if not mvn:
        raise EmbeddedBrokerError(
            f"cannot fetch {what}: Maven (mvn) is not installed; install it "
            f"(apt-get install maven) or set {MAVEN_ENV} to its path"
        )
    with tempfile.TemporaryDirectory(prefix="mirror-jars-", dir=target.parent) as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(_pom(coordinates))
        out = work / "libs"
        cmd = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(work / "pom.xml"),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={out}",
            "-DincludeScope=runtime",
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        except subprocess.TimeoutExpired as e:
            raise EmbeddedBrokerError(
                f"fetching {what} from {_CENTRAL} took over 15 minutes; tried: {' '.join(cmd)}"
            ) from e
        if done.returncode != 0 or not any(out.glob("*.jar")):
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
            raise EmbeddedBrokerError(
                f"cannot fetch {what} from {_CENTRAL}: mvn exited {done.returncode}; "
                f"tried: {' '.join(cmd)}\n{tail}"
            )
        (out / ".complete").write_text("\n".join(coordinates) + "\n")
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)


def main() -> None:
    """``python -m mirror_lib.testing.kafka_jars [SET[:VERSION]...]``: fetch the sets (``kafka``,
    ``mm2``, ``kafka:2.8``, ...), print their folders."""
    import sys

    for spec in sys.argv[1:] or ["kafka"]:
        name, _, version = spec.partition(":")
        print(jar_dir(name, version or KAFKA_VERSION))


if __name__ == "__main__":
    main()
