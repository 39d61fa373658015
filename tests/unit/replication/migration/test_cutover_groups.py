"""The group moves of a cutover: one refused group stops them all."""

from __future__ import annotations

from mirror_lib.replication.migration.cutover_groups import GroupMove, commit_group_moves


def test_one_refused_group_stops_every_commit():
    moves = [
        GroupMove("a", "t", "A.t", 0, 5, 5, None, "would commit"),
        GroupMove("b", "t", "A.t", 0, 5, 5, None, "refused: 1 active member(s) on B (STABLE)"),
    ]
    assert commit_group_moves(None, moves) == moves  # no admin client is even built
