"""run_flows tells its observer (MLflow) when a run starts and how it ended."""

from __future__ import annotations

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
