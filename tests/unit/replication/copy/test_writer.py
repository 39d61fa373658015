"""A target's share of a copy task: what it keeps of a shared read, and the bounded buffer that
lets one fan-out target wait for acknowledgements without holding up the others."""

from __future__ import annotations

import json
import struct
import time

import confluent_kafka
import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy import commit_strategies as strategies
from mirror_lib.replication.copy import landing, txn_timing
from mirror_lib.replication.copy import ledger as ledger_module
from mirror_lib.replication.copy import writer as writer_module
from mirror_lib.replication.copy.fanout_targets import Targets, behind_error
from mirror_lib.replication.copy.source_reader import CONSUME_BATCH, Reader
from mirror_lib.replication.copy.target_producer import Trouble
from mirror_lib.replication.copy.writer import CopyResult, TargetWriter
from tests.helpers.fake_kafka import FakeConsumer, FakeLedger, FakeMessage, FakeProducer

PROPS = {
    "clusters": "A, B, C",
    "A.bootstrap.servers": "a:1",
    "B.bootstrap.servers": "b:1",
    "C.bootstrap.servers": "c:1",
    "A->B.enabled": "true",
    "A->C.enabled": "true",
    "mirror.fanout.enabled": "true",
    "mirror.fanout.max.lag.records": "25",
    "emit.offset-syncs.enabled": "true",
    "mirror.metrics.interval.ms": "0",  # a batch event per transaction (test_metrics_window.py)
}
ONE_TARGET = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:1",
    "B.bootstrap.servers": "b:1",
    "A->B.enabled": "true",
}


def _writer(
    monkeypatch,
    start: int = 0,
    until: int = 2**63 - 1,
    fanout: bool = True,
    flow: str = "A->C",
    props: dict[str, str] | None = None,
    topic_ids: dict[str, str] | None = None,
):
    ctx = FlowContext.create(parse_config({**PROPS, **(props or {})}), flow)
    producer = FakeProducer()
    monkeypatch.setattr(writer_module, "make_producer", lambda *a, **k: (producer, 60_000))
    monkeypatch.setattr(
        ledger_module,
        "ledger_consumer",
        lambda *a, **k: FakeLedger({("A.T", 0): start}, on_commit=k.get("on_commit")),
    )
    w = TargetWriter(
        ctx, 0, [("T", 0)], until={("T", 0): until}, options_key="k", fanout=fanout,
        topic_ids=topic_ids,
    )  # fmt: skip
    w.start()
    return w, producer


def _records(first: int, last: int) -> list[FakeMessage]:
    return [FakeMessage("T", 0, o) for o in range(first, last + 1)]


def _no_watermarks(_tp):
    return (-1, -1)


def _copied(producer: FakeProducer) -> list[bytes]:
    return producer.log.get(("A.T", 0), [])


def _ledger(producer: FakeProducer) -> list[int]:
    return [tp.offset for offsets in producer.committed for tp in offsets]


def test_records_the_target_already_has_are_dropped(monkeypatch):
    """Two targets share a read from the lower position: the one ahead keeps only the rest."""
    w, producer = _writer(monkeypatch, start=5)
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    assert _copied(producer) == [b"v%d" % o for o in range(5, 10)]
    assert _ledger(producer) == [10]


@pytest.mark.parametrize("ids", [{"T": "id7"}, None], ids=["planned id", "no id"])
def test_a_segments_event_names_the_source_topic_id_it_was_copied_from(monkeypatch, ids):
    """A planner on a new checkpoint reads it back to tell a re-created topic (source_gaps)."""
    w, producer = _writer(monkeypatch, topic_ids=ids)
    w.accept(("T", 0), _records(0, 4), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    metrics = [json.loads(v) for v in producer.log[("mm2-metrics.A.internal", 0)]]
    segments = [e for e in metrics if e["type"] == "segments"]
    assert [e.get("topic_id") for e in segments] == [ids["T"] if ids else None]
    assert ids or "topic_id" not in segments[0]


def test_a_waiting_commit_holds_records_and_moves_and_copies_them_in_order(monkeypatch):
    w, producer = _writer(monkeypatch, until=30)
    producer.acking = False  # the target is slow: nothing acknowledged yet (even by accept's poll)
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert not w.commit(_no_watermarks, wait=False)
    assert w.strategy.holding
    w.accept(("T", 0), _records(10, 14), 0.0)  # held, not produced into the waiting transaction
    w.move(("T", 0), 20)  # e.g. an end of partition after aborted records: held too
    assert len(producer.queue) == 10
    assert not w.parts[("T", 0)].done
    producer.acking = True
    assert w.commit(_no_watermarks, wait=True)  # commits, copies what was held, commits again
    assert _copied(producer) == [b"v%d" % o for o in range(15)]
    assert _ledger(producer) == [10, 20]  # the first transaction's ledger never ran ahead
    assert not w.strategy.holding and not w.strategy.held


def test_an_end_of_partition_while_a_commit_waits_finishes_the_partition_after_it(monkeypatch):
    """Every record up to the slice's end was copied, and the end of the partition came while
    a fan-out commit waited for acknowledgements: the partition was never done, so a ``--once``
    slot read on until the stall watch failed it after 60 s (beside two busy loops)."""
    w, producer = _writer(monkeypatch, until=10)
    producer.acking = False
    w.accept(("T", 0), _records(0, 9), 0.0)  # offset 9 is the last before the end: not done yet
    assert not w.commit(_no_watermarks, wait=False) and w.strategy.holding
    assert w.parts[("T", 0)].expect == 10 and not w.done()
    w.finish(("T", 0), 10)  # what the copier does at the end of partition
    producer.acking = True
    assert w.commit(_no_watermarks, wait=True)
    assert w.done() and _ledger(producer) == [10]


def test_a_target_more_than_the_bound_behind_the_lead_must_leave(monkeypatch):
    w, producer = _writer(monkeypatch)
    producer.acking = False
    w.accept(("T", 0), _records(0, 9), 0.0)
    w.commit(_no_watermarks, wait=False)
    w.accept(("T", 0), _records(10, 29), 0.0)  # 10 unacknowledged + 20 held = 30 waiting
    assert w.waiting() == 30
    assert behind_error(w, lead=5) is None  # 25 behind the target furthest ahead: the bound
    error = behind_error(w, lead=4)
    assert error is not None and error.transient
    assert "A->C.mirror.fanout.max.lag.records = 25" in str(error)
    assert _ledger(producer) == []  # nothing of the waiting transaction was committed


def test_a_big_read_alone_is_not_lag(monkeypatch):
    """Every healthy target has a whole consumed batch in flight at once: only the difference
    to the target furthest ahead counts."""
    w, producer = _writer(monkeypatch)
    producer.acking = False
    w.accept(("T", 0), _records(0, 99), 0.0)
    assert behind_error(w, lead=100) is None


def test_a_single_target_never_holds(monkeypatch):
    """Outside a fan-out group a commit waits for its acknowledgements, as before."""
    w, producer = _writer(monkeypatch, fanout=False)
    w.accept(("T", 0), _records(0, 99), 0.0)  # far past the fan-out bound: no error
    assert w.commit(_no_watermarks, wait=True)
    assert _ledger(producer) == [100]


def test_reaching_until_ends_the_partition(monkeypatch):
    w, producer = _writer(monkeypatch, until=5)
    assert w.accept(("T", 0), _records(0, 9), 0.0)
    assert w.done()
    w.commit(_no_watermarks, wait=True)
    assert _copied(producer) == [b"v%d" % o for o in range(5)]
    assert _ledger(producer) == [5]


def test_a_target_that_acknowledges_nothing_for_flush_s_fails(monkeypatch):
    w, producer = _writer(monkeypatch)
    producer.acking = False
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert not w.commit(_no_watermarks, wait=False)  # waits: not yet FLUSH_S
    monkeypatch.setattr(strategies, "FLUSH_S", 0.0)
    with pytest.raises(BrokerError, match="did not acknowledge records") as exc:
        w.commit(_no_watermarks, wait=False)
    assert exc.value.transient


@pytest.mark.parametrize(
    ("failure", "transient"),
    [
        (confluent_kafka.KafkaError._MSG_TIMED_OUT, True),  # an outage began after the data
        (confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED, False),
    ],
)
def test_a_commit_whose_own_records_fail_delivery_is_transient_only_for_an_outage(
    monkeypatch, failure, transient
):
    w, producer = _writer(monkeypatch, fanout=False, flow="A->B")
    w.accept(("T", 0), _records(0, 9), 0.0)
    producer.commit_fails_with = confluent_kafka.KafkaError(failure)
    with pytest.raises(BrokerError, match="failed delivery") as exc:
        w.commit(_no_watermarks)
    assert exc.value.transient is transient
    assert confluent_kafka.KafkaError(failure).name() in str(exc.value)
    assert producer.committed == []  # nothing of it counts as delivered


def test_accept_serves_delivery_reports_so_acknowledged_records_are_freed(monkeypatch):
    """librdkafka keeps an acknowledged record until its delivery report is served: serving
    them only at the commit held up to a transaction's records (about 40 MB per copy worker)."""
    w, producer = _writer(monkeypatch)
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert len(producer.queue) == 0 and w.waiting() == 0
    assert w.commit(_no_watermarks, wait=True)
    assert _copied(producer) == [b"v%d" % o for o in range(10)]
    assert _ledger(producer) == [10]


def test_a_target_that_reached_its_end_is_not_the_lead(monkeypatch):
    """``--once``: C has copied up to the snapshot and waits for nothing; B still reads, with a
    whole consumed batch in flight. Measured against C, every read of B would look like lag and
    B would leave the shared read in every slice, never to finish."""
    done, _ = _writer(monkeypatch, until=0, flow="A->C")
    reading, producer = _writer(monkeypatch, until=1000, flow="A->B")
    producer.acking = False
    reading.accept(("T", 0), _records(0, 299), 0.0)  # 300 in flight, the bound is 25
    assert done.done() and reading.waiting() == 300
    targets = Targets([done.ctx, reading.ctx], {}, CopyResult(0))  # the bounded buffer, no Kafka
    reader = Reader.__new__(Reader)
    reader.writers = [done, reading]
    targets.writers, targets.readers = [done, reading], [reader]
    targets.drop_laggards(reader)
    assert reader.writers == [done, reading]


SYNCS_ON_SOURCE = {"offset-syncs.topic.location": "source"}


def test_offset_syncs_on_the_source_go_out_from_one_producer_per_slice(monkeypatch):
    """A producer made per commit cost the source cluster a connection and an InitProducerId
    for every transaction; the syncs of a commit go out after it, checked before the next."""
    made: list[FakeProducer] = []

    def source_producer(_conf):
        made.append(FakeProducer())
        return made[-1]

    monkeypatch.setattr(confluent_kafka, "Producer", source_producer)
    w, _producer = _writer(monkeypatch, fanout=False, props=SYNCS_ON_SOURCE)
    for first in (0, 10, 20):
        w.accept(("T", 0), _records(first, first + 9), 0.0)
        assert w.commit(_no_watermarks, wait=True)
    w.settle_syncs()
    assert len(made) == 1
    syncs = made[0].log[("mm2-offset-syncs.C.internal", 0)]
    assert [struct.unpack(">qq", v) for v in syncs] == [(u, u) for u in (0, 9, 10, 19, 20, 29)]


def test_an_offset_sync_not_delivered_fails_the_next_commit(monkeypatch):
    made: list[FakeProducer] = []
    monkeypatch.setattr(
        confluent_kafka, "Producer", lambda _c: made.append(FakeProducer()) or made[-1]
    )
    w, _producer = _writer(monkeypatch, fanout=False, props=SYNCS_ON_SOURCE)
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    w.source_syncs.failed.append("mm2-offset-syncs.C.internal: Broker: Not enough replicas")
    w.accept(("T", 0), _records(10, 19), 0.0)
    with pytest.raises(BrokerError, match="Not enough replicas") as exc:
        w.commit(_no_watermarks, wait=True)
    assert exc.value.transient


def test_the_first_record_ends_the_wait_transaction_open_or_not(monkeypatch):
    """``consume(n, wait)`` returns only with n records or after ``wait``: waiting for a whole
    batch held every record at the source until its commit was due (issue 41's latency)."""
    w, _producer = _writer(monkeypatch, fanout=False)
    reader = Reader.__new__(Reader)
    reader.writers = [w]
    reader.consumer = FakeConsumer(_records(0, 2))
    assert [m.offset() for m in reader.take(0.1)] == [0, 1, 2]
    assert reader.consumer.calls == [(1, 0.1), (CONSUME_BATCH - 1, 0)]
    w.accept(("T", 0), _records(3, 4), 0.0)  # a transaction is open: still the first record
    reader.consumer = FakeConsumer(_records(5, 6))
    assert [m.offset() for m in reader.take(0.05)] == [5, 6]
    assert reader.consumer.calls == [(1, 0.05), (CONSUME_BATCH - 1, 0)]
    reader.consumer = FakeConsumer(_records(7, 8))  # behind the head: no wait at all
    assert [m.offset() for m in reader.take(0)] == [7, 8]
    assert reader.consumer.calls == [(CONSUME_BATCH, 0)]


def test_behind_the_head_a_transaction_lasts_at_least_a_second(monkeypatch):
    """A short commit interval keeps latency low at the head; a backlog still commits in big
    transactions (ten intervals, at least BEHIND_MIN_S)."""
    w, _producer = _writer(monkeypatch, fanout=False)
    assert (w.timing.interval, w.timing.behind_interval) == (0.02, writer_module.BEHIND_MIN_S)
    w.accept(("T", 0), _records(0, 2), 0.0)
    w.txn_start -= 0.5
    assert w.commit_due(behind=False) and not w.commit_due(behind=True)
    w.txn_start -= writer_module.BEHIND_MIN_S
    assert w.commit_due(behind=True)
    slow, _ = _writer(monkeypatch, fanout=False, props={"mirror.commit.interval.ms": "500"})
    assert slow.timing.behind_interval == 5.0


def test_offset_syncs_not_acknowledged_at_the_slice_end_name_their_topic(monkeypatch):
    syncs = FakeProducer()
    syncs.acking = False
    monkeypatch.setattr(confluent_kafka, "Producer", lambda _c: syncs)
    w, _producer = _writer(monkeypatch, fanout=False, props=SYNCS_ON_SOURCE)
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    with pytest.raises(BrokerError, match=r"writing to mm2-offset-syncs\.C\.internal on ") as exc:
        w.settle_syncs()
    assert exc.value.transient


def _two_partition_writer(monkeypatch) -> tuple[TargetWriter, FakeProducer]:
    ctx = FlowContext.create(parse_config(PROPS), "A->B")
    producer = FakeProducer()
    monkeypatch.setattr(writer_module, "make_producer", lambda *a, **k: (producer, 60_000))
    positions = {("A.T", 0): 0, ("A.T", 1): 70}
    monkeypatch.setattr(ledger_module, "ledger_consumer", lambda *a, **k: FakeLedger(positions))
    w = TargetWriter(ctx, 0, [("T", 0), ("T", 1)], until={}, options_key="k", fanout=False)
    w.start()
    return w, producer


def _ledger_by_partition(offsets) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): tp.offset for tp in offsets}


def test_each_slice_writes_every_partitions_ledger_entry_once_so_none_expires(monkeypatch):
    """The broker drops a group's offset of a partition not committed for
    offsets.retention.minutes: an idle partition's entry is written again in every slice."""
    w, producer = _two_partition_writer(monkeypatch)
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    w.accept(("T", 0), _records(10, 19), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    first, second = (_ledger_by_partition(c) for c in producer.committed)
    assert first == {("A.T", 0): 10, ("A.T", 1): 70}  # the idle partition too
    assert second == {("A.T", 0): 20}  # only what moved
    w.refresh_ledger()  # the slice committed: nothing more
    assert len(producer.committed) == 2 and w.result.transactions == 2


def test_a_slice_that_copied_nothing_writes_its_ledger_positions_unchanged(monkeypatch):
    w, producer = _two_partition_writer(monkeypatch)
    w.refresh_ledger()
    assert [_ledger_by_partition(c) for c in producer.committed] == [
        {("A.T", 0): 0, ("A.T", 1): 70}
    ]
    assert producer.log == {} and w.result.transactions == 0  # no records, no metrics
    w.refresh_ledger()
    assert len(producer.committed) == 1


def test_without_idempotence_a_batch_a_retry_wrote_twice_is_counted_and_mapped_around(
    monkeypatch, caplog
):
    """At least once to a target without idempotent producers: a request retried after its
    acknowledgement was lost leaves its records twice on the target. Every record's offset is
    reported, so the segments skip the copy nobody acknowledged, and the copy counts it."""
    w, producer = _writer(
        monkeypatch,
        fanout=False,
        flow="A->B",
        props={
            "mirror.fanout.enabled": "false",
            "mirror.delivery": "at_least_once",
            "B.producer.enable.idempotence": "false",
        },
    )
    assert w.exact
    w.accept(("T", 0), _records(0, 4), 0.0)
    producer.lost_acks = 3  # the request with 5..7 is written, its answer lost, and retried
    w.accept(("T", 0), _records(5, 7), 0.0)
    w.accept(("T", 0), _records(8, 9), 0.0)
    with caplog.at_level("WARNING"):
        assert w.commit(_no_watermarks, wait=True)
    assert _copied(producer) == [b"v%d" % o for o in (*range(8), *range(5, 10))]
    metrics = [json.loads(v) for v in producer.log[("mm2-metrics.A.internal", 0)]]
    segments = [e["segments"] for e in metrics if e["type"] == "segments"]
    assert segments == [[[0, 4, 0, 4], [5, 9, 8, 12]]]
    assert w.result.unreported == 3
    assert "3 record(s) on target cluster B" in caplog.text and "A.T[0]: 3" in caplog.text
    assert not producer.transactional and producer.committed == []
    assert [tp.offset for tp in w.ledger.consumers[0].commits[-1]] == [10]
    # the next commit counts from where this one ended: a retry of its first batch too
    producer.lost_acks = 2
    w.accept(("T", 0), _records(10, 11), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    assert w.result.unreported == 5


AT_LEAST_ONCE = {"mirror.delivery": "at_least_once"}


def _segments(producer: FakeProducer) -> list[list[int]]:
    metrics = [json.loads(v) for v in producer.log[("mm2-metrics.A.internal", 0)]]
    return [seg for e in metrics if e["type"] == "segments" for seg in e["segments"]]


def test_at_least_once_the_loop_copies_on_while_a_commit_is_acknowledged(monkeypatch):
    """Records are visible once acknowledged, so a commit that waited for them held up every
    record that arrived meanwhile (the p99 of the steady bench): it is sealed and lands later."""
    w, producer = _writer(monkeypatch, fanout=False, flow="A->B", props=AT_LEAST_ONCE)
    producer.acking = False
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert not w.commit(_no_watermarks, roll=True)  # sealed, not waited for
    w.accept(("T", 0), _records(10, 14), 0.0)  # produced at once, not held
    assert len(producer.queue) == 15 and not w.strategy.held
    assert not w.commit(_no_watermarks, roll=True)  # the first is not acknowledged yet
    assert w.ledger.consumers[0].commits == []
    producer.acking = True
    assert w.commit(_no_watermarks, roll=True)  # the first lands, the second is sealed ...
    assert w.commit(_no_watermarks, roll=True)  # ... and lands on the next call
    assert [[tp.offset for tp in c] for c in w.ledger.consumers[0].commits] == [[10], [15]]
    assert _segments(producer) == [[0, 9, 0, 9], [10, 14, 10, 14]]
    assert w.result.records == 15 and w.result.transactions == 2


def test_a_rolled_commit_that_lands_leaves_a_young_transaction_open(monkeypatch):
    """Landing a sealed commit does not seal the next one before its interval: commits that
    chained at the pace of the acknowledgements loaded the brokers
    (docs/how-it-works.md#at-least-once)."""
    w, producer = _writer(monkeypatch, fanout=False, flow="A->B", props=AT_LEAST_ONCE)
    producer.acking = False
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert not w.commit(_no_watermarks, roll=True)  # sealed
    w.accept(("T", 0), _records(10, 14), 0.0)
    producer.acking = True
    assert w.commit_due(False)  # the sealed commit can move on ...
    assert w.commit(_no_watermarks, roll=True)
    assert not w.strategy.sealed and w.in_txn  # ... and the young one stays open
    assert [[tp.offset for tp in c] for c in w.ledger.consumers[0].commits] == [[10]]
    assert not w.commit_due(False)
    w.txn_start -= w.timing.interval
    assert w.commit_due(False)  # due once its interval passed
    assert w.commit(_no_watermarks, roll=True)
    assert [[tp.offset for tp in c] for c in w.ledger.consumers[0].commits] == [[10], [15]]


def test_a_rolled_commit_moves_the_ledger_only_after_its_syncs_are_acknowledged(monkeypatch):
    w, producer = _writer(monkeypatch, fanout=False, flow="A->B", props=AT_LEAST_ONCE)
    producer.acking = False
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert not w.commit(_no_watermarks, roll=True)
    producer.acking = True
    producer.poll()  # the records are acknowledged ...
    producer.acking = False
    assert not w.commit(_no_watermarks, roll=True)  # ... their metrics records and syncs not
    assert w.ledger.consumers[0].commits == [] and len(producer.queue) > 0
    assert not w.commit(_no_watermarks, roll=True)
    producer.acking = True
    assert w.commit(_no_watermarks, roll=True)
    assert [[tp.offset for tp in c] for c in w.ledger.consumers[0].commits] == [[10]]


def test_the_slice_end_waits_for_a_rolled_commit_then_commits_the_rest(monkeypatch):
    w, producer = _writer(monkeypatch, fanout=False, flow="A->B", props=AT_LEAST_ONCE)
    producer.acking = False
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert not w.commit(_no_watermarks, roll=True)
    w.accept(("T", 0), _records(10, 19), 0.0)
    producer.acking = True
    assert w.commit(_no_watermarks, wait=True)
    assert [[tp.offset for tp in c] for c in w.ledger.consumers[0].commits] == [[10], [20]]
    assert not w.strategy.sealed and not w.in_txn


def test_a_rolled_commit_the_target_never_acknowledges_fails_after_flush_s(monkeypatch):
    w, producer = _writer(monkeypatch, fanout=False, flow="A->B", props=AT_LEAST_ONCE)
    producer.acking = False
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert not w.commit(_no_watermarks, roll=True)
    monkeypatch.setattr(landing, "FLUSH_S", 0.0)
    with pytest.raises(BrokerError, match="did not acknowledge records") as exc:
        w.commit(_no_watermarks, roll=True)
    assert exc.value.transient
    assert w.ledger.consumers[0].commits == []


@pytest.mark.parametrize(
    "props",
    [{}, {**AT_LEAST_ONCE, "mirror.skip.older.than.ms": "60000", "mirror.on.gap": "skip"}],
    ids=["exactly once", "a stale-data policy"],
)
def test_exactly_once_and_skips_commit_as_one_transaction(monkeypatch, props):
    w, producer = _writer(monkeypatch, fanout=False, flow="A->B", props=props)
    assert not getattr(w.strategy, "rolls", False)
    producer.acking = False
    w.accept(("T", 0), _records(0, 9), 0.0)
    producer.acking = True
    assert w.commit(_no_watermarks, roll=True)  # waited for its acknowledgements
    assert not w.strategy.sealed and w.parts[("T", 0)].committed == 10


def test_a_rolled_ledger_commit_that_failed_fails_the_next_commit(monkeypatch):
    """In the loop the ledger is committed without waiting; its failure is not lost."""
    w, _producer = _writer(monkeypatch, fanout=False, flow="A->B", props=AT_LEAST_ONCE)
    w.ledger.consumers[0].fails_with = confluent_kafka.KafkaError(
        confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
    )
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert w.commit(_no_watermarks, roll=True)  # landed; its ledger commit is on its way
    w.accept(("T", 0), _records(10, 19), 0.0)
    with pytest.raises(BrokerError, match="Group authorization") as exc:
        w.commit(_no_watermarks, roll=True)
    assert not exc.value.transient
    assert w.ledger.consumers[0].commits == []


def _metrics(producer: FakeProducer, kind: str) -> list[dict]:
    values = producer.log.get(("mm2-metrics.A.internal", 0), [])
    return [e for e in (json.loads(v) for v in values) if e["type"] == kind]


def _stamped_writer(monkeypatch, stamp_ms: float | None):
    """A writer of A->B (exactly once) whose ledger entry was last written at ``stamp_ms``."""
    ledger = FakeLedger({("A.T", 0): 0})
    if stamp_ms is not None:
        ledger.metadata[("A.T", 0)] = f"t={int(stamp_ms)}"
    producer = FakeProducer()
    monkeypatch.setattr(writer_module, "make_producer", lambda *a, **k: (producer, 60_000))
    monkeypatch.setattr(ledger_module, "ledger_consumer", lambda *a, **k: ledger)
    ctx = FlowContext.create(parse_config({**PROPS, "mirror.fanout.enabled": "false"}), "A->B")
    w = TargetWriter(ctx, 0, [("T", 0)], until={("T", 0): 2**63 - 1}, options_key="k")
    w.start()
    return w, producer


def test_records_that_waited_across_a_restart_are_told_in_a_resumed_event(monkeypatch):
    """The slot's last commit was 30 s ago (the ledger's stamp) and a record written 20 s ago
    waited for the copy task to start again: one ``resumed`` event says so."""
    now = time.time() * 1000
    w, producer = _stamped_writer(monkeypatch, now - 30_000)
    w.accept(("T", 0), [FakeMessage("T", 0, o, ts=int(now - 20_000)) for o in range(3)], 0.0)
    assert w.commit(_no_watermarks, wait=True)
    (event,) = _metrics(producer, "resumed")
    assert 19.5 < event["waited_s"] < 25 and event["partitions"] == ["A.T[0]"]
    assert event["records"] == 3 and event["since_ms"] == int(now - 20_000)
    assert "copy task started again" in event["reason"]
    w.accept(("T", 0), [FakeMessage("T", 0, 3, ts=int(time.time() * 1000))], 0.0)
    assert w.commit(_no_watermarks, wait=True)
    assert len(_metrics(producer, "resumed")) == 1  # the next commit waited for nothing


def test_a_wait_before_the_free_task_read_the_records_is_told_as_the_sources(monkeypatch):
    """Each commit marks the task free to read; records it read 11.6 s into a 12 s wait that
    began after that (created when their partition's last commit was long done) were held on
    the source side. Read as soon as the task was free again, they were not."""
    now = time.time() * 1000
    w, producer = _stamped_writer(monkeypatch, now - 30_000)
    w.accept(("T", 0), [FakeMessage("T", 0, 0, ts=int(now))], 0.0)
    assert w.commit(_no_watermarks, wait=True)
    assert now <= w.strategy.free_ms <= time.time() * 1000  # type: ignore[attr-defined]
    w.strategy.free_ms = w.ledger.landed_ms[("A.T", 0)] = now - 12_000  # type: ignore[attr-defined]
    late = [FakeMessage("T", 0, o, ts=int(now - 11_900)) for o in range(1, 4)]
    w.accept(("T", 0), late, now - 300)
    assert w.commit(_no_watermarks, wait=True)
    (event,) = _metrics(producer, "resumed")
    assert 11.5 < event["source_s"] < 11.7 and event["waited_s"] >= 11.9
    assert "source cluster A held them" in event["reason"]
    # the same records, but the task was busy with a commit until just before it read them
    w.strategy.free_ms, w.ledger.landed_ms[("A.T", 0)] = now - 400, now - 12_000  # type: ignore[attr-defined]
    late = [FakeMessage("T", 0, o, ts=int(now - 11_900)) for o in range(4, 7)]
    w.accept(("T", 0), late, now - 300)
    assert w.commit(_no_watermarks, wait=True)
    busy = _metrics(producer, "resumed")[-1]
    assert busy["source_s"] == 0.1 and busy["reason"].endswith("the target acknowledged late")


@pytest.mark.parametrize("after", [Trouble((), (), (3,)), None], ids=["fenced", "nothing"])
def test_a_late_acknowledgement_is_told_by_what_the_target_shows_once_it_came(monkeypatch, after):
    """A leader's broker killed: the metadata shows nothing wrong while its controllers wait
    out its session, and once they fence it, its partitions' new leaders acknowledge at once.
    So the looks while the records waited saw nothing; the one after they came names the
    broker. When that look shows nothing either, the target acknowledged late."""
    monkeypatch.setattr(landing, "SLOW_ACK_S", 0.05)
    monkeypatch.setattr(landing, "RELOOK_S", 0.05)
    monkeypatch.setattr(landing, "min_insync", lambda *_a: {})
    now = time.time() * 1000
    w, producer = _stamped_writer(monkeypatch, now - 30_000)
    w.accept(("T", 0), [FakeMessage("T", 0, 0, ts=int(now))], now)
    assert w.commit(_no_watermarks, wait=True)  # the task's first commit: it started again
    w.ledger.landed_ms[("A.T", 0)] = now - 30_000
    looks: list[bool] = []  # whether the records were acknowledged when the target was looked at

    def look(*_a: object) -> Trouble | None:
        looks.append(producer.acking)
        producer.acking = len(looks) >= 2  # fenced after the second look: acknowledged
        return after if producer.acking and len(looks) > 2 else None

    monkeypatch.setattr(landing, "target_trouble", look)
    producer.acking = False
    late = [FakeMessage("T", 0, o, ts=int(now - 5_000)) for o in range(1, 4)]
    w.accept(("T", 0), late, now - 4_900)  # read at once: not the source's wait
    assert w.commit(_no_watermarks, wait=True)
    assert looks == [False, False, True]
    (event,) = _metrics(producer, "resumed")
    expected = "broker 3 left the cluster (fenced by" if after else "the target acknowledged late"
    assert expected in event["reason"] and event["waited_s"] >= 5
    assert w.trouble is None  # told: the next wait is judged afresh


@pytest.mark.parametrize(
    ("stamp_ago_s", "created_ago_s"),
    [(None, 3600), (0.1, 0.05), (3600, 0.2)],
    ids=["a new flow's backlog", "copied at once", "an idle partition's new record"],
)
def test_records_copied_without_waiting_for_a_fault_are_no_resumed_event(
    monkeypatch, stamp_ago_s, created_ago_s
):
    now = time.time() * 1000
    w, producer = _stamped_writer(
        monkeypatch, None if stamp_ago_s is None else now - stamp_ago_s * 1000
    )
    w.accept(("T", 0), [FakeMessage("T", 0, 0, ts=int(now - created_ago_s * 1000))], 0.0)
    assert w.commit(_no_watermarks, wait=True)
    assert _metrics(producer, "resumed") == [] and _metrics(producer, "batch")


@pytest.mark.parametrize(("behind", "told"), [(True, 0), (False, 1)])
def test_a_partition_left_behind_in_a_backlog_waits_its_turn_untold(monkeypatch, behind, told):
    """A commit while the loop took full batches leaves 97 records of the partition on the
    source; its next records come 5 s later, in their turn: not a fault. At the head, the same
    5 s is one."""
    now = time.time() * 1000
    w, producer = _stamped_writer(monkeypatch, now)
    w.accept(("T", 0), [FakeMessage("T", 0, o, ts=int(now - 60_000)) for o in range(3)], 0.0)
    w.commit_due(behind)
    assert w.commit(lambda _tp: (0, 100), wait=True)
    w.ledger.landed_ms[("A.T", 0)] -= 5000  # its last commit, 5 s ago
    w.accept(("T", 0), [FakeMessage("T", 0, o, ts=int(now - 60_000)) for o in range(3, 6)], 0.0)
    assert w.commit(lambda _tp: (0, 100), wait=True)
    assert len(_metrics(producer, "resumed")) == told


def test_each_ledger_entry_carries_when_its_copy_was_last_complete(monkeypatch):
    """The stamp a restarted copy task measures waits from (``t=<epoch ms>``)."""
    w, producer = _two_partition_writer(monkeypatch)
    before = time.time() * 1000
    w.accept(("T", 0), _records(0, 9), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    stamps = {(tp.topic, tp.partition): tp.metadata for tp in producer.committed[0]}
    moved = float(stamps[("A.T", 0)].removeprefix("t="))
    assert int(before) <= moved <= time.time() * 1000
    assert stamps[("A.T", 1)] is None  # idle and never stamped: nothing is made up


def _hanging_writer(monkeypatch, ledger: FakeLedger, hung: FakeProducer):
    """An exactly-once writer of ``ledger`` whose first producer is ``hung`` (a call of it
    blocks) and whose next one is fresh, with records 5-9 of T[0] accepted; calls are hung
    after 0.2 s. Returns the writer, the fresh producer and the producers not yet made."""
    monkeypatch.setattr(strategies, "CALL_HANG_S", 0.2)
    fresh = FakeProducer()
    made = [hung, fresh]
    renewed = lambda *a, **k: (made.pop(0), 60_000)  # noqa: E731
    monkeypatch.setattr(writer_module, "make_producer", renewed)
    monkeypatch.setattr(strategies, "make_producer", renewed)
    monkeypatch.setattr(ledger_module, "ledger_consumer", lambda *a, **k: ledger)
    ctx = FlowContext.create(parse_config({**PROPS, "mirror.fanout.enabled": "false"}), "A->B")
    w = TargetWriter(ctx, 0, [("T", 0)], until={("T", 0): 2**63 - 1}, options_key="k")
    w.start()
    w.accept(("T", 0), _records(5, 9), 0.0)
    return w, fresh, made


def _renews(w: TargetWriter, blocked) -> None:
    """The commit's hung call gets a new producer (Rewound); then the hung call returns."""
    from mirror_lib.replication.copy.copy_state import Rewound

    try:
        with pytest.raises(Rewound):
            w.commit(_no_watermarks, wait=True)
    finally:
        blocked.set()


def test_a_hung_send_offsets_gets_a_new_producer_that_continues_from_the_ledger(monkeypatch):
    """librdkafka can block in send_offsets_to_transaction for good: after CALL_HANG_S
    the writer takes a new producer (which fences the old one), reads the ledger again and
    asks to be read for from there (Rewound)."""
    import threading

    ledger = FakeLedger({("A.T", 0): 5})
    hung = FakeProducer()
    blocked = threading.Event()
    hung.send_offsets_to_transaction = lambda *a: blocked.wait(30)  # type: ignore[method-assign]
    w, fresh, made = _hanging_writer(monkeypatch, ledger, hung)
    _renews(w, blocked)
    assert w.producer is fresh and not made and w.strategy.renewals == 1
    assert w.parts[("T", 0)].expect == 5 and not w.in_txn  # the ledger's position
    assert "did not return within 0.2s" in (w.trouble or "")
    w.accept(("T", 0), _records(5, 9), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    assert [tp.offset for tp in fresh.committed[0]] == [10]
    assert _metrics(fresh, "batch")[0]["aborted"] == 1  # the fenced transaction is told


@pytest.mark.parametrize("landed", [True, False])
def test_a_hung_commit_gets_a_new_producer_and_the_ledger_says_whether_it_landed(
    monkeypatch, landed
):
    """EndTxn held on a connection to the coordinator's lost broker (one broker of B cut off:
    30 s, until socket.timeout.ms): after CALL_HANG_S the writer renews its producer. The new
    one's init_transactions completes or aborts the commit, and the ledger, read again, says
    which: a commit that landed counts once (no "aborted" told), one that did not is replayed."""
    import threading

    ledger = FakeLedger({("A.T", 0): 5})
    hung = FakeProducer()
    blocked = threading.Event()

    def commit_hangs(_timeout: float = 0) -> None:
        if landed:  # the coordinator wrote the commit before its broker was lost
            ledger.positions[("A.T", 0)] = 10
        blocked.wait(30)

    hung.commit_transaction = commit_hangs  # type: ignore[method-assign]
    w, fresh, _made = _hanging_writer(monkeypatch, ledger, hung)
    _renews(w, blocked)
    assert w.producer is fresh and w.strategy.renewals == 1
    assert "commit_transaction on target cluster B" in (w.trouble or "")
    assert w.parts[("T", 0)].expect == (10 if landed else 5)
    assert w.result.records == (5 if landed else 0)
    w.accept(("T", 0), _records(5, 12), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    assert [tp.offset for tp in fresh.committed[0]] == [13]
    assert _metrics(fresh, "batch")[0]["aborted"] == (0 if landed else 1)
    assert w.result.records == 8


def test_a_renewals_init_transactions_waits_what_acknowledgements_wait(monkeypatch):
    """Two brokers of three cut off: a slot renewed its producer before the controllers had
    fenced them, and the new producer's init_transactions, answered COORDINATOR_NOT_AVAILABLE,
    held the slot for its set-up's 60 s before the outage showed. A renewal waits FLUSH_S."""
    import threading

    ledger = FakeLedger({("A.T", 0): 5})
    hung = FakeProducer()
    blocked = threading.Event()
    hung.send_offsets_to_transaction = lambda *a: blocked.wait(30)  # type: ignore[method-assign]
    w, fresh, _made = _hanging_writer(monkeypatch, ledger, hung)
    waits: list[float] = []

    def renewed(*_a: object, init_timeout_s: float, **_k: object) -> tuple[FakeProducer, int]:
        waits.append(init_timeout_s)
        return fresh, 60_000

    monkeypatch.setattr(strategies, "make_producer", renewed)
    _renews(w, blocked)
    assert w.init_s == 60.0 and waits == [landing.FLUSH_S] == [30.0]


def test_renewals_past_the_limit_end_the_slice(monkeypatch):
    from mirror_lib.errors import HungCallError

    w, _producer = _stamped_writer(monkeypatch, None)
    w.strategy.renewals = strategies.MAX_RENEWALS
    with pytest.raises(HungCallError):
        w.strategy.renew(HungCallError("send_offsets_to_transaction did not return"))


def test_a_machine_too_busy_to_answer_quickly_is_not_taken_for_a_hang(monkeypatch):
    """After a send_offsets that took 0.3 s, one that takes 0.5 s (over CALL_HANG_S)
    is slow, not hung: the threshold is HANG_FACTOR times the slowest lately."""
    monkeypatch.setattr(strategies, "CALL_HANG_S", 0.4)
    w, producer = _stamped_writer(monkeypatch, None)
    delays = [0.3, 0.5]
    original = producer.send_offsets_to_transaction

    def slow(*args):
        time.sleep(delays.pop(0))
        original(*args)

    producer.send_offsets_to_transaction = slow  # type: ignore[method-assign]
    for first in (0, 5):
        w.accept(("T", 0), _records(first, first + 4), 0.0)
        assert w.commit(_no_watermarks, wait=True)
    assert w.strategy.renewals == 0 and w.strategy.send_offsets.slowest_s >= 0.45


@pytest.mark.parametrize("left", [(2,), ()])
def test_a_call_hung_while_a_broker_left_the_target_is_renewed_for_that_cause(monkeypatch, left):
    """A slow send_offsets lately gives the next one HANG_FACTOR times as long; but while a
    broker of the target has left its cluster, librdkafka may be waiting for it as the ledger
    group's coordinator: the call counts as hung once asked (at CALL_HANG_S, or
    AFTER_MEANWHILE_S after the acknowledgements), and the error says why."""
    import threading

    ledger = FakeLedger({("A.T", 0): 5})
    hung = FakeProducer()
    hung.left = left
    blocked = threading.Event()
    hung.send_offsets_to_transaction = lambda *a: blocked.wait(30)  # type: ignore[method-assign]
    w, fresh, _made = _hanging_writer(monkeypatch, ledger, hung)
    w.strategy.send_offsets.took(0.4)  # a slow call lately: hung only after 2.0 s
    started = time.monotonic()
    _renews(w, blocked)
    assert w.producer is fresh and w.strategy.renewals == 1
    if left:
        assert "while broker 2 had left the cluster" in (w.trouble or "")
    else:
        assert time.monotonic() - started >= 2.0 and "left" not in (w.trouble or "")


@pytest.mark.parametrize("hung_left", [(), (2,)], ids=["not yet", "already"])
def test_a_renewal_names_the_broker_that_had_left_once_the_new_producer_took_over(
    monkeypatch, hung_left
):
    """A coordinator's broker killed: the hung call's cause, asked at CALL_HANG_S, sees every
    broker still there (its controllers fence it only when its session ends); the new
    producer's init_transactions waited for that, and then the metadata names it. A cause that
    named it already is not told twice."""
    import threading

    hung = FakeProducer()
    hung.left = hung_left
    blocked = threading.Event()
    hung.commit_transaction = lambda *a: blocked.wait(30)  # type: ignore[method-assign]
    w, fresh, _made = _hanging_writer(monkeypatch, FakeLedger({("A.T", 0): 5}), hung)
    fresh.left = (2,)
    w.strategy.commits.took(0.4)  # hung at 2.0 s, its cause asked at CALL_HANG_S
    _renews(w, blocked)
    assert w.producer is fresh and (w.trouble or "").count("broker 2 had left the cluster") == 1
    if not hung_left:
        assert "; broker 2 had left the cluster, and a new producer took over in" in (
            w.trouble or ""
        )


def test_a_commit_failed_by_a_broker_leaving_the_target_gets_a_new_producer(monkeypatch):
    """The fault matrix's one broker of B cut off: the ledger's TxnOffsetCommit was out to the
    group coordinator on that broker when its controllers fenced it, and librdkafka failed it
    with _DESTROY_BROKER. The slot goes on with a new producer, which finds the coordinator
    anew, instead of failing the query (started again 10 s later)."""
    from mirror_lib.replication.copy.copy_state import Rewound

    text = (
        "Failed to commit offsets to transaction on broker 127.0.0.1:35571/2: Local: Broker "
        "handle destroyed without termination (after 0 ms)"
    )
    gone = confluent_kafka.KafkaError(
        confluent_kafka.KafkaError._DESTROY_BROKER, text, txn_requires_abort=True
    )

    def destroyed(*_a: object) -> None:
        raise confluent_kafka.KafkaException(gone)

    failing = FakeProducer()
    failing.send_offsets_to_transaction = destroyed  # type: ignore[method-assign]
    w, fresh, made = _hanging_writer(monkeypatch, FakeLedger({("A.T", 0): 5}), failing)
    fresh.left = (2,)
    with pytest.raises(Rewound):
        w.commit(_no_watermarks, wait=True)
    assert w.producer is fresh and not made and w.strategy.renewals == 1
    assert w.parts[("T", 0)].expect == 5 and not w.in_txn  # the ledger's position
    assert "Broker handle destroyed" in (w.trouble or "")
    assert "; broker 2 had left the cluster, and a new producer took over in" in (w.trouble or "")
    w.accept(("T", 0), _records(5, 9), 0.0)
    assert w.commit(_no_watermarks, wait=True)
    assert [tp.offset for tp in fresh.committed[0]] == [10]


def _renewable_writer(monkeypatch, looks):
    """An exactly-once writer whose first producer acknowledges nothing and whose next one
    acknowledges everything; ``looks(stuck)`` is what the target's metadata shows at each
    look (``stuck`` is the first producer, to start acknowledging from there)."""
    monkeypatch.setattr(landing, "SLOW_ACK_S", 0.05)
    monkeypatch.setattr(landing, "RELOOK_S", 0.05)
    monkeypatch.setattr(landing, "min_insync", lambda *_a: {})
    stuck, fresh = FakeProducer(), FakeProducer()
    stuck.acking = False
    monkeypatch.setattr(landing, "target_trouble", lambda *_a: looks(stuck))
    made = [stuck, fresh]
    renewed = lambda *a, **k: (made.pop(0), 60_000)  # noqa: E731
    monkeypatch.setattr(writer_module, "make_producer", renewed)
    monkeypatch.setattr(strategies, "make_producer", renewed)
    monkeypatch.setattr(
        ledger_module, "ledger_consumer", lambda *a, **k: FakeLedger({("A.T", 0): 0})
    )
    ctx = FlowContext.create(parse_config({**PROPS, "mirror.fanout.enabled": "false"}), "A->B")
    w = TargetWriter(ctx, 0, [("T", 0)], until={("T", 0): 2**63 - 1}, options_key="k")
    w.start()
    w.accept(("T", 0), _records(0, 4), 0.0)
    return w, fresh


@pytest.mark.parametrize(
    "seen", [None, Trouble((), ("127.0.0.1:2",)), Trouble((), (), (2,))], ids=str
)
def test_records_unacknowledged_on_a_healthy_looking_target_get_a_new_producer(monkeypatch, seen):
    """A partitioned broker holds in-flight requests until socket.timeout.ms (60 s) while the
    controllers have moved its partitions: with every partition led and in sync and nothing
    acknowledged for STUCK_ACK_S, the writer renews its producer instead of waiting. So it does
    when that broker does not answer the metadata request either (one broker of three cut off:
    the slice failed after 30 s and the query restarted, 116 s in the fault matrix)."""
    from mirror_lib.replication.copy.copy_state import Rewound

    monkeypatch.setattr(landing, "STUCK_ACK_S", 0.2)
    monkeypatch.setattr(landing, "MOVED_GRACE_S", 60.0)
    w, fresh = _renewable_writer(monkeypatch, lambda _stuck: seen)
    with pytest.raises(Rewound):
        w.commit(_no_watermarks, wait=True)
    assert w.producer is fresh and "acknowledged none of 5 records" in (w.trouble or "")
    said = "(127.0.0.1:2 did not answer)" in (w.trouble or "")
    assert said == bool(seen and seen.silent)  # one broker of three cut off: renewed, and said
    assert "( did not answer)" not in (w.trouble or "")


def test_a_broker_fenced_under_unacknowledged_records_gets_a_new_producer_at_once(monkeypatch):
    """The metadata shows a broker of the partitions gone from the cluster (fenced) and them
    led and in sync on the others: records still unacknowledged MOVED_GRACE_S later are held on
    a connection to it, and a new producer takes over without waiting for STUCK_ACK_S (one
    broker of B cut off: 10 s of its 16 s in the fault matrix)."""
    from mirror_lib.replication.copy.copy_state import Rewound

    monkeypatch.setattr(landing, "STUCK_ACK_S", 60.0)
    monkeypatch.setattr(landing, "MOVED_GRACE_S", 0.1)
    w, fresh = _renewable_writer(monkeypatch, lambda _stuck: Trouble((), (), (2,)))
    fresh.left = (2,)  # still gone once the new producer took over: told once, not twice
    started = time.monotonic()
    with pytest.raises(Rewound):
        w.commit(_no_watermarks, wait=True)
    assert time.monotonic() - started < 30  # not STUCK_ACK_S
    assert w.producer is fresh and w.strategy.renewals == 1
    assert "broker 2 left the cluster (fenced by its controllers)" in (w.trouble or "")
    assert "held on a connection to the broker that left" in (w.trouble or "")
    assert "had left the cluster" not in (w.trouble or "")


def test_records_waiting_for_a_fenced_follower_are_acknowledged_without_a_new_producer(
    monkeypatch,
):
    """A broker that only followed the partitions is taken out of their in-sync replicas when
    it is fenced, and their leaders then acknowledge: no renewal within MOVED_GRACE_S."""
    monkeypatch.setattr(landing, "STUCK_ACK_S", 60.0)
    monkeypatch.setattr(landing, "MOVED_GRACE_S", 5.0)

    def looks(stuck: FakeProducer) -> Trouble:
        stuck.acking = True  # the leaders acknowledge once the follower is out of the ISR
        return Trouble((), (), (2,))

    w, fresh = _renewable_writer(monkeypatch, looks)
    assert w.commit(_no_watermarks, wait=True)
    assert w.producer is not fresh and w.strategy.renewals == 0


def test_a_target_that_starts_refusing_writes_while_acks_are_late_is_not_renewed(monkeypatch):
    """The first look shows nothing wrong; a later one, once the controllers fenced two lost
    brokers, shows writes refused: a new producer would wait as well, so the writer waits for
    the target and names the cause instead of renewing at STUCK_ACK_S."""
    monkeypatch.setattr(landing, "STUCK_ACK_S", 0.3)
    monkeypatch.setattr(landing, "FLUSH_S", 0.6)
    said = "A.T[0] has 1 in-sync replica, fewer than its min.insync.replicas = 2"
    seen = iter([None])
    w, _fresh = _renewable_writer(monkeypatch, lambda _stuck: next(seen, Trouble((said,))))
    with pytest.raises(BrokerError, match=r"fewer than its min\.insync\.replicas") as caught:
        w.commit(_no_watermarks, wait=True)
    assert caught.value.transient and w.strategy.renewals == 0


def test_a_target_that_refuses_writes_is_waited_for_not_renewed(monkeypatch):
    """Fewer in-sync replicas than min.insync.replicas: a new producer would wait as well, so
    the slice fails after FLUSH_S naming the cause, and the run waits through the outage."""
    monkeypatch.setattr(landing, "SLOW_ACK_S", 0.05)
    monkeypatch.setattr(landing, "STUCK_ACK_S", 0.1)
    monkeypatch.setattr(landing, "FLUSH_S", 0.3)
    monkeypatch.setattr(landing, "min_insync", lambda *_a: {})
    said = "A.T[0] has 1 in-sync replica, fewer than its min.insync.replicas = 2"
    monkeypatch.setattr(landing, "target_trouble", lambda *_a: Trouble((said,)))
    w, producer = _stamped_writer(monkeypatch, None)
    producer.acking = False
    w.accept(("T", 0), _records(0, 4), 0.0)
    with pytest.raises(BrokerError, match=r"fewer than its min\.insync\.replicas") as caught:
        w.commit(_no_watermarks, wait=True)
    assert caught.value.transient and w.strategy.renewals == 0


def test_the_copy_task_writes_its_timing_log_only_when_asked(monkeypatch, tmp_path):
    """bench/latency.py splits a record's latency with it; unset, nothing is written."""
    monkeypatch.delenv(txn_timing.DIR_ENV, raising=False)
    w, _producer = _writer(monkeypatch, fanout=False, flow="A->B")
    w.accept(("T", 0), _records(0, 9), 1_000.0)
    assert w.commit(_no_watermarks, wait=True)
    assert not any(tmp_path.iterdir())

    monkeypatch.setenv(txn_timing.DIR_ENV, str(tmp_path))
    w.accept(("T", 0), _records(10, 14), 2_000.0)
    w.accept(("T", 0), _records(15, 16), 2_005.0)
    assert w.commit(_no_watermarks, wait=True)
    (log,) = tmp_path.glob("txn-*.jsonl")
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["commit_start_ms"] <= line["acked_ms"] <= line["commit_end_ms"]
    (part,) = line["parts"]
    assert part["remote"] == "A.T" and part["n"] == 7
    assert part["runs"] == [[10, 0]] and part["consumed"] == [[2_000.0, 5], [2_005.0, 2]]


FENCED = confluent_kafka.KafkaError(
    confluent_kafka.KafkaError._FENCED, "fenced by a newer instance", fatal=True
)


def _fenced_writer(monkeypatch, open_s: float):
    """A writer whose commit is fenced after its transaction was open ``open_s`` seconds, with
    a transaction.timeout.ms of 5000."""
    ctx = FlowContext.create(parse_config(ONE_TARGET), "A->B")
    producer = FakeProducer()

    def fenced(_timeout: float = 0) -> None:
        raise confluent_kafka.KafkaException(FENCED)

    producer.commit_transaction = fenced  # type: ignore[method-assign]
    monkeypatch.setattr(writer_module, "make_producer", lambda *a, **k: (producer, 5000))
    ledger = FakeLedger({("A.T", 0): 0})
    monkeypatch.setattr(ledger_module, "ledger_consumer", lambda *a, **k: ledger)
    w = TargetWriter(ctx, 0, [("T", 0)], until={}, options_key="k")
    w.start()
    w.accept(("T", 0), [FakeMessage("T", 0, o) for o in range(5)], 0.0)
    w.txn_start -= open_s
    return w


@pytest.mark.parametrize(("open_s", "transient"), [(6.0, True), (0.0, False)])
def test_a_commit_fenced_after_the_timeout_is_transient_sooner_terminal(
    monkeypatch, open_s, transient
):
    w = _fenced_writer(monkeypatch, open_s)
    with pytest.raises(BrokerError) as exc:
        w.commit(lambda _tp: (-1, -1), wait=True)
    assert exc.value.transient is transient
    assert ("transaction.timeout.ms = 5000" in str(exc.value)) is transient


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_a_task_of_shared_slots_keeps_each_partitions_entry_in_its_own_slots_group(
    monkeypatch, delivery
):
    """Whichever task copied a partition, its ledger entry stays in the group of its own slot
    (readers of the ledger never know how a slice ran): one transaction sends each group its
    entries; at least once, each group's consumer commits its own."""
    from mirror_lib.replication.context import stable_slot

    ctx = FlowContext.create(
        parse_config({**ONE_TARGET, "tasks.max": "2", "mirror.delivery": delivery}), "A->B"
    )
    slot_of = {q: stable_slot("T", q, 2) for q in range(4)}
    assert set(slot_of.values()) == {0, 1}
    ledgers = {
        s: FakeLedger({("A.T", q): 10 * q for q in range(4) if slot_of[q] == s}) for s in (0, 1)
    }
    producer = FakeProducer()
    monkeypatch.setattr(writer_module, "make_producer", lambda *a, **k: (producer, 60_000))
    monkeypatch.setattr(ledger_module, "ledger_consumer", lambda c, slot, **k: ledgers[slot])
    w = TargetWriter(
        ctx, 0, [("T", q) for q in range(4)], until={}, options_key="k", shared=[1], slots=2
    )
    w.start()
    assert {tp: part.expect for tp, part in w.parts.items()} == {("T", q): 10 * q for q in range(4)}
    for q in range(4):
        w.accept(("T", q), [FakeMessage("T", q, o) for o in range(10 * q, 10 * q + 5)], 0.0)
    assert w.commit(_no_watermarks, wait=True)
    if delivery == "exactly_once":
        sent = {ledgers_slot: offsets for group, offsets in producer.sent
                for ledgers_slot, ledger in ledgers.items() if group is ledger}  # fmt: skip
        written = {s: {tp.partition: tp.offset for tp in sent[s]} for s in sent}
    else:
        written = {s: {tp.partition: tp.offset for tp in ledger.commits[-1]}
                   for s, ledger in ledgers.items()}  # fmt: skip
    assert written == {s: {q: 10 * q + 5 for q in range(4) if slot_of[q] == s} for s in (0, 1)}


def test_a_slices_result_counts_in_every_targets_share():
    """The query's row of a fan-out slice: every target's records, bytes, transactions and the
    records a target without transactions holds twice."""
    total = CopyResult(3)
    total.add(CopyResult(3, records=5, bytes=50, transactions=2, unreported=1))
    total.add(CopyResult(3, records=1, bytes=10, transactions=1))
    assert (total.records, total.bytes, total.transactions, total.unreported) == (6, 60, 3, 1)
