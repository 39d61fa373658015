"""The group-rounds bench times its rounds without a profiler, and profiles rounds of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import group_rounds as gr
from mirror_lib.replication.context import FlowContext


def test_the_timed_rounds_run_without_a_profiler_and_two_more_are_profiled(monkeypatch, tmp_path):
    profiles: list[Path | None] = []

    def fake_timed(call: Any, profile: Path | None = None) -> dict[str, Any]:
        profiles.append(profile)
        return {"wall_s": 1.0}

    monkeypatch.setattr(gr, "timed", fake_timed)
    monkeypatch.setattr("mirror_lib.config.parse.load_config", lambda path: object())
    monkeypatch.setattr(FlowContext, "create", staticmethod(lambda config, name: object()))
    out = gr.rounds(tmp_path / "mm2.properties", 7, tmp_path)
    assert [out[k] for k in ("first_round", "round", "first_sync", "sync")] == [{"wall_s": 1.0}] * 4
    assert profiles == [
        None, None, tmp_path / "profile-7-round.txt", None, None, tmp_path / "profile-7-sync.txt"
    ]  # fmt: skip
    profiles.clear()
    gr.rounds(tmp_path / "mm2.properties", 7)
    assert profiles == [None] * 4
