"""The bench's CPU of a process tree counts finished processes once, whether their parent waited
for them or, as Spark's Python worker daemon does, ignores SIGCHLD (real processes, no broker)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.measure import TreeCpu

BURN_S = 0.3
# A parent that forks a child burning BURN_S of CPU; the child says "burnt" and lives on a
# moment, so that a sample sees it, then ends; the parent says "gone" once it has ended.
SCRIPT = f"""
import os, signal, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    t = time.process_time()
    while time.process_time() - t < {BURN_S}:
        pass
    print("burnt", flush=True)
    time.sleep(0.5)
    os._exit(0)
try:
    os.waitpid(pid, 0)
except ChildProcessError:  # ignored: the kernel reaped it
    pass
print("gone", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("parent", ["ignore", "wait"])
def test_a_finished_child_counts_once_whoever_reaps_it(parent):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, parent], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        tree = TreeCpu(proc.pid)
        assert proc.stdout.readline() == b"burnt\n"
        during = tree.cpu_s()
        assert proc.stdout.readline() == b"gone\n"
        after = tree.cpu_s()
    finally:
        proc.kill()
        proc.wait()
    assert during >= BURN_S * 0.9
    # the child's time once, beside the parent's own start (a double count would be 2 x BURN_S)
    assert BURN_S * 0.9 <= after < BURN_S * 1.7
