"""Subprocess control: start in an own process group, collect output, stop the whole group.

Also the flow configuration every mirror run of the benchmark starts from.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.engine import engine, subprocess_env
from mirror_lib.config.properties import format_properties

_LIVE_GROUPS: set[int] = set()  # process groups of mirror/baseline subprocesses still running


def log(msg: str) -> None:
    """A progress line with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 30) -> None:
    """Signal a subprocess's process group, wait, then SIGKILL what is left; reap."""
    pgid = proc.pid
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, 0)  # anything left in the group (JVM, pyspark workers)?
        time.sleep(2)
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)
    _LIVE_GROUPS.discard(pgid)


def stop_all_groups() -> None:
    """SIGKILL every process group still running (on exit, also after errors)."""
    for pgid in list(_LIVE_GROUPS):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        _LIVE_GROUPS.discard(pgid)


class Lines:
    """Collect (monotonic time, line) of a pipe in a thread; echo each line with the prefix
    ``echo``, or else write it to the file ``tee`` as it comes."""

    def __init__(self, pipe: Any, echo: str | None = None, tee: Path | None = None) -> None:
        self.lines: list[tuple[float, str]] = []
        self.echo = echo
        self.tee = tee
        self._thread = threading.Thread(target=self._run, args=(pipe,), daemon=True)
        self._thread.start()

    def _run(self, pipe: Any) -> None:
        out = open(self.tee, "w") if self.tee and not self.echo else None  # noqa: SIM115
        try:
            for raw in pipe:
                line = raw.rstrip("\n")
                self.lines.append((time.monotonic(), line))
                if self.echo:
                    log(f"{self.echo}: {line}")
                elif out is not None:
                    out.write(raw)
                    out.flush()
        finally:
            if out is not None:
                out.close()

    def join(self) -> None:
        """Wait (up to 10 s) until the pipe is read to its end."""
        self._thread.join(10)

    def first(self, text: str) -> float | None:
        """When the first line containing ``text`` arrived, if one did."""
        return next((t for t, line in self.lines if text in line), None)


def popen(cmd: list[str], stderr_path: Path) -> subprocess.Popen:
    """Start ``cmd`` in its own process group, stdout piped, stderr to a file."""
    err = open(stderr_path, "w")  # noqa: SIM115 - closed by the OS when the child exits
    proc = subprocess.Popen(
        cmd,
        cwd=engine(),  # `python -m` puts the working directory first on sys.path
        env=subprocess_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        start_new_session=True,  # own process group: the JVM and workers are stopped with it
    )
    err.close()
    _LIVE_GROUPS.add(proc.pid)
    return proc


#: The replication factor of every topic a run creates, ours and MM2's: the clusters' (the
#: runner sets it once they are up; 1 on single nodes, 3 with ``--brokers 3``).
REPLICATION_ENV = "MIRROR_BENCH_REPLICATION"


def replication_factor() -> str:
    """The run's replication factor (:data:`REPLICATION_ENV`, default 1)."""
    return os.environ.get(REPLICATION_ENV, "1")


#: The flows of every bench run, ours and MM2's alike: A->B only, and no heartbeats written into
#: A for the disabled B->A (which MM2 and we both write by default, and then copy back to B).
ONE_WAY = {
    "A->B.enabled": "true",
    "B->A.enabled": "false",
    "B->A.emit.heartbeats.enabled": "false",
}


def mirror_props(
    source: str, target: str, state_dir: Path, topic: str, **extra: str
) -> dict[str, str]:
    """A one-way A->B flow (:data:`ONE_WAY`) as in tests/integration/conftest.py
    ``flow_properties`` (without its 0.5 s trigger: the engine default of 1 s applies unless
    ``extra`` sets one), with what the engine says a flow over the bench's broker kind needs
    (``FLOW_SETTINGS``; the runner sets ``BROKER_ENV``). An engine from before ``FLOW_SETTINGS``
    paces tansu on its own."""
    from mirror_lib.testing import clusters  # the engine's, imported after --engine-ref

    needs = getattr(clusters, "FLOW_SETTINGS", {}).get(clusters.broker_kind(), {})
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": source,
        "B.bootstrap.servers": target,
        **ONE_WAY,
        "topics": topic,
        "replication.factor": replication_factor(),
        "offset-syncs.topic.replication.factor": replication_factor(),
        "checkpoints.topic.replication.factor": replication_factor(),
        "heartbeats.topic.replication.factor": replication_factor(),
        "mirror.state.dir": str(state_dir),
        **needs,
    }
    props.update(extra)
    return props


def write_props(path: Path, props: dict[str, str]) -> Path:
    """Write ``props`` as an mm2.properties file."""
    path.write_text(format_properties(props))
    return path
