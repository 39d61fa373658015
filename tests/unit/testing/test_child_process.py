"""A child server's exit report: what a wait on a server that died says."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from mirror_lib.testing.processes import ChildProcess


@dataclasses.dataclass(kw_only=True)
class Server(ChildProcess):
    log: Path

    @property
    def log_path(self) -> Path:
        return self.log


def test_exit_report_is_none_while_it_runs_then_names_the_code_and_the_log(tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text("starting\nbind failed: port in use\n")
    server = Server(log=log)
    server.adopt(
        subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
        )
    )
    try:
        assert server.exit_report("the server exited during start") is None
    finally:
        server.process.stdin.close()
        server.process.wait(10)
    assert server.exit_report("the server exited during start") == (
        f"the server exited during start (code 0); log {log}:\nstarting\nbind failed: port in use"
    )
