"""The transaction-cost bench's plan (bench/txn_cost.py): no broker needed."""

from __future__ import annotations

import pytest

from bench import txn_cost


def test_each_slot_owns_its_share_of_the_partitions_and_of_the_records():
    ours = next(v for v in txn_cost.VARIANTS if v.name == "eos-50x2")
    assert [ours.parts(s) for s in range(ours.slots)] == [[0, 2], [1, 3]]
    assert txn_cost.records_per_commit(ours, 5_000) == 50  # 2,500 records/s a slot, 50 commits
    one = next(v for v in txn_cost.VARIANTS if v.name == "eos-50x1")
    assert one.parts(0) == [0, 1, 2, 3] and txn_cost.records_per_commit(one, 5_000) == 100


def test_unknown_variants_and_empty_figures_are_refused():
    assert [v.name for v in txn_cost.parse_args(["--variants", "floor"]).chosen] == ["floor"]
    with pytest.raises(SystemExit):
        txn_cost.parse_args(["--variants", "floor,eos-7"])
    with pytest.raises(SystemExit):
        txn_cost.parse_args(["--seconds", "0"])
