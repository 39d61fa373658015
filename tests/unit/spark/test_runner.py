"""run_flows tells its observer (MLflow) when a run starts and how it ended."""

from __future__ import annotations

from typing import Any

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError, MirrorRuntimeError
from mirror_lib.spark.plan import RunPlan
from mirror_lib.spark.runner import run_flows
from tests.helpers.recording_observer import RecordingObserver

CONFIG = parse_config(
    {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:1",
        "B.bootstrap.servers": "b:1",
        "A->B.enabled": "true",
    }
)


def test_a_run_that_fails_its_checks_is_observed_with_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As MLflow logs it: started once the plan is resolved, then FAILED with the error."""
    refused = MirrorRuntimeError("source cluster A (bootstrap a:1) did not answer")

    def unreachable(_plan: RunPlan) -> None:
        raise refused

    monkeypatch.setattr(RunPlan, "check", unreachable)
    observer = RecordingObserver()
    with pytest.raises(MirrorRuntimeError) as raised:
        run_flows(None, CONFIG, once=True, observer=observer)
    assert raised.value is refused
    (start, plan), (finish, error) = observer.calls
    assert (start, finish, error) == ("start", "finish", refused)
    assert plan.names == ["A->B"] and plan.once


def test_bad_input_fails_before_the_observer_hears_of_a_run() -> None:
    observer = RecordingObserver()
    with pytest.raises(ConfigError, match="parts"):
        run_flows(None, CONFIG, parts=["backups"], observer=observer)
    assert observer.calls == []


class _Clock:
    """``time`` as the run loop sees it: each sleep moves the clock on at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class _Quiet:
    """A supervisor and run events with nothing to report."""

    outages: dict[str, object] = {}  # noqa: RUF012 - read only

    def waiting(self) -> list[str]:
        return []

    def stop(self, _why: str) -> None:
        pass


def _loop_alone(runner_module: Any, duration_s: float) -> Any:
    """A run of the loop alone: no queries, no tables, no companions."""
    run = object.__new__(runner_module._Run)
    run.spark, run.config, run.sup, run.events = None, CONFIG, _Quiet(), _Quiet()
    run.tables, run.runners, run.jobs, run.clusters, run.lags = [], [], [], [], {}
    run.deadline, run.plan = duration_s, RunPlan.resolve(CONFIG, duration_s=duration_s)
    return run


@pytest.mark.parametrize(("watched", "measures"), [(True, 20), (False, 3)])
def test_a_run_nobody_watches_measures_its_lag_every_half_minute(
    monkeypatch: pytest.MonkeyPatch, watched: bool, measures: int
) -> None:
    """Each measure lists the source and reads every partition's offsets and ledger: a run
    with no progress display does it for the "records behind" of outage events only."""
    from mirror_lib.spark import runner

    asked: list[float] = []
    clock = _Clock()

    def rows(*_args: object) -> list[dict[str, object]]:
        asked.append(clock.now)
        return [{"flow": "A->B", "lag": 7}]

    monkeypatch.setattr(runner, "time", clock)
    monkeypatch.setattr(runner, "progress_rows", rows)
    run = _loop_alone(runner, 100.0)
    run.continuous((lambda _rows: None) if watched else None, 5)
    assert len(asked) == measures  # watched: every 5 s and a last time at the deadline
    assert run.lags == {"A->B": 7}


def test_a_continuous_run_hands_free_heap_pages_back_every_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mirror_lib.spark import runner

    clock, trims = _Clock(), []
    monkeypatch.setattr(runner, "time", clock)
    monkeypatch.setattr(runner, "progress_rows", lambda *_a: [])
    monkeypatch.setattr(runner, "release_free_memory", lambda: trims.append(clock.now))
    _loop_alone(runner, 200.0).continuous(None, 5)
    assert trims == [60.0, 120.0, 180.0]


def test_free_heap_pages_are_handed_back_where_glibc_is_and_skipped_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mirror_lib.spark import runner

    assert runner.release_free_memory() in (True, False)  # this machine's glibc answers
    monkeypatch.setattr(runner, "_libc", lambda: None)
    assert runner.release_free_memory() is False


class _Job:
    """A companion job that says whether it still runs."""

    def __init__(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False


def test_once_stops_the_companion_jobs_before_its_last_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A checkpoint round of the job's thread that ends after the last round would write the
    checkpoints it translated before the catch-up last, and fence the round's transactions."""
    from mirror_lib.spark import runner

    job = _Job()
    running_at_round: list[bool] = []
    monkeypatch.setattr(runner, "_one_round", lambda *_a: running_at_round.append(job.running))
    run = object.__new__(runner._Run)  # the end of --once alone: no queries, no tables
    run.spark, run.config, run.sup, run.events = None, CONFIG, _Quiet(), _Quiet()
    run.runners, run.jobs, run.clusters, run.own_session = [], [job], [], False
    run.deadline, run.plan, run.report = None, RunPlan.resolve(CONFIG, once=True), print
    run.once(show_progress=False)
    assert running_at_round == [False]
