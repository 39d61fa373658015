"""The stop bench's arguments (bench/stopping.py): no broker or Spark needed."""

from __future__ import annotations

import pytest

from bench import stopping


def test_timeouts_are_listed_and_empty_figures_are_refused():
    assert stopping.parse_args(["--timeouts", " 0s, 1s ,2s"]).values == ["0s", "1s", "2s"]
    for bad in (["--timeouts", " , "], ["--reps", "0"], ["--stops", "0"]):
        with pytest.raises(SystemExit):
            stopping.parse_args(bad)
