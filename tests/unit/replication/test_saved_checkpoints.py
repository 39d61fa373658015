"""Where the checkpoint job saves its segments, and that saving never fails a cycle."""

from __future__ import annotations

import logging

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.replication.companions import checkpoint_job
from mirror_lib.replication.companions.checkpoint_job import SavedCheckpoints
from mirror_lib.replication.context import FlowContext

PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "127.0.0.1:1",
    "B.bootstrap.servers": "127.0.0.1:2",
    "A->B.enabled": "true",
}


def _ctx(state_dir: str) -> FlowContext:
    return FlowContext.create(parse_config({**PROPS, "mirror.state.dir": state_dir}), "A->B")


def test_a_local_or_volume_state_dir_holds_the_file_in_the_flow_folder(tmp_path) -> None:
    path = SavedCheckpoints.of(_ctx("/Volumes/main/mirror/state")).path
    assert str(path) == "/Volumes/main/mirror/state/flows/A_to_B/checkpoint-segments.json"
    assert SavedCheckpoints.of(_ctx(str(tmp_path))).path == (
        tmp_path / "flows" / "A_to_B" / "checkpoint-segments.json"
    )


@pytest.fixture
def cycles(monkeypatch: pytest.MonkeyPatch) -> list:
    """run_checkpoints as a stub that reads one record; the metrics topic's id appears late."""
    ran: list = []
    ids = iter([None, "id-1"])

    def cycle(ctx, state, force_group_sync=False):
        ran.append((state, state.segments.position))  # the position it starts from
        state.segments.position = 7
        return 3, 0

    monkeypatch.setattr(checkpoint_job, "run_checkpoints", cycle)
    monkeypatch.setattr(checkpoint_job, "_topic_id", lambda ctx, topic: next(ids, "id-1"))
    return ran


def test_saving_waits_for_the_topic_id_and_a_failed_save_is_only_a_warning(
    tmp_path, cycles, caplog
) -> None:
    ctx = _ctx(str(tmp_path))
    saved = SavedCheckpoints.of(ctx)
    assert saved.run(ctx) == (3, 0)
    assert not saved.path.exists()  # no topic id yet: nothing to tie the file to
    assert saved.run(ctx) == (3, 0)
    assert saved.path.exists() and cycles[0][0] is cycles[1][0]  # one state for the job's life
    assert SavedCheckpoints.of(ctx).run(ctx) == (3, 0)  # a new process
    assert [position for _state, position in cycles] == [None, 7, 7]

    blocked = SavedCheckpoints(tmp_path / "a-file" / "segments.json")
    (tmp_path / "a-file").write_text("not a folder")
    with caplog.at_level(logging.WARNING):
        assert blocked.run(ctx) == (3, 0)
    assert "segments not saved" in caplog.text
