"""The integration tests' wait: a result, a deadline that names what, and a dead producer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.waiting import keyed_records, process_alive, wait_for


def test_wait_returns_the_first_true_result():
    answers = iter([0, None, "found"])
    assert wait_for(lambda: next(answers), 5, "the answer", poll_s=0) == "found"


def test_wait_names_what_it_waited_for_and_the_detail():
    with pytest.raises(AssertionError, match=r"the answer not within 0s: log tail"):
        wait_for(lambda: False, 0, "the answer", detail=lambda: "log tail")


def test_a_process_that_exited_ends_the_wait_at_once():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait(30)
    with pytest.raises(AssertionError, match=r"mirror run exited \(code 3\) while waiting"):
        wait_for(lambda: False, 60, "never", process_alive(proc))


def test_keyed_records_go_round_robin():
    assert [(r["key"], r["partition"]) for r in keyed_records(3, 2)] == [
        (b"k0", 0),
        (b"k1", 1),
        (b"k2", 0),
    ]
