"""Apache Kafka's jars from Maven Central, fetched once into a cache outside the repository.

The broker of the integration tests and the bench is Apache Kafka itself (``kafka.Kafka`` from
``org.apache.kafka:kafka_2.13``), and MirrorMaker 2 is ``org.apache.kafka:connect-mirror`` at the
same version. Both are resolved with Maven (``mvn dependency:copy-dependencies`` on a throw-away
POM), so every runtime dependency comes along, and copied into
``$MIRROR_JARS_CACHE/<set>-<version>/`` (default ``~/.cache/mirror_lib/jars``). A finished set
has a ``.complete`` marker; a half-fetched one is never used. A file lock lets several test
workers ask at once: one fetches, the others wait and reuse.

Version 4.3.1: the newest Apache Kafka release whose broker *and* MirrorMaker 2 both resolve from
Maven Central here (``connect-mirror:4.4.0`` is not served), so the broker and MM2 we test against
are one release, as a user's would be.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mirror_lib.errors import EmbeddedBrokerError

KAFKA_VERSION = "4.3.1"
CACHE_ENV = "MIRROR_JARS_CACHE"
MAVEN_ENV = "MIRROR_MVN"
_LOG4J = "2.25.3"  # the log4j2 line kafka 4.3's own jars use; its SLF4J 1.x binding
_CENTRAL = "Maven Central (the repository configured for mvn on this machine)"

#: What each jar set holds: Maven coordinates ``group:artifact:version``.
JAR_SETS: dict[str, tuple[str, ...]] = {
    "kafka": (
        f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{_LOG4J}",
    ),
    "mm2": (
        f"org.apache.kafka:connect-mirror:{KAFKA_VERSION}",
        f"org.apache.kafka:connect-mirror-client:{KAFKA_VERSION}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{_LOG4J}",
    ),
}


def cache_root() -> Path:
    """Where jar sets are kept: ``$MIRROR_JARS_CACHE`` or ``~/.cache/mirror_lib/jars``."""
    override = os.environ.get(CACHE_ENV, "").strip()
    return Path(override) if override else Path.home() / ".cache" / "mirror_lib" / "jars"


def jar_dir(name: str = "kafka") -> Path:
    """The folder of jar set ``name`` (see :data:`JAR_SETS`), fetched on first use."""
    if name not in JAR_SETS:
        raise EmbeddedBrokerError(f"unknown jar set {name!r}: one of {sorted(JAR_SETS)}")
    target = cache_root() / f"{name}-{KAFKA_VERSION}"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{name}-{KAFKA_VERSION}.lock"):
        if not (target / ".complete").exists():
            _fetch(JAR_SETS[name], target)
    return target


def classpath(*names: str) -> str:
    """A ``java -cp`` value holding the jar sets ``names`` (default: the broker's)."""
    return os.pathsep.join(str(jar_dir(n) / "*") for n in (names or ("kafka",)))


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
    """``python -m mirror_lib.testing.kafka_jars [SET...]``: fetch the sets, print their folders."""
    import sys

    for name in sys.argv[1:] or ["kafka"]:
        print(jar_dir(name))


if __name__ == "__main__":
    main()
