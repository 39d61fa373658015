"""The scale bench's processes write their output as it comes: MM2 logs to stdout, and a pipe
nobody reads stopped it at 1,000 partitions before it copied a record (a real process)."""

from __future__ import annotations

import sys

from bench.scale import start
from tests.helpers.waiting import wait_for

# More than a pipe holds (64 KB on Linux), then a last line.
SCRIPT = "import sys; sys.stdout.write('x' * 200_000 + '\\n'); print('end', flush=True)"


def test_a_started_process_is_not_held_by_its_own_output(tmp_path) -> None:
    proc = start([sys.executable, "-c", SCRIPT], tmp_path / "talker.err")
    try:
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()  # held by its pipe where nothing reads it
    out = tmp_path / "talker.out"
    wait_for(lambda: out.exists() and out.read_text().endswith("end\n"), 10, "the output written")
    assert len(out.read_text()) == 200_000 + len("\nend\n")


def test_a_tool_that_ends_by_itself_runs_on_after_its_last_record(tmp_path) -> None:
    """Ours (``--once``) is timed to its last record on B and then to its own end; MM2, which
    never ends, is stopped at its last record. The rate is taken to the last record."""
    from bench.scale import rate, run_until

    sleeper = [sys.executable, "-c", "import time; time.sleep(2)"]
    ours = run_until(sleeper, tmp_path / "ours.err", lambda: "last", 30)
    assert ours["rc"] == 0 and ours["wall_s"] >= 2
    assert ours["first_record_s"] == ours["last_record_s"] is not None
    mm2 = run_until(sleeper, tmp_path / "mm2.err", lambda: True, 30)
    assert mm2["rc"] != 0  # stopped (SIGTERM) at its last record
    assert abs(mm2["last_record_s"] - mm2["wall_s"]) <= 0.1
    assert rate(1000, {"wall_s": 4.0, "last_record_s": 2.0}) == 500
    assert rate(1000, {"wall_s": 4.0, "last_record_s": None}) == 250


def test_an_idle_run_gives_each_brokers_cpu_and_the_machines_beside_the_tools(tmp_path) -> None:
    """Quiet, most of a tool's cost is the brokers answering its fetches: the idle case meters
    them and the machine over the tool's window. Here a busy "source broker" and a sleeping
    "target" beside a sleeping tool."""
    import subprocess

    from bench.scale import idle

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    still = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
        out = idle(sleeper, tmp_path / "tool.err", 5, 1, [busy.pid, still.pid])
    finally:
        busy.kill()
        still.kill()
    # relative, not absolute: on a busy machine the spinning process gets what share it can
    assert out["source_broker_pct"] > 2 * out["target_broker_pct"] + 2
    assert out["machine_pct"] >= out["source_broker_pct"] * 0.9
    assert out["cpu_pct"] < 20
    alone = idle(sleeper, tmp_path / "alone.err", 5, 1)
    assert "machine_pct" not in alone and alone["cpu_pct"] is not None
