"""Flow events: a run's start/stop/error, which are written, once, and a target that fails them."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError, MirrorRuntimeError
from mirror_lib.replication import events
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.events import RunEvents

CONFIG = parse_config(
    {
        "clusters": "A, B, C",
        "A.bootstrap.servers": "a:1",
        "B.bootstrap.servers": "b:1",
        "C.bootstrap.servers": "c:1",
        "A->B.enabled": "true",
        "C->B.enabled": "true",
        "mirror.state.dir": "/tmp/state-x",
    }
)


def run_events_of(flows: list[str], mode: str) -> RunEvents:
    return RunEvents([FlowContext.create(CONFIG, f) for f in flows], mode, CONFIG.state_dir)


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    out: list[dict] = []
    monkeypatch.setattr(events, "ensure_metrics_topic", lambda ctx, timeout_s=30: None)
    monkeypatch.setattr(events, "publish", lambda ctx, evs, timeout_s=30: out.extend(evs))
    return out


def test_start_then_stop_once_per_flow_with_the_run_identity(written: list[dict]) -> None:
    run = run_events_of(["A->B", "C->B"], "once")
    run.stop("not started: nothing")  # a stop before start is not an event
    run.start()
    run.stop("caught up")
    run.stop("again")
    assert [(e["type"], e["flow"]) for e in written] == [
        ("start", "A->B"),
        ("start", "C->B"),
        ("stop", "A->B"),
        ("stop", "C->B"),
    ]
    assert {e["run_id"] for e in written} == {run.run_id}
    assert {(e["mode"], e["state_dir"]) for e in written} == {("once", "/tmp/state-x")}
    assert written[-1]["reason"] == "caught up"


def test_an_error_is_written_once_also_after_a_stop(written: list[dict]) -> None:
    run = run_events_of(["A->B"], "continuous")
    run.start()
    run.stop("caught up")
    run.error(MirrorRuntimeError("flow A->B did not catch up\nmore", transient=True))
    run.error(MirrorRuntimeError("second"))
    assert [e["type"] for e in written] == ["start", "stop", "error"]
    assert written[-1]["reason"] == "flow A->B did not catch up"
    assert (written[-1]["error_type"], written[-1]["transient"]) == ("MirrorRuntimeError", True)


def test_a_target_that_fails_is_not_waited_for_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def publish(ctx, evs, timeout_s=30):
        calls.append(ctx.flow.name)
        raise BrokerError("no answer", transient=True)

    monkeypatch.setattr(events, "ensure_metrics_topic", lambda ctx, timeout_s=30: None)
    monkeypatch.setattr(events, "publish", publish)
    run = run_events_of(["A->B", "C->B"], "once")
    run.error(ValueError("boom"))  # never raises: the run's own error is what counts
    assert calls == ["A->B"]  # both flows write to B
    assert events.PUBLISH_TIMEOUT_S <= 5


def test_the_end_of_a_run_waits_a_bounded_time_for_a_target_that_hangs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time

    release = threading.Event()
    monkeypatch.setattr(events, "ensure_metrics_topic", lambda ctx, timeout_s=30: None)
    monkeypatch.setattr(events, "publish", lambda ctx, evs, timeout_s=30: release.wait(30))
    monkeypatch.setattr(events, "END_WAIT_S", 0.3)
    run = run_events_of(["A->B"], "continuous")
    try:
        run.start()
        began = time.monotonic()
        run.error(RuntimeError("the target is gone"))
        assert time.monotonic() - began < 3  # END_WAIT_S, not the target's 30 s
    finally:
        release.set()
