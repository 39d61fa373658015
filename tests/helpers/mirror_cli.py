"""`mirror run` as a subprocess of a test: its own process group, output in files, and the whole
tree killed when the test is done with it.

Files, not pipes: a pipe also waits for a JVM or Python worker that outlives the CLI. A run
that overruns is killed with everything it started, so that nothing goes on copying with the
same transactional ids and ledger groups into the next test's run, and the failure shows the
run's own output instead of a truncated ``TimeoutExpired``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

TAIL = 4000  # characters of a run's output shown in a failure


def start_mirror(
    config_path: Path,
    env: dict[str, str],
    *extra: str,
    log: Path | None = None,
    err: Path | None = None,
    cwd: Path | None = None,
    core_dumps: bool = False,
) -> subprocess.Popen:
    """`mirror run` in its own process group; stdout to ``log``, stderr to ``err`` (else also
    to ``log``).

    Spark's Python workers are not in that group (pyspark's daemon calls setpgid):
    :func:`kill_group` kills them too. ``core_dumps``: lift the core size limit for it and its
    children, so that a native crash leaves a core where the kernel's ``core_pattern`` puts it
    (``cwd`` by default): faulthandler prints no Python stack for some, such as a thread's
    stack overflowing, where its handler has no stack to run on.
    """
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    errors = open(err, "wb") if err is not None else subprocess.STDOUT  # noqa: SIM115
    command = [sys.executable, "-m", "mirror_lib.app.cli", "run", str(config_path), *extra]
    if core_dumps:
        command = ["sh", "-c", 'ulimit -c unlimited 2>/dev/null; exec "$@"', "sh", *command]
    try:
        return subprocess.Popen(
            command,
            env=env,
            stdout=out,
            stderr=errors,
            cwd=cwd,
            start_new_session=True,  # its own process group: the JVM dies with it
        )
    finally:  # the child has its own copies
        for f in (out, errors):
            if hasattr(f, "close"):
                f.close()


def descendants(pid: int) -> list[int]:
    """PIDs of all processes below ``pid`` (from /proc), whatever their process group."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the run's group and its Python workers: no copy task goes on after the kill."""
    below = descendants(proc.pid) if proc.poll() is None else []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in below:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(30)


def run_mirror(
    config_path: Path,
    env: dict[str, str],
    *extra: str,
    timeout_s: float,
    out_dir: Path | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`mirror run <config> <extra>` to its end: exit code, stdout and stderr.

    Past ``timeout_s`` the run and everything it started are killed and the test fails with the
    end of the run's output. Whatever the run left behind is killed on return too.
    """
    folder = out_dir or config_path.parent
    out, err = folder / "mirror-run.out", folder / "mirror-run.err"
    proc = start_mirror(config_path, env, *extra, log=out, err=err, cwd=cwd)
    try:
        code = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"mirror run {' '.join(extra)} did not end within {timeout_s:.0f}s; stderr ends:\n"
            f"{err.read_text(errors='replace')[-TAIL:]}\nstdout ends:\n"
            f"{out.read_text(errors='replace')[-TAIL:]}"
        ) from None
    finally:
        kill_group(proc)  # an overrun run, or a JVM that outlived the CLI
    return subprocess.CompletedProcess(
        proc.args, code, out.read_text(errors="replace"), err.read_text(errors="replace")
    )
