"""What a new user meets first: progress lines, Java missing, another flow's checkpoint folder."""

from __future__ import annotations

import io
import json

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError, MirrorRuntimeError
from mirror_lib.replication.context import FlowContext, flow_dir
from mirror_lib.spark.flow_runner import _claim_checkpoint
from mirror_lib.spark.progress import CatchUpProgress
from mirror_lib.spark.session import check_java


def test_progress_prints_done_to_do_and_rate_when_not_a_terminal():
    out = io.StringIO()
    bar = CatchUpProgress("A->B", out)
    target = {("t", 0): 100, ("t", 1): 100}
    assert bar.update({}, target).startswith("A->B: 0/200 records, ")
    assert bar.update({("t", 0): 40, ("t", 1): 10}, target) is None, "at most every 5 s"
    bar.last_line -= 10
    line = bar.update({("t", 0): 40, ("t", 1): 10}, target)
    assert line.startswith("A->B: 50/200 records, ") and line.endswith(" rec/s\n")
    assert bar.update({("t", 0): 40, ("t", 1): 10}, target) is None, "nothing new, no line"
    done = bar.update({("t", 0): 100, ("t", 1): 120}, target)
    assert done.startswith("A->B: 200/200 records"), "the last line is never held back"


def test_progress_is_a_bar_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    bar = CatchUpProgress("A->B", Tty())
    bar.base = 0
    line = bar.update({("t", 0): 50}, {("t", 0): 100})
    assert line.startswith("\rA->B [###############...............] 50/100 records")


def test_missing_java_is_one_clear_message(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(MirrorRuntimeError, match=r"Java was not found.*openjdk-17"):
        check_java()
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MirrorRuntimeError, match="nothing was started"):
        check_java()


def test_checkpoint_folder_of_another_flow_is_refused(tmp_path):
    props = {
        "clusters": "A,B",
        "A.bootstrap.servers": "a:1",
        "B.bootstrap.servers": "b:1",
        "A->B.enabled": "true",
        "B->A.enabled": "true",
        "mirror.state.dir": str(tmp_path),
    }
    config = parse_config(props)
    folder = flow_dir(config, "A->B")
    _claim_checkpoint(FlowContext.create(config, "A->B"), folder)
    assert json.loads((folder / "flow.json").read_text())["flow"] == "A->B"
    _claim_checkpoint(FlowContext.create(config, "A->B"), folder)  # its own folder: fine
    with pytest.raises(ConfigError, match=r"mirror\.state\.dir.*flow B->A, not of A->B"):
        _claim_checkpoint(FlowContext.create(config, "B->A"), folder)
