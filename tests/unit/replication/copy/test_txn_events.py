"""What a target's transaction carries besides its records: offset syncs only where the flow
emits them, and a ``resumed`` event when its records waited to be copied (no Kafka: the writer
and its partitions are stand-ins)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from mirror_lib.config.parse import parse_config
from mirror_lib.mm2.formats import OffsetSync
from mirror_lib.offsets.segments import Segment
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.txn_events import UsualWait, resumed_events, sync_records
from mirror_lib.replication.events import QueryRestart

PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true"}  # fmt: skip


def _ctx(**props: str) -> FlowContext:
    return FlowContext.create(parse_config({**PROPS, **props}), "A->B")


OFF = ("emit.offset-syncs.enabled", "emit.checkpoints.enabled", "sync.group.offsets.enabled")


def test_offset_syncs_follow_the_segments_only_where_the_flow_emits_them():
    segments = {("t", 0): [Segment(0, 9, 100, 109)]}
    syncs = sync_records(_ctx().settings, segments)
    assert syncs[0] == OffsetSync("t", 0, 0, 100)
    assert all(s.topic == "t" and s.downstream_offset - s.upstream_offset == 100 for s in syncs)
    off = _ctx(**{f"A->B.{key}": "false" for key in OFF}).settings
    assert sync_records(off, segments) == []


def _writer(
    landed: dict,
    *,
    fresh_start: bool,
    trouble: str | None = None,
    behind: frozenset = frozenset(),
    query_restart: QueryRestart | None = None,
    source_lost: Callable[[list], str | None] = lambda _held: None,
) -> SimpleNamespace:
    ledger = SimpleNamespace(landed_ms=landed, left_behind=set(behind))
    return SimpleNamespace(ctx=_ctx(), ledger=ledger, trouble=trouble, fresh_start=fresh_start,
                           slot=1, batch_id=7, query_restart=query_restart,
                           source_lost=source_lost)  # fmt: skip


def _part(partition: int, n: int, first_ts: int, read_ms: float | None = None) -> SimpleNamespace:
    """A partition's open transaction: its first record created at ``first_ts`` and read by
    the copy task at ``read_ms`` (at once when not given)."""
    read = first_ts if read_ms is None else read_ms
    return SimpleNamespace(topic="t", remote="A.t", partition=partition, n=n, ts=[first_ts],
                           consumed=[(read, n)])  # fmt: skip


def test_records_that_waited_a_second_tell_how_long_copying_stopped_and_why():
    """From the later of the partition's last commit and the first record's CreateTime to the
    acknowledgement; a partition that never committed (a new backlog) does not count."""
    parts = {("t", 0): _part(0, 5, 12_000), ("t", 1): _part(1, 3, 1_000), ("t", 2): _part(2, 2, 0)}
    w = _writer({("A.t", 0): 10_000, ("A.t", 1): 14_500}, fresh_start=True)
    (event,) = resumed_events(w, parts, acked_ms=15_000.0, usual=UsualWait())  # type: ignore[arg-type]
    assert (event["type"], event["slot"], event["batch_id"]) == ("resumed", 1, 7)
    assert (event["waited_s"], event["since_ms"], event["records"]) == (3.0, 12_000, 5)
    assert event["partitions"] == ["A.t[0]"]
    assert event["reason"] == (
        "copying resumed after 3.0s: the slot's copy task started again (the query or its "
        "slice restarted)"
    )
    held = _writer({("A.t", 0): 10_000}, fresh_start=False, trouble="B refused the writes")
    (told,) = resumed_events(held, parts, acked_ms=15_000.0, usual=UsualWait())  # type: ignore[arg-type]
    assert told["reason"].endswith(": B refused the writes")
    assert "source_s" not in event and "source_s" not in told  # a cause the task saw
    assert resumed_events(held, parts, acked_ms=12_900.0, usual=UsualWait()) == []  # type: ignore[arg-type]


def test_a_wait_since_before_the_query_was_started_again_through_an_outage_names_it():
    """Two brokers of B cut off: the run's supervisor started the query again until B took
    writes, and the wait was told only as "the slot's copy task started again", with the
    cause in the outage events alone. A later slice of that query tells its own waits."""
    why = "an outage of target cluster B: B.t[0] has 1 in-sync replica (NOT_ENOUGH_REPLICAS)"
    restart = QueryRestart.of_option(QueryRestart(13_000, "0123456789ab", why).option())
    assert restart == QueryRestart(13_000, "0123456789ab", why)  # as the option carries it
    parts = {("t", 0): _part(0, 5, 12_000)}
    w = _writer({("A.t", 0): 10_000}, fresh_start=True, query_restart=restart)
    (event,) = resumed_events(w, parts, acked_ms=15_000.0, usual=UsualWait())  # type: ignore[arg-type]
    assert event["reason"] == f"copying resumed after 3.0s: the query was started again after {why}"
    assert event["outage_id"] == "0123456789ab"
    later = _writer(
        {("A.t", 0): 10_000}, fresh_start=True, query_restart=QueryRestart(11_000, "x", why)
    )
    (event,) = resumed_events(later, parts, acked_ms=15_000.0, usual=UsualWait())  # type: ignore[arg-type]
    assert "outage" not in event["reason"] and "outage_id" not in event
    assert QueryRestart.of_option(None) is None


def test_a_backlog_copied_in_turns_is_not_a_wait_unless_a_fault_held_it():
    """1,000 partitions copied from a backlog: a partition whose last commit left records on
    the source waits for the copy to come round to it, seconds between its commits, and the
    events said "the target acknowledged late" nine times in one run that had no fault."""
    parts = {("t", 0): _part(0, 124, 0), ("t", 1): _part(1, 5, 0)}
    landed = {("A.t", 0): 10_000, ("A.t", 1): 10_000}
    w = _writer(landed, fresh_start=False, behind=frozenset({("A.t", 0)}))
    (event,) = resumed_events(w, parts, acked_ms=15_000.0, usual=UsualWait())  # type: ignore[arg-type]
    assert event["partitions"] == ["A.t[1]"]  # at the head at its last commit: a wait
    for explained in (
        _writer(landed, fresh_start=True, behind=frozenset({("A.t", 0)})),
        _writer(landed, fresh_start=False, trouble="B refused", behind=frozenset({("A.t", 0)})),
    ):
        (told,) = resumed_events(explained, parts, acked_ms=15_000.0, usual=UsualWait())  # type: ignore[arg-type]
        assert told["partitions"] == ["A.t[0]", "A.t[1]"]


def test_a_wait_no_longer_than_twice_the_slots_usual_is_not_told_without_a_cause():
    """On a target busy enough that every transaction's records wait about a second, each said
    "copying resumed after 1.0s: the target acknowledged late", one event a second, though the
    copy never stopped; a wait past twice the usual, or 1.5 s, is still told."""
    parts = {("t", 0): _part(0, 5, 0)}
    w = _writer({("A.t", 0): 10_000}, fresh_start=False)
    usual = UsualWait()
    first = resumed_events(w, parts, acked_ms=11_000.0, usual=usual)  # type: ignore[arg-type]
    assert [e["waited_s"] for e in first] == [1.0]  # nothing usual yet: a second is told
    for _ in range(10):
        resumed_events(w, parts, acked_ms=10_900.0, usual=usual)  # type: ignore[arg-type]
    assert usual.told_from_s() == 1.5  # twice 0.9 s, at most 1.5
    assert resumed_events(w, parts, acked_ms=11_400.0, usual=usual) == []  # type: ignore[arg-type]
    (told,) = resumed_events(w, parts, acked_ms=11_500.0, usual=usual)  # type: ignore[arg-type]
    assert told["waited_s"] == 1.5
    seen = _writer({("A.t", 0): 10_000}, fresh_start=False, trouble="B refused the writes")
    (caused,) = resumed_events(seen, parts, acked_ms=11_000.0, usual=usual)  # type: ignore[arg-type]
    assert caused["reason"] == "copying resumed after 1.0s: B refused the writes"


def test_a_slot_whose_records_usually_wait_little_tells_a_second():
    usual = UsualWait()
    for waited_s in (0.1, 0.2, 0.6, 0.1, 0.3):
        usual.learn(waited_s)
    assert usual.told_from_s() == 1.0


def test_records_the_task_free_to_read_read_late_were_held_by_the_source():
    """A leader of A killed under load (the fault matrix): its producers held the records 11 s
    before A took them, the copy task read them at once, and the event said "the target
    acknowledged late". A wait the task, free since its last commit, spent mostly before it
    read the records is the source's; one it spent busy with a slow commit is not."""
    w = _writer({("A.t", 0): 10_000}, fresh_start=False)
    held = {("t", 0): _part(0, 40, 10_100, read_ms=21_000)}
    (event,) = resumed_events(w, held, 21_300.0, UsualWait(), free_ms=10_050)  # type: ignore[arg-type]
    assert (event["waited_s"], event["source_s"]) == (11.2, 10.9)
    assert event["reason"] == (
        "copying resumed after 11.2s: source cluster A held them: the copy task, free to read, "
        "read them 10.9s into the wait (a leader of A lost, or its producers retrying)"
    )
    (busy,) = resumed_events(w, held, 21_300.0, UsualWait(), free_ms=20_900)  # type: ignore[arg-type]
    assert busy["source_s"] == 0.1
    assert busy["reason"] == "copying resumed after 11.2s: the target acknowledged late"
    read_at_once = {("t", 0): _part(0, 40, 10_100, read_ms=10_200)}
    (late,) = resumed_events(w, read_at_once, 21_300.0, UsualWait(), free_ms=10_050)  # type: ignore[arg-type]
    assert (late["source_s"], late["reason"]) == (
        0.1,
        "copying resumed after 11.2s: the target acknowledged late",
    )


def test_a_wait_the_source_held_names_the_broker_that_left_its_cluster():
    """The fault matrix's leader of A killed: the event said only "a leader of A lost, or its
    producers retrying". The reader's consumer sees which broker holding the partitions that
    waited had left A's cluster; the target's side is never asked."""
    asked: list[list] = []

    def lost(held: list) -> str:
        asked.append(held)
        return "broker 2 had left the cluster"

    w = _writer({("A.t", 0): 10_000, ("A.t", 1): 20_000}, fresh_start=False, source_lost=lost)
    held = {("t", 0): _part(0, 40, 10_100, read_ms=21_000), ("t", 1): _part(1, 2, 21_000)}
    (event,) = resumed_events(w, held, 21_300.0, UsualWait(), free_ms=10_050)  # type: ignore[arg-type]
    assert event["reason"] == (
        "copying resumed after 11.2s: source cluster A held them: the copy task, free to read, "
        "read them 10.9s into the wait (broker 2 had left the cluster)"
    )
    assert asked == [[("t", 0)]]  # the partitions that waited, by their source names
    resumed_events(w, held, 21_300.0, UsualWait(), free_ms=20_900)  # type: ignore[arg-type]
    assert len(asked) == 1  # acknowledged late: the source is not asked
