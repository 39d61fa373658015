"""Child processes that test brokers run in: started in their own session, stopped by PID.

Every process registered here is stopped at interpreter exit and on SIGTERM of this process, so
a test run that is interrupted leaves no broker behind. Only the process that started a child
stops it (a forked Spark worker inherits the registry but must not act on it).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import FrameType

from mirror_lib.errors import EmbeddedBrokerError

_LIVE: dict[int, subprocess.Popen[bytes]] = {}  # pid -> child started by this process
_OWNER = {"pid": os.getpid()}
_LOCK = threading.Lock()
_HOOKS = {"atexit": False, "sigterm": False}


def register(process: subprocess.Popen[bytes]) -> None:
    """Stop ``process`` at exit unless it is stopped before."""
    _install_exit_hooks()
    with _LOCK:
        if _OWNER["pid"] != os.getpid():  # a fork: its own registry
            _LIVE.clear()
            _OWNER["pid"] = os.getpid()
        _LIVE[process.pid] = process


def stop(processes: Iterable[subprocess.Popen[bytes]], timeout_s: float = 10) -> None:
    """SIGTERM the processes, wait up to ``timeout_s`` in all, SIGKILL the rest, and reap them."""
    todo = list(processes)
    for p in todo:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for p in todo:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill(p)
        forget(p)


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``process`` (as a crash would) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.wait()


def forget(process: subprocess.Popen[bytes]) -> None:
    """No longer stop ``process`` at exit (it has ended)."""
    with _LOCK:
        _LIVE.pop(process.pid, None)


def stop_all() -> None:
    """Stop every child this process registered and has not stopped yet."""
    with _LOCK:
        live = list(_LIVE.values()) if _OWNER["pid"] == os.getpid() else []
    stop(live)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    stop_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)  # die as the default handler would


def _install_exit_hooks() -> None:
    if not _HOOKS["atexit"]:
        _HOOKS["atexit"] = True
        atexit.register(stop_all)
    # Take SIGTERM only from the main thread and only if nobody else handles it.
    if not _HOOKS["sigterm"] and threading.current_thread() is threading.main_thread():
        _HOOKS["sigterm"] = True
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)


@dataclasses.dataclass(kw_only=True)
class ChildProcess:
    """A test server this process runs in a child (a Kafka broker, MirrorMaker 2): its process
    while it runs, and a log file (:attr:`log_path`, given by the subclass) kept after it."""

    process: subprocess.Popen[bytes] | None = dataclasses.field(default=None, repr=False)
    owner_pid: int = dataclasses.field(default_factory=os.getpid, repr=False, compare=False)

    @property
    def log_path(self) -> Path:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the log (for a failing test's message)."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "<no log>"

    def exit_report(self, what: str) -> str | None:
        """None while it runs; else why a wait on it failed: ``what`` (e.g. "MirrorMaker 2 exited
        before it replicated"), its exit code, and the end of its log."""
        if self.is_running():
            return None
        code = self.process.returncode if self.process else None
        return f"{what} (code {code}); log {self.log_path}:\n{self.log_tail()}"

    def spawn(self, command: list[str], what: str) -> None:
        """Run ``command`` as this server: in a session of its own (a Ctrl-C in the terminal
        reaches only us; we stop it), its output appended to :attr:`log_path` after a line that
        marks the start. ``what`` names it in the error if it cannot run."""
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== start {time.strftime('%H:%M:%S')} ====\n".encode())
            log.flush()
            try:
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as e:
                raise EmbeddedBrokerError(f"cannot run {what}: {e}") from e
        self.adopt(proc)

    def adopt(self, process: subprocess.Popen[bytes]) -> None:
        """``process`` is this server now: stopped at exit unless stopped before."""
        self.process, self.owner_pid = process, os.getpid()
        register(process)

    def stop(self, timeout_s: float = 30) -> None:
        """Stop it cleanly (SIGTERM; SIGKILL after ``timeout_s``). Its files stay."""
        if self.process is not None and self.owner_pid == os.getpid():
            stop([self.process], timeout_s)

    def kill(self) -> None:
        """SIGKILL it, as a crash would. Its files stay."""
        if self.process is not None and self.owner_pid == os.getpid():
            kill(self.process)
            forget(self.process)
