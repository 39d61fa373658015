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
