"""`mirror demo` end to end as a user runs it: exit code, report, nothing left running."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from mirror_lib.config.parse import load_config
from mirror_lib.spark.views import bucket_for
from mirror_lib.tables.health import read_rows
from tests.browser import chromium_available, render


def tagged_processes(tag: str) -> set[int]:
    """Processes whose environment carries ``MIRROR_TEST_TAG=tag``: everything the demo started,
    however deep, also after they were re-parented; never other tests' brokers or JVMs."""
    needle = f"MIRROR_TEST_TAG={tag}".encode()
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                env = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if needle in env:
                pids.add(int(entry.name))
    return pids


def assert_reads_at_a_glance(output: str) -> None:
    """What a newcomer should not have to read past (issue 55): Spark's stage bars, librdkafka's
    own log lines, warnings about ACLs on brokers that have none."""
    assert "[Stage " not in output, output[-3000:]
    printed = r"%\d\|\d+\.\d+\|[A-Z]+\|"  # librdkafka's own: %6|1796...|BGQUEUE|...
    logged = r"^[A-Z]+ \[[^]]*#(producer|consumer)-\d+\] \[thrd:"  # through a Python logger
    raw = [line for line in output.splitlines() if re.search(f"{printed}|{logged}", line)]
    assert not raw, raw
    assert "ACL" not in output and "write-protected" not in output, output[-3000:]


@pytest.mark.parametrize("broker", ["tansu", "kafka"])
def test_demo_runs_reports_translation_and_leaves_nothing_behind(tmp_path, subprocess_env, broker):
    """`make demo`'s embedded default, and the same demo on Apache Kafka."""
    tag = uuid.uuid4().hex
    env = {**subprocess_env, "MIRROR_TEST_TAG": tag}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirror_lib.app.cli",
            "demo",
            "--duration",
            "15",
            "--workdir",
            str(tmp_path / "demo"),
            "--broker",
            broker,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.returncode == 0, out.stdout[-3000:] + "\n--- stderr ---\n" + out.stderr[-3000:]
    # the queries' tasks are killed at the end: a clean stop, not Spark's ERROR stack traces
    assert " ERROR " not in out.stderr and "TaskKilledException" not in out.stderr, out.stderr
    text = out.stdout
    assert "mirror demo: A -> B" in text
    produced = dict(re.findall(r"^(orders|payments|clicks)\s+(\d+)\s+\d+$", text, re.M))
    replicated = dict(re.findall(r"^(orders|payments|clicks)\s+\d+\s+(\d+)$", text, re.M))
    assert produced and produced == replicated, text
    number = r"(\d[\d,]*) ms"
    live = re.search(rf"^latency while the flow ran: p50 {number}, p99 {number}$", text, re.M)
    every = re.search(rf"^  with start-up and catch-up: p50 {number}, p99 {number} \(", text, re.M)
    assert every and (live or "latency while the flow ran: no transaction" in text), text
    if live:  # none on a machine so busy that the 15 s ended before the copy began
        # the live figures leave out the transactions that waited for start-up
        ms = [int(v.replace(",", "")) for v in (*live.groups(), every[2])]
        assert 0 < ms[0] <= ms[1] <= ms[2], text
    assert_reads_at_a_glance(out.stdout + out.stderr)
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", text, re.M)
    assert len(rows) == 4, text  # the 4 partitions of orders
    for _partition, on_a, sql_b, translate_b in rows:
        assert sql_b == translate_b, "SQL translation differs from mirror translate"
        assert int(translate_b) >= int(on_a) > 0
    assert (tmp_path / "demo" / "mm2.properties").exists()
    dashboard = (tmp_path / "demo" / "dashboard.html").resolve()
    assert f"dashboard: {dashboard}" in text.splitlines(), text
    page = dashboard.read_text()
    assert "Kafka mirror health" in page and "A.orders p99" in page
    if chromium_available():  # `make test` installs it (make chromium)
        from tests.integration.test_dashboard import SQL_DIR, assert_every_tile_draws

        report = render(dashboard, tmp_path)
        figures = assert_every_tile_draws(report, [p.stem for p in SQL_DIR.glob("*.sql")])
        # latency tiles bucket by the run's length: a point per batch second, not a minute
        config = load_config(tmp_path / "demo" / "mm2.properties")
        ms = [(r["remote_topic"], r["_ms"]) for r in read_rows(config, "replication_metrics")]
        span = (max(m for _t, m in ms) - min(m for _t, m in ms)) / 1000
        bucket = bucket_for(span)
        assert bucket <= 2, span
        points = {t: len({m // (bucket * 1000) for u, m in ms if u == t}) for t, _m in ms}
        latency = figures["latency"]
        assert latency["xaxis_title"] == f"time (UTC), {bucket} s buckets", latency
        assert sorted(latency["markers"]) == sorted(2 * list(points.values())), (latency, points)
    leftover = tagged_processes(tag)
    assert not leftover, f"processes the demo started are still running: {leftover}"
