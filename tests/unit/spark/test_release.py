"""The end of `--once` releases Spark on a thread: every query stopped, then the session."""

from __future__ import annotations

from mirror_lib.spark.runner import _release_spark


class Stoppable:
    def __init__(self, calls: list[str], name: str, fails: bool = False) -> None:
        self.calls, self.name, self.fails = calls, name, fails

    def stop(self) -> None:
        self.calls.append(self.name)
        if self.fails:
            raise RuntimeError(f"{self.name} would not stop")


def test_every_query_then_the_session_is_stopped_even_when_one_stop_fails(caplog):
    calls: list[str] = []
    runners = [Stoppable(calls, "A->B", fails=True), Stoppable(calls, "A->C")]
    thread = _release_spark(Stoppable(calls, "session"), runners)
    thread.join(10)
    assert not thread.is_alive()
    assert calls == ["A->B", "A->C", "session"]
    assert "stopping a part of the run failed" in caplog.text
