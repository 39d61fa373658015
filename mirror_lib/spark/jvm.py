"""Driver JVM options of a local session: a JVM that starts quickly, and Spark's classes archived.

Every local ``mirror run`` starts a JVM that loads and compiles some 10,000 Spark classes, while
the records never pass through it (the copy runs in Python workers). So the local driver JVM:

- compiles with C1 only (``-XX:TieredStopAtLevel=1``) and collects with the serial collector,
  which halves its start-up CPU, and starts with a 32 MB heap (``-Xms32m``; the default initial
  heap is 1/64 of the machine's memory), which saves about 100 MB of resident memory, with a
  16 MB young generation (``-Xmn16m``: the serial collector touches all of it between
  collections; 15 MB less, no measurable CPU);
- maps Spark's classes from a class-data-sharing archive (AppCDS) kept in a cache folder, which
  halves its start-up time again. The first run without an archive writes one when its JVM exits
  (Java 17 has no ``-XX:+AutoCreateSharedArchive``); a later start checks that file with
  ``java -version`` before using it, since a truncated archive crashes the JVM.

``MIRROR_SPARK_CDS=off`` turns the archive off; ``MIRROR_SPARK_CDS=/some/folder`` moves it.

The JVM also puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's path, so
each worker compiled pyspark from the zip's sources (a zip holds no bytecode cache): about half
the CPU of a short batch. With pip's pyspark (no ``SPARK_HOME`` set) a local session therefore
starts its JVM from :func:`lean_spark_home`, which has Spark's ``bin`` and ``jars`` but no
``python`` folder, and workers import the same pyspark from site-packages, compiled once.
A session on Databricks never comes here.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: Settings of a local driver (a local session's, the test Spark Connect server's): loopback
#: only, no UI, small shuffles, UTC.
LOCAL_CONF: dict[str, bool | float | int | str | None] = {
    "spark.ui.enabled": "false",
    # pyspark launches its JVM as a shell, which turns on Spark's `[Stage 3:> (0 + 1) / 1]`
    # bars on stderr: they garble the output of `mirror run` and `mirror demo`
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    # A task killed by a query's stop returned its worker to the reuse pool before the worker
    # died, and the next query's task failed on it ("Python worker exited unexpectedly").
    # Copy tasks live for a slice, so a fresh worker per task costs nothing measurable.
    "spark.python.worker.reuse": "false",
    # A copy task does not end when Spark kills it: Spark's monitor kills its Python worker
    # this long after it saw the kill (it looks every 2 s). Nothing ends the task more
    # gracefully meanwhile, so waiting the default 2 s only prolonged every stop
    # (bench/stopping.py).
    "spark.python.task.killTimeout": "0s",
    "spark.python.worker.faulthandler.enabled": "true",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
}
CDS_ENV = "MIRROR_SPARK_CDS"
LEAN_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms32m", "-Xmn16m")
QUIET_CDS = "-Xlog:cds=off,cds+dynamic=off"  # an unusable archive is skipped without a word
DUMP_STALE_S = 600  # a dump marker older than this belongs to a JVM that died dumping
PARTIAL_SETTLED_S = 60  # a partial archive this old is no longer being written


def _cache_base() -> Path | None:
    """``~/.cache/mirror_lib`` (or under ``$XDG_CACHE_HOME``); None without a home folder."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):  # no home folder (some containers)
            return None
    return Path(base) / "mirror_lib"


def cache_folder() -> Path | None:
    """Where the archive lives, or None when ``MIRROR_SPARK_CDS=off`` (or there is no home)."""
    setting = os.environ.get(CDS_ENV, "")
    if setting.lower() in ("off", "false", "0"):
        return None
    if setting:
        return Path(setting)
    base = _cache_base()
    return None if base is None else base / "jvm"


def lean_spark_home(spark_home: str, folder: Path | None = None) -> str:
    """A Spark home with ``spark_home``'s ``bin`` and ``jars`` only (symbolic links), made once
    in ``folder`` (default: the cache); ``spark_home`` itself when it cannot be made."""
    real = os.path.realpath(spark_home)
    base = folder or _cache_base()
    if base is None or not all(os.path.isdir(os.path.join(real, d)) for d in ("bin", "jars")):
        return spark_home
    home = base / f"spark-home-{hashlib.sha256(real.encode()).hexdigest()[:16]}"
    if (home / "jars").is_dir():
        return str(home)
    staging = base / f"{home.name}.{os.getpid()}.tmp"
    try:
        staging.mkdir(parents=True, exist_ok=True)
        for name in ("bin", "jars"):
            link = staging / name
            if not link.is_symlink():
                link.symlink_to(os.path.join(real, name))
        os.rename(staging, home)
    except OSError:  # another run made it first, or the folder is read-only
        shutil.rmtree(staging, ignore_errors=True)
    return str(home) if (home / "jars").is_dir() else spark_home


def files_key(java: str, label: str, files: Sequence[Path]) -> str:
    """A key of this JVM build, ``label`` and ``files`` (name, size and time of each): an archive
    is only valid for the JVM and the class path that wrote it."""
    parts = [os.path.realpath(java), label]
    for path in [Path(parts[0]), *files]:
        try:
            st = path.stat()
        except OSError:
            continue
        parts.append(f"{path.name}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_key(java: str, spark_home: str) -> str:
    """The archive is only valid for this JVM build, this class path and these Spark jars."""
    jars = Path(spark_home) / "jars"
    names = sorted(p.name for p in jars.glob("*.jar")) if jars.is_dir() else []
    return files_key(java, os.path.abspath(spark_home), [jars / n for n in names])


def archive_usable(java: str, archive: Path) -> bool:
    """``java -version`` maps the archive: a truncated one kills it (SIGBUS)."""
    check = [java, f"-XX:SharedArchiveFile={archive}", QUIET_CDS, "-XX:ErrorFile=/dev/null"]
    try:
        done = subprocess.run(
            [*check, "-version"],
            capture_output=True,
            timeout=30,
            cwd=archive.parent,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _settled(partial: Path) -> bool:
    """No longer written: the run that wrote it has ended (it waits for its JVM's dump), or the
    file has not changed for a while (e.g. that run was killed and its pid reused)."""
    pid = partial.name.split(".")[-2]
    alive = pid.isdigit() and Path(f"/proc/{pid}").exists()
    return not alive or time.time() - partial.stat().st_mtime > PARTIAL_SETTLED_S


def partial_archive(archive: Path) -> Path:
    """Where this process has a JVM write ``archive`` at its exit; :func:`promote_partial`
    puts it in place once it is settled and maps."""
    return archive.with_name(f"{archive.name}.{os.getpid()}.partial")


def promote_partial(java: str, archive: Path) -> None:
    """Turn a settled, working partial archive into ``archive``; remove broken ones."""
    for partial in sorted(archive.parent.glob(archive.name + ".*.partial")):
        try:
            if not _settled(partial):
                continue
            if archive_usable(java, partial):
                os.replace(partial, archive)
                dump_marker(archive).unlink(missing_ok=True)
                return
            partial.unlink()
        except OSError:
            continue


def dump_marker(archive: Path) -> Path:
    """Exists while a JVM is to write ``archive`` at its exit."""
    return archive.with_suffix(".dumping")


def may_dump(marker: Path) -> bool:
    """One dumping JVM at a time (others would each spend seconds at exit writing the same)."""
    try:
        if time.time() - marker.stat().st_mtime < DUMP_STALE_S:
            return False
        marker.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError:
        return False
    return True


def driver_java_options(java: str, spark_home: str) -> str:
    """``spark.driver.extraJavaOptions`` of a local session."""
    options = [*LEAN_OPTIONS]
    folder = cache_folder()
    if folder is None or " " in str(folder):  # Spark splits these options at spaces
        return " ".join(options)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return " ".join(options)
    archive = folder / f"spark-{archive_key(java, spark_home)}.jsa"
    if not archive.exists():
        promote_partial(java, archive)
    if archive.exists():
        options += [f"-XX:SharedArchiveFile={archive}", QUIET_CDS]
    elif may_dump(dump_marker(archive)):
        options += [f"-XX:ArchiveClassesAtExit={partial_archive(archive)}", QUIET_CDS]
    return " ".join(options)


_PENDING: list[Callable[[], None]] = []  # what wait_for_archive_at_exit registered


def wait_for_archive_at_exit(spark: Any, gateway: Any) -> None:
    """If this JVM writes the archive, let this process end only once the JVM has written it.

    The JVM ends when its parent closes the pipe to it, and writes the archive then: without
    waiting, a run's JVM would outlive the run for some seconds (a process left behind), and
    whoever stops that run's process group would kill it mid-write (the next run throws the
    truncated archive away, and the one after writes it again).
    """
    proc = getattr(gateway, "proc", None)
    args = getattr(proc, "args", None) or []
    if proc is None or not any("ArchiveClassesAtExit" in str(a) for a in args):
        return

    def finish() -> None:
        try:
            spark.stop()
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=120)
        except Exception:  # exiting anyway: the archive is only an optimisation
            pass

    _PENDING.append(finish)
    atexit.register(finish)


def finish_archive_dump() -> None:
    """Stop the session and wait for the archive now: for an exit that skips ``atexit``
    (``os._exit``, as the ``mirror`` command ends)."""
    while _PENDING:
        finish = _PENDING.pop()
        atexit.unregister(finish)
        finish()
