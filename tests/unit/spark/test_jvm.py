"""The local driver JVM's options and its class-data archive, with the machine's real ``java``."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mirror_lib.spark import jvm

JAVA = shutil.which("java")
pytestmark = pytest.mark.skipif(JAVA is None, reason="needs java")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(jvm.CDS_ENV, str(folder))
    return folder


def spark_home(tmp_path: Path) -> str:
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True, exist_ok=True)
    (jars / "spark-core.jar").write_bytes(b"jar")
    return str(jars.parent)


def real_archive(path: Path) -> None:
    """A small but real dynamic archive (``java -version``'s classes)."""
    subprocess.run(
        [JAVA, f"-XX:ArchiveClassesAtExit={path}", jvm.QUIET_CDS, "-version"],
        check=True,
        capture_output=True,
    )


def settle(path: Path) -> None:
    """As if the run that wrote it had ended long ago (this test's own pid is alive)."""
    old = time.time() - jvm.PARTIAL_SETTLED_S - 5
    os.utime(path, (old, old))


def option(options: str, name: str) -> str | None:
    return next((o.split("=", 1)[1] for o in options.split() if o.startswith(name + "=")), None)


def test_off_gives_only_the_lean_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(jvm.CDS_ENV, "off")
    assert jvm.driver_java_options(JAVA, spark_home(tmp_path)).split() == list(jvm.LEAN_OPTIONS)


def test_first_run_dumps_one_archive_at_a_time(cache: Path, tmp_path: Path) -> None:
    home = spark_home(tmp_path)
    first = jvm.driver_java_options(JAVA, home)
    partial = option(first, "-XX:ArchiveClassesAtExit")
    assert partial is not None and partial.startswith(str(cache)) and partial.endswith(".partial")
    assert option(first, "-XX:SharedArchiveFile") is None
    second = jvm.driver_java_options(JAVA, home)  # while the first JVM still runs
    assert option(second, "-XX:ArchiveClassesAtExit") is None
    assert second.split() == list(jvm.LEAN_OPTIONS)


def test_a_settled_working_archive_is_used_by_later_runs(cache: Path, tmp_path: Path) -> None:
    home = spark_home(tmp_path)
    partial = Path(option(jvm.driver_java_options(JAVA, home), "-XX:ArchiveClassesAtExit"))
    real_archive(partial)
    assert option(jvm.driver_java_options(JAVA, home), "-XX:SharedArchiveFile") is None  # fresh
    settle(partial)
    archive = option(jvm.driver_java_options(JAVA, home), "-XX:SharedArchiveFile")
    assert archive is not None and Path(archive).is_file() and not partial.exists()
    assert not list(cache.glob("*.dumping"))
    assert option(jvm.driver_java_options(JAVA, home), "-XX:SharedArchiveFile") == archive


def test_a_truncated_archive_is_removed_not_used(cache: Path, tmp_path: Path) -> None:
    """A JVM killed while dumping leaves a truncated file, and mapping that crashes java."""
    home = spark_home(tmp_path)
    partial = Path(option(jvm.driver_java_options(JAVA, home), "-XX:ArchiveClassesAtExit"))
    whole = tmp_path / "whole.jsa"
    real_archive(whole)
    partial.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    settle(partial)
    crash = subprocess.run(
        [JAVA, f"-XX:SharedArchiveFile={partial}", "-XX:ErrorFile=/dev/null", "-version"],
        capture_output=True,
        cwd=tmp_path,
    )
    assert crash.returncode != 0  # what the check protects against
    options = jvm.driver_java_options(JAVA, home)
    assert option(options, "-XX:SharedArchiveFile") is None
    assert not partial.exists()


def test_other_spark_jars_need_their_own_archive(tmp_path: Path) -> None:
    home = spark_home(tmp_path)
    before = jvm.archive_key(JAVA, home)
    (Path(home) / "jars" / "extra.jar").write_bytes(b"more")
    assert jvm.archive_key(JAVA, home) != before


def test_without_a_home_folder_only_the_lean_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(jvm.CDS_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert jvm.driver_java_options(JAVA, spark_home(tmp_path)).split() == list(jvm.LEAN_OPTIONS)


def test_a_spark_home_elsewhere_needs_its_own_archive(tmp_path: Path) -> None:
    home = spark_home(tmp_path)
    (Path(home) / "bin").mkdir()
    lean = jvm.lean_spark_home(home, tmp_path / "cache")
    assert lean != home and jvm.archive_key(JAVA, lean) != jvm.archive_key(JAVA, home)


def test_the_lean_spark_home_has_bin_and_jars_but_no_python_folder(tmp_path: Path) -> None:
    home = Path(spark_home(tmp_path))
    (home / "bin").mkdir()
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (home / "python" / "lib").mkdir(parents=True)
    (home / "python" / "lib" / "pyspark.zip").write_bytes(b"zip")
    lean = Path(jvm.lean_spark_home(str(home), tmp_path / "cache"))
    assert (lean / "bin" / "spark-submit").read_text() == "#!/bin/sh\n"
    assert (lean / "jars" / "spark-core.jar").read_bytes() == b"jar"
    assert not (lean / "python").exists()
    assert jvm.lean_spark_home(str(home), tmp_path / "cache") == str(lean)  # made once
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [lean.name]  # no staging left


def test_a_spark_home_without_jars_is_kept(tmp_path: Path) -> None:
    assert jvm.lean_spark_home(str(tmp_path), tmp_path / "cache") == str(tmp_path)


def test_finish_archive_dump_waits_once_for_a_dumping_jvm() -> None:
    """``mirror`` exits with ``os._exit`` (no atexit): it calls this instead."""
    calls: list[str] = []
    proc = SimpleNamespace(
        args=["java", "-XX:ArchiveClassesAtExit=/x.partial"],
        stdin=SimpleNamespace(close=lambda: calls.append("close")),
        wait=lambda timeout: calls.append("wait"),
    )
    spark = SimpleNamespace(stop=lambda: calls.append("stop"))
    jvm.wait_for_archive_at_exit(spark, SimpleNamespace(proc=proc))
    jvm.finish_archive_dump()
    jvm.finish_archive_dump()
    assert calls == ["stop", "close", "wait"]
