"""The slot producer's settings. Its batch.size against the remote topics' max.message.bytes:
Kafka refuses a batch above it and librdkafka does not split one, so a larger batch fails the
transaction. Its requests in flight and linger: ours, unless the user sets them."""

from __future__ import annotations

import logging
import threading
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError

from mirror_lib.config.parse import parse_config
from mirror_lib.kafka import admin as kafka_admin
from mirror_lib.kafka.admin_ops import broker_error
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy import target_producer
from mirror_lib.replication.copy.target_producer import commit_error, record_error, timed_out_error
from tests.helpers.fake_admin import RecordingAdminOps
from tests.helpers.fake_kafka import FakeProducer
from tests.helpers.fake_metadata import (
    FakeCluster,
    FakeMetaProducer,
    FakePartition,
    FakeTopic,
    topics_of,
)

PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:1",
    "B.bootstrap.servers": "b:1",
    "A->B.enabled": "true",
    "mirror.delivery": "at_least_once",  # no transactional id: nothing connects
}


def _producer_conf(monkeypatch, admin: RecordingAdminOps, **props: str) -> dict[str, Any]:
    ctx = FlowContext.create(parse_config({**PROPS, **props}), "A->B")
    monkeypatch.setattr(FlowContext, "admin_ops", lambda self, side, timeout_s=None: admin)
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(target_producer, "Producer", lambda conf: made.append(conf))
    target_producer.make_producer(ctx, 0, remote_topics={"A.small", "A.large"})
    return made[0]


def _target() -> RecordingAdminOps:
    admin = RecordingAdminOps()
    admin.add_topic("A.small", 1, {"max.message.bytes": "20000"})
    admin.add_topic("A.large", 1, {"max.message.bytes": "8000000"})
    return admin


def test_batches_stay_below_the_smallest_limit_of_the_slots_topics(monkeypatch):
    conf = _producer_conf(monkeypatch, _target())
    assert conf["batch.size"] == 20000 - target_producer.FRAMING


def test_topics_that_accept_our_batches_keep_the_default(monkeypatch):
    admin = RecordingAdminOps()
    admin.add_topic("A.small", 1, {"max.message.bytes": "1048588"})  # Kafka's default
    conf = _producer_conf(monkeypatch, admin)
    assert conf["batch.size"] == target_producer.BATCH_SIZE


def test_a_users_batch_size_is_lowered_with_a_warning(monkeypatch, caplog):
    with caplog.at_level(logging.WARNING):
        conf = _producer_conf(monkeypatch, _target(), **{"B.producer.batch.size": "500000"})
    assert conf["batch.size"] == 20000 - target_producer.FRAMING
    assert "batch.size 500000 is lowered to 19488" in caplog.text and "A.small" in caplog.text


def test_the_lowering_is_said_once_not_at_every_slice(monkeypatch, caplog):
    props = {"B.producer.batch.size": "600000"}
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            conf = _producer_conf(monkeypatch, _target(), **props)
    assert conf["batch.size"] == 20000 - target_producer.FRAMING
    assert caplog.text.count("batch.size 600000 is lowered") == 1


def test_a_users_smaller_batch_size_is_kept(monkeypatch):
    conf = _producer_conf(monkeypatch, _target(), **{"B.producer.batch.size": "4096"})
    assert int(conf["batch.size"]) == 4096


def test_configs_that_cannot_be_read_leave_the_batch_size_with_a_warning(monkeypatch, caplog):
    admin = _target()
    admin.failures["describe_topic_configs"] = broker_error("denied", "TOPIC_AUTHORIZATION_FAILED")
    with caplog.at_level(logging.WARNING):
        conf = _producer_conf(monkeypatch, admin)
    assert conf["batch.size"] == target_producer.BATCH_SIZE
    assert "not checked against max.message.bytes" in caplog.text


@pytest.mark.parametrize("value", ["", None, "abc"])
def test_an_unreadable_limit_is_no_limit(monkeypatch, value):
    admin = RecordingAdminOps()
    admin.add_topic("A.small", 1, {"max.message.bytes": value})
    assert _producer_conf(monkeypatch, admin)["batch.size"] == target_producer.BATCH_SIZE


# (the default's key, its value, the keys a user may set it by, a value a user sets): one request
# in flight, as Kafka Connect's producers, so that records wait for the answer in one batch
# instead of many small requests; with one request in flight records gather while it is out,
# so a longer linger only delays each batch's first record (docs/how-it-works.md#client-threads)
USER_WINS = [
    ("max.in.flight.requests.per.connection", 1, ("max.in.flight",), "3"),
    ("linger.ms", 1, ("queue.buffering.max.ms",), "5"),
]


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
@pytest.mark.parametrize(("key", "default", "aliases", "value"), USER_WINS)
def test_a_producer_default_unless_the_user_sets_it(
    monkeypatch, delivery, key, default, aliases, value
):
    admin = _target()
    monkeypatch.setattr(target_producer, "bounded", lambda *a, **k: None)  # init_transactions
    assert _producer_conf(monkeypatch, admin, **{"mirror.delivery": delivery})[key] == default
    for name in (key, *aliases):
        conf = _producer_conf(
            monkeypatch, admin, **{"mirror.delivery": delivery, f"B.producer.{name}": value}
        )
        assert conf[name] == value
        assert list(conf).index(name) >= list(conf).index(key)


EXACTLY_ONCE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:1",
    "B.bootstrap.servers": "b:1",
    "A->B.enabled": "true",
}

FENCED = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)


@pytest.mark.parametrize(
    "code", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._TRANSPORT]
)
def test_a_topic_deleted_on_the_target_is_retried_so_the_planner_creates_it_again(code):
    """The metrics topic deleted by hand stopped the run for good, although a restarted
    query's planner creates it again."""
    assert commit_error(KafkaError(code), [], "B").transient
    assert record_error(KafkaError(code), "T[0] offset 5", "B").transient  # type: ignore[union-attr]


def test_a_commit_cut_short_by_a_broker_leaving_the_cluster_is_retried():
    """The fault matrix's one broker of B cut off: the ledger's TxnOffsetCommit was out to the
    group coordinator on that broker when its controllers fenced it, librdkafka destroyed the
    broker's handle, and the abortable error ended the run for good."""
    text = (
        "Failed to commit offsets to transaction on broker 127.0.0.1:34409/3: Local: Broker "
        "handle destroyed without termination (after 0 ms)"
    )
    err = KafkaError(KafkaError._DESTROY_BROKER, text, txn_requires_abort=True)
    error = commit_error(err, [], "target cluster B")
    assert error.transient and "Broker handle destroyed" in str(error)


@pytest.mark.parametrize(
    "code", [KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.INVALID_PRODUCER_EPOCH]
)
def test_refused_or_fenced_is_not_retried(code):
    assert not commit_error(KafkaError(code), [], "B").transient


def test_fenced_after_the_transaction_timeout_is_retried_and_says_why():
    """Kafka aborts a transaction open past the producer's transaction.timeout.ms and bumps its
    epoch; librdkafka reports that as fenced. Nothing of it is visible, so the run retries."""
    error = timed_out_error(FENCED, 9.2, 5000, "target cluster B", "B.producer.transaction...")
    assert error is not None and error.transient
    assert "open for 9.2 s, longer than the producer's transaction.timeout.ms = 5000" in str(error)
    assert "B.producer.transaction..." in str(error)


@pytest.mark.parametrize(
    ("err", "open_s"),
    [(FENCED, 4.9), (KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), 9.0)],
    ids=["fenced-sooner", "not-fenced"],
)
def test_fenced_sooner_or_another_error_is_not_a_timeout(err, open_s):
    """Fenced within the timeout: another instance of the slot runs (terminal, as before)."""
    assert timed_out_error(err, open_s, 5000, "B", "B.producer.transaction.timeout.ms") is None


def test_the_producer_reports_the_users_transaction_timeout(monkeypatch):
    """``B.producer.transaction.timeout.ms`` reaches the producer and the timeout check."""
    made = []

    def producer(conf):
        made.append(conf)
        return FakeProducer()

    monkeypatch.setattr(target_producer, "Producer", producer)
    monkeypatch.setattr(target_producer, "batch_limit", lambda *a: None)
    for extra, want in (({}, 60000), ({"B.producer.transaction.timeout.ms": "5000"}, 5000)):
        ctx = FlowContext.create(parse_config({**EXACTLY_ONCE, **extra}), "A->B")
        _producer, timeout_ms = target_producer.make_producer(ctx, 0)
        assert timeout_ms == want
    assert "transaction.timeout.ms" not in made[0]
    assert made[1]["transaction.timeout.ms"] == "5000"


def test_slow_acknowledgements_are_explained_from_the_targets_metadata():
    from mirror_lib.replication.copy.target_producer import target_trouble

    meta = FakeCluster(topics_of(**{"A.T": {0: (1, [1, 2, 3]), 1: (1, [1]), 2: (-1, [])}}))
    written = [("A.T", 0), ("A.T", 1), ("A.T", 2)]
    ctx = FlowContext.create(
        parse_config({**EXACTLY_ONCE, "B.bootstrap.servers": "127.0.0.1:9"}), "A->B"
    )
    found = target_trouble(ctx, FakeMetaProducer(meta), written, {"A.T": 2})
    assert found is not None and found.refuses
    text = str(found)
    assert "A.T[1] has 1 in-sync replica, fewer than its min.insync.replicas = 2" in text
    assert "NOT_ENOUGH_REPLICAS" in text and "A.T[2] has no leader" in text
    assert "A.T[0]" not in text
    assert target_trouble(ctx, FakeMetaProducer(meta), [("A.T", 0)], {"A.T": 2}) is None
    # the producer asked a broker that does not answer: each bootstrap address is asked itself
    silent = target_trouble(ctx, FakeMetaProducer(None), written, {})
    assert silent is not None and silent.refuses
    assert str(silent).startswith("no broker of target cluster B")


def test_a_broker_gone_from_the_cluster_under_the_written_partitions_is_named():
    """One broker of three fenced: the partitions it held are led and in sync on the others
    (``moved``), which tells a connection held to it from a target that refuses writes."""
    from mirror_lib.replication.copy.target_producer import target_trouble

    topics = {
        "A.T": FakeTopic({0: FakePartition(1, [1, 3]), 1: FakePartition(3, [3, 1])}),
        "A.U": FakeTopic({0: FakePartition(1, [1, 2], replicas=[1, 2])}),
    }
    meta = FakeCluster(topics, live=(1, 3))
    ctx = FlowContext.create(
        parse_config({**EXACTLY_ONCE, "B.bootstrap.servers": "127.0.0.1:9"}), "A->B"
    )
    found = target_trouble(ctx, FakeMetaProducer(meta), [("A.T", 0), ("A.T", 1)], {"A.T": 2})
    assert found is not None and found.lost == (2,) and found.moved and not found.refuses
    assert str(found) == "broker 2 left the cluster (fenced by its controllers)"
    refused = target_trouble(ctx, FakeMetaProducer(meta), [("A.T", 0)], {"A.T": 3})
    assert refused is not None and refused.refuses and not refused.moved
    # every broker of the written partitions is live: nothing to say
    assert target_trouble(ctx, FakeMetaProducer(FakeCluster(topics)), [("A.T", 0)], {}) is None


def test_a_later_look_does_not_ask_an_address_that_was_silent_before(monkeypatch):
    """A client for a broker that does not answer is slow to go (its connection is held): a
    look after the first asks only the other addresses, and still names the silent one."""
    ctx = FlowContext.create(
        parse_config({**EXACTLY_ONCE, "B.bootstrap.servers": "a:1,b:2,c:3"}), "A->B"
    )
    asked: list[str] = []
    meta = FakeCluster({"A.T": FakeTopic({0: FakePartition(2, [2, 3])})}, live=(2, 3))

    class Admin:
        def __init__(self, conf: dict) -> None:
            self.address = conf["bootstrap.servers"]
            asked.append(self.address)

        def list_topics(self, timeout: float = 0) -> FakeCluster:
            if self.address == "a:1":
                raise confluent_kafka.KafkaException(
                    confluent_kafka.KafkaError(confluent_kafka.KafkaError._TIMED_OUT)
                )
            return meta

    monkeypatch.setattr(kafka_admin, "admin_client", Admin)
    first = target_producer.target_trouble(ctx, FakeMetaProducer(None), [("A.T", 0)], {})
    assert first is not None and first.silent == ("a:1",) and sorted(asked) == ["a:1", "b:2", "c:3"]
    assert first.lost == (1,) and first.moved  # broker 1 holds a replica and left
    asked.clear()
    again = target_producer.target_trouble(ctx, FakeMetaProducer(None), [("A.T", 0)], {}, ("a:1",))
    assert again == first and sorted(asked) == ["b:2", "c:3"]


class _FencingProducer(FakeProducer):
    """A producer whose ``init_transactions`` waits until every slot's producer called it, as
    each waits on a target whose coordinators abort what the slots left open."""

    def __init__(self, conf: dict[str, Any], gate: threading.Barrier, refused: str) -> None:
        super().__init__()
        self.conf, self.gate, self.refused = conf, gate, refused

    def init_transactions(self, timeout: float) -> None:
        self.gate.wait()
        if self.conf["transactional.id"] == self.refused:
            raise confluent_kafka.KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out"))


def test_slots_are_fenced_at_once_and_those_not_fenced_are_named(monkeypatch):
    """The planner fences every slot before a query's first slice. One after another, a
    restart through an outage fenced its four slots in turn once the target took writes
    again; now they wait for the target together (a fence waiting for the others' is a
    broken barrier here). A slot that was not fenced is returned with why, and the others are
    fenced all the same."""
    ctx = FlowContext.create(parse_config(EXACTLY_ONCE), "A->B")
    slots = range(4)
    gate = threading.Barrier(len(slots), timeout=10)
    refused = ctx.transactional_id(2)
    made: list[str] = []

    def producer(conf: dict[str, Any]) -> _FencingProducer:
        made.append(conf["transactional.id"])
        return _FencingProducer(conf, gate, refused)

    monkeypatch.setattr(target_producer, "Producer", producer)
    monkeypatch.setattr(target_producer, "batch_limit", lambda *a: None)
    failed = target_producer.fence_slots(ctx, slots, timeout_s=5)
    assert sorted(made) == sorted(ctx.transactional_id(s) for s in slots)
    assert list(failed) == [2]
    assert failed[2].transient and f"fencing {refused} on target cluster B" in str(failed[2])
    assert target_producer.fence_slots(ctx, [], timeout_s=5) == {}


def test_once_a_fence_failed_the_slots_not_begun_are_not_tried(monkeypatch):
    """A target that is out fails every fence after its timeout: the slots queued behind the
    threads are not tried, so a stop or a plan waits one fence's time, as slot by slot."""
    ctx = FlowContext.create(parse_config(EXACTLY_ONCE), "A->B")
    made: list[str] = []

    class Slow(FakeProducer):
        def __init__(self, conf: dict[str, Any]) -> None:
            super().__init__()
            self.txn_id = conf["transactional.id"]
            made.append(self.txn_id)

        def init_transactions(self, timeout: float) -> None:
            if self.txn_id == ctx.transactional_id(0):
                raise confluent_kafka.KafkaException(KafkaError(KafkaError._TIMED_OUT, "out"))
            threading.Event().wait(2.0)  # the other fences still running meanwhile

    monkeypatch.setattr(target_producer, "Producer", Slow)
    monkeypatch.setattr(target_producer, "batch_limit", lambda *a: None)
    monkeypatch.setattr(target_producer, "FENCE_THREADS", 2)
    failed = target_producer.fence_slots(ctx, range(6), timeout_s=5)
    assert len(made) < 6, made
    assert 1 not in failed and {0, 3, 4, 5} <= set(failed)
    assert all(failed[s] is failed[0] for s in failed)
    assert list(failed) == sorted(failed)
