"""`mirror demo` end to end as a user runs it: exit code, report, nothing left running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def processes(name: str) -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if name in cmd:
                pids.add(int(entry.name))
    return pids


def test_demo_runs_reports_translation_and_leaves_nothing_behind(tmp_path, subprocess_env):
    before = processes("tansu") | processes("java")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirror_lib.cli",
            "demo",
            "--duration",
            "15",
            "--workdir",
            str(tmp_path / "demo"),
        ],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "mirror demo: A -> B" in text
    produced = dict(re.findall(r"^(orders|payments|clicks)\s+(\d+)\s+\d+$", text, re.M))
    replicated = dict(re.findall(r"^(orders|payments|clicks)\s+\d+\s+(\d+)$", text, re.M))
    assert produced and produced == replicated, text
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
    leftover = (processes("tansu") | processes("java")) - before - {os.getpid()}
    assert not leftover, f"processes left running: {leftover}"
