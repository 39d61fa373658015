"""The ledger's view of a fan-out group: which flows a stall is theirs."""

from __future__ import annotations

from mirror_lib.replication.copy.ledger import flows_short_of
from mirror_lib.replication.planning.stall import StallWatch

A0, A1 = ("a", 0), ("a", 1)
ENDS = {A0: 10, A1: 20}


def test_a_fan_out_stall_names_the_flows_whose_own_ledger_did_not_move() -> None:
    """The group's slowest positions stalled on a-1; only C replicates it (B's ledger has no
    a-1) and B is done on a-0: the error names A->C, not the group's first flow."""
    watch = StallWatch(limit_s=1, min_slices=1)
    watch.observe({A1: 0}, ENDS, now=0)
    stalls = watch.observe({A1: 0}, ENDS, now=5)
    by_flow = {"A->B": {A0: 10}, "A->C": {A0: 10, A1: 0}}
    assert flows_short_of(by_flow, {s.tp: s.end for s in stalls}) == ["A->C"]
    by_flow["A->B"][A1] = 3  # both short of a-1's end
    assert flows_short_of(by_flow, {s.tp: s.end for s in stalls}) == ["A->B", "A->C"]
