"""A copy task's source reader: the prefetching consumer, and the paced one it swaps to at the
head of a partition (``mirror.fetch.pace.ms``)."""

from __future__ import annotations

from mirror_lib.config.parse import parse_config
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy import source_reader
from mirror_lib.replication.copy.source_reader import Reader
from tests.helpers.fake_kafka import FakeConsumer
from tests.helpers.fake_metadata import FakeCluster, FakeMetaProducer, FakePartition, FakeTopic
from tests.unit.replication.copy.test_writer import PROPS, _writer


def test_a_reader_at_the_head_paces_its_fetches_and_stops_when_behind(monkeypatch):
    """With mirror.fetch.pace.ms (for a broker whose fetch cost grows with the partition), a
    reader that stays near the high watermark swaps to a paced consumer at the writers'
    positions, and back to the prefetching one when records pile up; without it, never."""
    made: list[FakeConsumer] = []

    def consumer(_ctx, *, paced=False):
        made.append(FakeConsumer(paced=paced))
        return made[-1]

    monkeypatch.setattr(source_reader, "make_consumer", consumer)
    unpaced, _producer = _writer(monkeypatch, start=100, fanout=False)
    reader = Reader(unpaced.ctx, [unpaced])
    reader.consumer.high = {("T", 0): 150}  # 50 records behind: at the head
    t0 = reader.next_check
    assert not any(reader.repace(t0 + s) for s in (0, 1.1, 2.2, 3.3, 10))
    assert len(made) == 1
    w, _producer = _writer(
        monkeypatch, start=100, fanout=False, props={"mirror.fetch.pace.ms": "50"}
    )
    reader = Reader(w.ctx, [w])
    first = reader.consumer
    first.high = {("T", 0): 150}
    t0 = reader.next_check
    assert not reader.repace(t0)  # at the head, but not yet for HEAD_CALM_S
    assert not reader.repace(t0 + 0.5)  # not yet time to look again
    assert reader.repace(t0 + source_reader.HEAD_CALM_S + 1)
    paced = reader.consumer
    assert paced.paced and first.closed and paced.assigned == [("T", 0, 100)]
    paced.high = {("T", 0): 100 + source_reader.HEAD_LAG_RECORDS}
    assert reader.repace(t0 + 10)
    assert not reader.consumer.paced and paced.closed and len(made) == 4


def test_the_paced_consumer_waits_mirror_fetch_pace_ms(monkeypatch):
    confs: list[dict] = []
    monkeypatch.setattr(source_reader, "Consumer", lambda conf: confs.append(conf))
    ctx = FlowContext.create(parse_config({**PROPS, "mirror.fetch.pace.ms": "40"}), "A->C")
    source_reader.make_consumer(ctx)
    source_reader.make_consumer(ctx, paced=True)
    prefetching, paced = confs
    assert (prefetching["queued.min.messages"], prefetching["fetch.queue.backoff.ms"]) == (
        20000,
        10,
    )
    assert (paced["queued.min.messages"], paced["fetch.queue.backoff.ms"]) == (1, 40)


def test_quiet_partitions_are_asked_once_a_second(monkeypatch):
    """A fetch the broker holds for ``fetch.wait.max.ms`` lists every partition: 1,000 quiet
    ones kept the source broker three times as busy at 100 ms as at 500, and busier at 500 than
    at 1,000. A read to the end and a paced head still wait 100 ms; the flow's own setting wins
    over each."""
    confs: list[dict] = []
    monkeypatch.setattr(source_reader, "Consumer", lambda conf: confs.append(conf))
    ctx = FlowContext.create(parse_config({**PROPS, "mirror.fetch.pace.ms": "40"}), "A->C")
    source_reader.make_consumer(ctx)
    source_reader.make_consumer(ctx, paced=True)
    source_reader.make_consumer(ctx, to_end=True)
    mine = {**PROPS, "A->C.consumer.fetch.max.wait.ms": "250"}
    own = FlowContext.create(parse_config(mine), "A->C")
    source_reader.make_consumer(own)
    source_reader.make_consumer(own, to_end=True)
    assert [int(c["fetch.wait.max.ms"]) for c in confs] == [1000, 100, 100, 250, 250]


def test_a_reader_tells_the_writers_it_feeds_which_brokers_left_the_source(monkeypatch):
    """A wait the source held names the broker that left its cluster, as the reader's consumer
    of the moment (a paced swap replaces it) sees the partitions that waited. One answer serves
    LEFT_REUSE_S: waits told at every commit do not ask the source at each."""
    monkeypatch.setattr(source_reader, "make_consumer", lambda _ctx, *, paced=False: FakeConsumer())
    clock = [100.0]
    monkeypatch.setattr(source_reader.time, "monotonic", lambda: clock[0])
    w, _producer = _writer(monkeypatch, start=100, fanout=False)
    assert w.source_lost([("T", 0)]) is None  # no reader feeds it yet
    reader = Reader(w.ctx, [w])
    held = FakeTopic({0: FakePartition(1, [1], replicas=[1, 2]), 1: FakePartition(3, [3], [3])})
    asked: list[float] = []

    class Counted(FakeMetaProducer):
        def list_topics(self, timeout: float = 0) -> FakeCluster:
            asked.append(clock[0])
            return super().list_topics(timeout)

    reader.consumer = Counted(FakeCluster({"T": held}, live=(1, 3)))
    assert w.source_lost([("T", 0)]) == "broker 2 had left the cluster"
    assert w.source_lost([("T", 1)]) is None
    clock[0] += source_reader.LEFT_REUSE_S - 0.1
    reader.consumer = Counted(FakeCluster({"T": held}, live=(1, 2, 3)))  # broker 2 is back
    assert w.source_lost([("T", 0)]) == "broker 2 had left the cluster"  # the answer reused
    clock[0] += 0.1
    assert w.source_lost([("T", 0)]) is None
    assert asked == [100.0, 100.0 + source_reader.LEFT_REUSE_S]
