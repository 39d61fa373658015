"""A micro-batch's budget split over partitions (``allocate``): everything that fits, a fair
share otherwise, never more than the budget or the backlog."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mirror_lib.replication.planning.budget import allocate


def test_allocate_grants_everything_that_fits():
    assert allocate({"a": 5, "b": 0, "c": 7}, 100, 10**9) == {"a": 5, "c": 7}


def test_allocate_shares_fairly_and_small_partitions_are_not_starved():
    grant = allocate({"hot": 10_000, "cold": 3, "warm": 500}, 1_000, 10**9)
    assert grant == {"cold": 3, "warm": 498, "hot": 499}


def test_allocate_bytes_budget_uses_the_record_size_estimate():
    assert sum(allocate({"a": 10_000}, 10**6, 4096, avg_record_bytes=1024).values()) == 4


@given(
    st.dictionaries(st.text(max_size=3), st.integers(0, 10**6), max_size=8), st.integers(1, 10**5)
)
def test_allocate_never_exceeds_budget_or_need(backlog, budget):
    grant = allocate(backlog, budget, 10**12)
    assert sum(grant.values()) <= max(budget, 0)
    assert all(0 <= grant[k] <= backlog[k] for k in grant)
    if sum(backlog.values()) <= budget:
        assert sum(grant.values()) == sum(backlog.values())
