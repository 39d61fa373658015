"""The local session's class-data archive with a real JVM: written by the first run, which leaves
no JVM behind, then mapped by the next run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mirror_lib.testing.kafka_io import create_topic, produce_exact
from tests.integration.conftest import flow_properties, write_properties

pytestmark = pytest.mark.integration

SESSION = """
from mirror_lib.spark.session import local_spark_session
spark = local_spark_session("archive-test")
args = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print("ARGS", " ".join(str(a) for a in args.getInputArguments()))
print("ROWS", spark.range(10).count())
"""


def jvms_using(folder: Path) -> list[str]:
    """Command lines of live processes that mention ``folder`` (our JVM, if it outlived us)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(folder) in cmd and "java" in cmd:
                found.append(cmd[:200])
    return found


def run_session(env: dict[str, str], out: Path) -> str:
    """Output to a file, not a pipe: the JVM inherits the pipe, and reading it to its end would
    wait for the JVM too."""
    with out.open("w") as f:
        done = subprocess.run(
            [sys.executable, "-c", SESSION],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=300,
        )
    text = out.read_text()
    assert done.returncode == 0, text[-3000:]
    assert "ROWS 10" in text
    return next(line for line in text.splitlines() if line.startswith("ARGS"))


def test_first_run_writes_the_archive_and_the_next_maps_it(tmp_path, subprocess_env):
    folder = tmp_path / "jvm-cache"
    env = {**subprocess_env, "MIRROR_SPARK_CDS": str(folder)}
    first = run_session(env, tmp_path / "first.log")
    assert "-XX:ArchiveClassesAtExit=" in first and "-XX:TieredStopAtLevel=1" in first
    assert not jvms_using(folder)  # the run waited for its JVM to write the archive
    partials = list(folder.glob("*.partial"))
    assert len(partials) == 1 and partials[0].stat().st_size > 10_000_000, partials

    second = run_session(env, tmp_path / "second.log")
    archives = list(folder.glob("*.jsa"))
    assert len(archives) == 1 and not list(folder.glob("*.partial"))
    assert f"-XX:SharedArchiveFile={archives[0]}" in second
    assert "-XX:ArchiveClassesAtExit" not in second


def test_the_mirror_command_waits_for_its_jvm_to_write_the_archive(
    brokers, tmp_path, subprocess_env, unique_name
):
    """``mirror`` ends with ``os._exit``, which skips ``atexit``: without waiting explicitly, its
    JVM went on writing after the command exited, and a caller that then stopped the process
    group (a scheduler, the benchmark) killed it mid-write, so no run ever got the archive."""
    topic = f"{unique_name}-t"
    create_topic(brokers.source, topic)
    produce_exact(brokers.source, topic, [{"key": b"k", "value": b"v"}])
    props = flow_properties(brokers.source, brokers.target, tmp_path / "state", topics=topic)
    config = write_properties(tmp_path / "mm2.properties", props)
    folder = tmp_path / "jvm-cache"
    env = {**subprocess_env, "MIRROR_SPARK_CDS": str(folder)}
    with (tmp_path / "run.log").open("w") as f:  # a file: a pipe would wait for the JVM too
        done = subprocess.run(
            [sys.executable, "-m", "mirror_lib.app.cli", "run", str(config), "--once"],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=300,
        )
    assert done.returncode == 0, (tmp_path / "run.log").read_text()[-3000:]
    assert not jvms_using(folder)
    partials = list(folder.glob("*.partial"))
    assert len(partials) == 1 and partials[0].stat().st_size > 10_000_000, partials


@pytest.mark.skipif("SPARK_HOME" in os.environ, reason="a Spark distribution's own pyspark.zip")
def test_python_workers_import_pyspark_compiled_not_from_the_zip(spark):
    """The JVM puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the workers' path; a zip has
    no bytecode cache, so each worker compiled pyspark from source (jvm.lean_spark_home)."""

    def where(_rows):
        import pyspark

        yield (
            pyspark.__file__,
            any(p.endswith("pyspark.zip") and Path(p).exists() for p in sys.path),
        )

    found = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert found and ".zip" not in found[0][0] and not found[0][1], found
    assert "SPARK_HOME" not in os.environ  # only the JVM's launch saw the lean home
