"""Tests of mirror_lib.offsets.checkpoints: checkpoint emission
(docs/mm2-reference.md#checkpoints), the checkpoint store,
group-offset sync (#group-offset-sync) and scenarios of MM2's integration tests
(testReplication steps 7-9, testNoCheckpointsIfNoRecordsAreMirrored, testRestartReplication,
testOffsetTranslationBehindReplicationFlow)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror_lib.mm2.filters import GroupFilter
from mirror_lib.mm2.formats import Checkpoint
from mirror_lib.mm2.policy import DefaultReplicationPolicy, ReplicationPolicy, make_policy
from mirror_lib.offsets.checkpoints import (
    CheckpointStore,
    accept_group,
    checkpoints_monotonic,
    compute_checkpoints,
    group_offsets_to_sync,
    is_idle_group,
    is_more_recent,
)
from mirror_lib.offsets.segments import Segment, SegmentIndex

G = "app"
POLICY = DefaultReplicationPolicy()

Committed = Mapping[tuple[str, int], tuple[int, str | None] | None]
Translate = Callable[[str, int, int], int | None]


def plus(delta: int) -> Translate:
    """A translation that shifts every offset by ``delta``."""
    return lambda _t, _p, up: up + delta


IDENTITY = plus(0)


def run(
    committed: Committed,
    translate: Translate = IDENTITY,
    store: CheckpointStore | None = None,
    *,
    group: str = G,
    policy: ReplicationPolicy = POLICY,
    accept: Callable[[str], bool] = lambda _t: True,
) -> list[Checkpoint]:
    """compute_checkpoints for flow A->B."""
    return compute_checkpoints(
        group=group,
        committed=committed,
        translate=translate,
        policy=policy,
        source_alias="A",
        target_alias="B",
        should_replicate_topic=accept,
        store=store if store is not None else CheckpointStore(),
    )


def cp(
    topic: str, partition: int, up: int, down: int, group: str = G, meta: str = ""
) -> Checkpoint:
    """A checkpoint of group ``G`` unless told otherwise."""
    return Checkpoint(group, topic, partition, up, down, meta)


# --- CheckpointStore ---------------------------------------------------------------------------


def test_store_load_keeps_latest_per_key() -> None:
    store = CheckpointStore()
    store.load([cp("A.t", 0, 10, 10), cp("A.t", 1, 5, 5), cp("A.t", 0, 20, 19), cp("A.t", 0, 3, 3)])
    assert store.get(G, "A.t", 0) == cp("A.t", 0, 3, 3)  # the last record wins, even a rewind
    assert store.get(G, "A.t", 1) == cp("A.t", 1, 5, 5)
    assert store.get(G, "A.t", 2) is None
    assert store.get("other", "A.t", 0) is None
    assert len(store) == 2


def test_store_latest_groups_update() -> None:
    store = CheckpointStore([cp("A.t", 0, 1, 1), cp("A.u", 3, 2, 2, group="g2")])
    assert store.groups() == {G, "g2"}
    latest = store.latest(G)
    assert latest == {("A.t", 0): cp("A.t", 0, 1, 1)}
    latest.clear()  # a copy
    assert store.latest(G)
    assert store.latest("nope") == {}
    store.update(cp("A.t", 0, 9, 8))
    assert store.get(G, "A.t", 0) == cp("A.t", 0, 9, 8)
    assert sorted(store, key=lambda c: c.group) == [cp("A.t", 0, 9, 8), cp("A.u", 3, 2, 2, "g2")]


def test_store_load_only_own_groups() -> None:
    store = CheckpointStore()
    store.load([cp("A.t", 0, 1, 1), cp("A.t", 0, 1, 1, group="other")], groups={G})
    assert store.groups() == {G}


def test_store_reload_then_identical_commit_is_suppressed() -> None:
    """testRestartReplication: after a restart the reloaded store keeps suppressing what was already
    emitted."""
    first = CheckpointStore()
    history = run({("t", 0): (10, None)}, plus(0), first)
    history += run({("t", 0): (20, None)}, plus(0), first)
    reloaded = CheckpointStore(history)
    assert reloaded.get(G, "A.t", 0) == cp("A.t", 0, 20, 20)
    assert run({("t", 0): (20, None)}, plus(0), reloaded) == []
    history += run({("t", 0): (30, None)}, plus(0), reloaded)
    assert checkpoints_monotonic(history)
    assert history[-1] == cp("A.t", 0, 30, 30)


# --- compute_checkpoints: filtering and translation --------------------------------------------


def test_topic_filter_keeps_only_accepted_topics() -> None:
    committed = {("keep", 0): (5, ""), ("drop", 0): (5, "")}
    out = run(committed, accept=lambda t: t == "keep")
    assert out == [cp("A.keep", 0, 5, 5)]


def test_skips_null_and_negative_committed_offsets() -> None:
    calls: list[tuple[str, int, int]] = []

    def translate(t: str, p: int, up: int) -> int:
        calls.append((t, p, up))
        return up

    out = run({("t", 0): None, ("t", 1): (-1, ""), ("t", 2): (4, "")}, translate)
    assert out == [cp("A.t", 2, 4, 4)]
    assert calls == [("t", 2, 4)]  # never asked to translate a null or negative offset


def test_skips_untranslatable_and_negative_translation() -> None:
    table = {0: None, 1: -1, 2: 7}
    out = run({("t", p): (3, "") for p in table}, lambda _t, p, _u: table[p])
    assert out == [cp("A.t", 2, 3, 7)]


def test_no_checkpoint_without_syncs_then_both() -> None:
    """testNoCheckpointsIfNoRecordsAreMirrored: an empty partition with no offset syncs gets no
    checkpoint until records flow."""
    indexes = {("test-topic-1", 0): SegmentIndex([Segment(0, 99, 0, 99)])}
    store = CheckpointStore()

    def translate(t: str, p: int, up: int) -> int | None:
        index = indexes.get((t, p))
        return None if index is None else index.translate(up)

    committed = {("test-topic-1", 0): (100, ""), ("test-topic-no-checkpoints", 0): (0, "")}
    assert run(committed, translate, store) == [cp("A.test-topic-1", 0, 100, 100)]
    assert store.get(G, "A.test-topic-no-checkpoints", 0) is None

    indexes[("test-topic-no-checkpoints", 0)] = SegmentIndex([Segment(0, 99, 0, 99)])
    committed[("test-topic-no-checkpoints", 0)] = (100, "")
    assert run(committed, translate, store) == [cp("A.test-topic-no-checkpoints", 0, 100, 100)]
    assert store.get(G, "A.test-topic-1", 0) == cp("A.test-topic-1", 0, 100, 100)


def test_a_group_at_the_start_of_a_partition_gets_checkpoint_zero() -> None:
    """Downstream offset 0 is a translation like any other: only None and negative ones are
    dropped. (A partition with nothing replicated has no segments, so no translation and no
    checkpoint at all: see the test above; MM2's testReplicationWithEmptyPartition is not covered
    here.)"""
    indexes = {("t", p): SegmentIndex([Segment(0, 9, 0, 9)]) for p in range(10)}
    committed = {("t", p): (10 if p < 9 else 0, "") for p in range(10)}
    out = run(committed, lambda t, p, up: indexes[(t, p)].translate(up))
    assert len(out) == 10
    assert out[9] == cp("A.t", 9, 0, 0)


def test_rename_local_and_came_from_target() -> None:
    """Flow A->B: `x` -> `A.x`; `B.x` on A (originally from B) -> `x`; `C.x` -> `A.C.x`."""
    out = run({("x", 0): (1, ""), ("B.x", 0): (2, ""), ("C.x", 1): (3, "")})
    assert out == [cp("A.C.x", 1, 3, 3), cp("A.x", 0, 1, 1), cp("x", 0, 2, 2)]


def test_rename_identity_policy_keeps_names() -> None:
    policy = make_policy("IdentityReplicationPolicy", source_cluster_alias="A")
    assert run({("x", 0): (1, "")}, policy=policy) == [cp("x", 0, 1, 1)]


def test_metadata_carried_and_none_becomes_empty() -> None:
    out = run({("t", 0): (1, "m0"), ("t", 1): (1, None)})
    assert [c.metadata for c in out] == ["m0", ""]


def test_output_sorted_by_target_topic_and_partition() -> None:
    committed = {("z", 2): (1, ""), ("b", 1): (1, ""), ("z", 0): (1, ""), ("b", 0): (1, "")}
    out = run(committed)
    assert [(c.topic, c.partition) for c in out] == [("A.b", 0), ("A.b", 1), ("A.z", 0), ("A.z", 2)]
    assert {c.group for c in out} == {G}


# --- compute_checkpoints: "more recent" suppression --------------------------------------------


def test_same_downstream_suppressed() -> None:
    store = CheckpointStore()
    assert run({("t", 0): (10, "")}, plus(0), store) == [cp("A.t", 0, 10, 10)]
    assert run({("t", 0): (10, "")}, plus(0), store) == []
    # A larger upstream with the same downstream (e.g. past the last sync) is suppressed too.
    assert run({("t", 0): (15, "")}, lambda *_: 10, store) == []
    assert store.get(G, "A.t", 0) == cp("A.t", 0, 10, 10)


def test_smaller_downstream_without_rewind_suppressed() -> None:
    store = CheckpointStore()
    run({("t", 0): (10, "")}, plus(100), store)
    assert run({("t", 0): (12, "")}, plus(0), store) == []  # downstream 12 < 110, no rewind
    assert run({("t", 0): (10, "")}, plus(50), store) == []  # same upstream, smaller downstream
    assert store.get(G, "A.t", 0) == cp("A.t", 0, 10, 110)


def test_larger_downstream_emitted() -> None:
    store = CheckpointStore()
    run({("t", 0): (10, "")}, plus(0), store)
    assert run({("t", 0): (11, "")}, plus(0), store) == [cp("A.t", 0, 11, 11)]


def test_rewind_emitted_and_stored() -> None:
    store = CheckpointStore()
    run({("t", 0): (10, "")}, plus(0), store)
    assert run({("t", 0): (4, "")}, plus(0), store) == [cp("A.t", 0, 4, 4)]
    assert store.get(G, "A.t", 0) == cp("A.t", 0, 4, 4)
    # An upstream rewind is emitted even if the downstream offset did not move back.
    assert run({("t", 0): (3, "")}, lambda *_: 4, store) == [cp("A.t", 0, 3, 4)]


def test_suppression_is_per_group_and_partition() -> None:
    store = CheckpointStore()
    run({("t", 0): (10, "")}, plus(0), store)
    assert run({("t", 0): (10, "")}, plus(0), store, group="g2") == [cp("A.t", 0, 10, 10, "g2")]
    assert run({("t", 1): (10, "")}, plus(0), store) == [cp("A.t", 1, 10, 10)]


def test_is_more_recent() -> None:
    prev = cp("A.t", 0, 10, 10)
    assert is_more_recent(prev, None)
    assert not is_more_recent(prev, prev)
    assert is_more_recent(cp("A.t", 0, 11, 11), prev)
    assert is_more_recent(cp("A.t", 0, 9, 9), prev)
    assert not is_more_recent(cp("A.t", 0, 11, 9), prev)


def test_translation_behind_replication_flow() -> None:
    """testOffsetTranslationBehindReplicationFlow: 90% gives strictly larger checkpoints than the
    initial ones, then 10% strictly smaller ones (the rewind propagates); the stream stays
    monotonic."""
    parts, per_part = 10, 1000
    # The downstream log starts at 500 (e.g. a pre-existing prefix) to make translation visible.
    index = SegmentIndex([Segment(0, per_part - 1, 500, 500 + per_part - 1)])
    store = CheckpointStore()
    history: list[Checkpoint] = []

    def commit_at(fraction: float) -> list[Checkpoint]:
        out = run(
            {("t", p): (int(per_part * fraction), "") for p in range(parts)},
            lambda _t, _p, up: index.translate(up),
            store,
        )
        history.extend(out)
        return out

    initial = commit_at(0.01)
    high = commit_at(0.9)
    low = commit_at(0.1)
    assert len(initial) == len(high) == len(low) == parts
    for a, b, c in zip(initial, high, low, strict=True):
        assert a.downstream_offset < b.downstream_offset
        assert c.downstream_offset < b.downstream_offset
        assert c.upstream_offset < b.upstream_offset
    assert checkpoints_monotonic(history)
    assert commit_at(0.1) == []  # re-committing the same position emits nothing


# --- group_offsets_to_sync ----------------------------------------------------------------------

CPS = {("A.t", p): cp("A.t", p, 100 + p, 50 + p) for p in range(4)}


@pytest.mark.parametrize(
    ("state", "members"),
    [
        ("STABLE", 0),
        ("Stable", 2),
        ("PREPARING_REBALANCE", 0),
        ("COMPLETING_REBALANCE", 0),
        ("ASSIGNING", 0),
        ("RECONCILING", 0),
        ("EMPTY", 1),
        ("UNKNOWN", 3),
        (None, 1),
    ],
)
def test_active_group_untouched(state: str | None, members: int) -> None:
    assert not is_idle_group(state, members)
    got = group_offsets_to_sync(
        checkpoints=CPS, target_state=state, target_members=members, target_offsets={}
    )
    assert got == {}


def test_absent_group_gets_everything() -> None:
    got = group_offsets_to_sync(
        checkpoints=CPS, target_state=None, target_members=0, target_offsets={}
    )
    assert got == {tp: c.downstream_offset for tp, c in CPS.items()}


@pytest.mark.parametrize("state", ["EMPTY", "Empty", "DEAD", "UNKNOWN", "unknown"])
def test_idle_states_are_synced(state: str) -> None:
    """Java MM2 syncs EMPTY groups; tansu reports UNKNOWN/EMPTY for idle groups."""
    assert is_idle_group(state, 0)
    got = group_offsets_to_sync(
        checkpoints=CPS, target_state=state, target_members=0, target_offsets={}
    )
    assert len(got) == len(CPS)


def test_never_rewinds_and_overwrites_missing_negative_or_behind() -> None:
    target = {("A.t", 0): 80, ("A.t", 1): 51, ("A.t", 2): -1, ("A.t", 9): 5}  # 3: missing
    got = group_offsets_to_sync(
        checkpoints=CPS, target_state="EMPTY", target_members=0, target_offsets=target
    )
    # p0: target 80 > 50 skip; p1: 51 == downstream skip; p2: negative; p3: missing.
    assert got == {("A.t", 2): 52, ("A.t", 3): 53}
    behind = group_offsets_to_sync(
        checkpoints=CPS, target_state="EMPTY", target_members=0, target_offsets={("A.t", 0): 49}
    )
    assert behind[("A.t", 0)] == 50


def test_group_sync_nothing_to_do() -> None:
    target = {tp: c.downstream_offset for tp, c in CPS.items()}
    assert (
        group_offsets_to_sync(
            checkpoints=CPS, target_state="EMPTY", target_members=0, target_offsets=target
        )
        == {}
    )
    assert (
        group_offsets_to_sync(
            checkpoints={}, target_state=None, target_members=0, target_offsets={}
        )
        == {}
    )


def test_failover_positions_within_bounds() -> None:
    """testReplication step 7: every partition has a checkpoint; synced position in (0, 100]."""
    store = CheckpointStore()
    index = SegmentIndex([Segment(0, 9, 0, 9)])
    run({("test-topic-1", p): (10, "") for p in range(10)}, lambda *a: index.translate(a[2]), store)
    latest = store.latest(G)
    assert set(latest) == {("A.test-topic-1", p) for p in range(10)}
    got = group_offsets_to_sync(
        checkpoints=latest, target_state=None, target_members=0, target_offsets={}
    )
    assert all(0 < off <= 100 for off in got.values())


# --- checkpoints_monotonic ----------------------------------------------------------------------


def test_checkpoints_monotonic() -> None:
    assert checkpoints_monotonic([])
    assert checkpoints_monotonic([cp("A.t", 0, 1, 1), cp("A.t", 0, 2, 2), cp("A.t", 0, 2, 2)])
    assert checkpoints_monotonic([cp("A.t", 0, 10, 10), cp("A.t", 0, 5, 5)])  # rewind
    assert not checkpoints_monotonic([cp("A.t", 0, 10, 10), cp("A.t", 0, 11, 9)])
    assert not checkpoints_monotonic([cp("A.t", 0, 10, 10), cp("A.t", 0, 10, 9)])
    # Keys are independent.
    assert checkpoints_monotonic([cp("A.t", 0, 10, 10), cp("A.t", 1, 1, 1), cp("A.u", 0, 1, 1)])
    assert checkpoints_monotonic([cp("A.t", 0, 10, 10), cp("A.t", 0, 1, 1, group="g2")])


# --- accept_group -------------------------------------------------------------------------------


def test_accept_group() -> None:
    default = GroupFilter()
    assert accept_group("app", default)
    assert not accept_group("console-consumer-1", default)
    assert not accept_group("connect-x", default)
    everything = GroupFilter(".*", "")
    assert accept_group("console-consumer-1", everything)
    assert not accept_group("__mirror", everything)
    assert not accept_group("__mirror-copier-A-B", everything)
    assert not accept_group("app", GroupFilter("orders-.*", ""))


# --- Property: the emitted stream is monotonic -------------------------------------------------

# Per step: (partition, delta to the current committed offset, restart?). Negative deltas rewind.
STEPS = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.one_of(st.integers(0, 20), st.integers(0, 20), st.integers(-60, -1)),
        st.booleans(),
    ),
    max_size=60,
)
SEGMENT_GAPS = st.lists(st.tuples(st.integers(1, 15), st.integers(0, 5), st.integers(0, 5)))


def build_index(gaps: list[tuple[int, int, int]]) -> SegmentIndex:
    """Segments of random length, with random gaps upstream (filtered) and downstream."""
    segs, up, down = [], 0, 0
    for length, up_gap, down_gap in gaps:
        up, down = up + up_gap, down + down_gap
        segs.append(Segment(up, up + length - 1, down, down + length - 1))
        up, down = up + length, down + length
    return SegmentIndex(segs)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, gaps=SEGMENT_GAPS, noise=st.lists(st.integers(-3, 3), min_size=1))
def test_emitted_stream_is_monotonic(
    steps: list[tuple[int, int, bool]], gaps: list[tuple[int, int, int]], noise: list[int]
) -> None:
    """Any commit sequence (with rewinds and restarts that reload the store from the emitted
    history) yields a monotonic stream, even when translation itself is not monotonic."""
    index = build_index(gaps)
    calls = [0]

    def translate(_t: str, _p: int, up: int) -> int | None:
        base = index.translate(up)
        if base is None:
            return None
        calls[0] += 1
        return base + noise[calls[0] % len(noise)]  # may go backwards or negative

    positions = [0, 0, 0]
    history: list[Checkpoint] = []
    store = CheckpointStore()
    for partition, delta, restart in steps:
        positions[partition] = max(0, positions[partition] + delta)
        if restart:
            store = CheckpointStore(history)
        committed = {("t", p): (positions[p], "") for p in range(3)}
        out = run(committed, translate, store)
        assert all(c.downstream_offset >= 0 and c.topic == "A.t" for c in out)
        history.extend(out)
    assert checkpoints_monotonic(history)
    assert CheckpointStore(history).latest(G) == store.latest(G)
