"""The slot producer's settings. Its batch.size against the remote topics' max.message.bytes:
Kafka refuses a batch above it and librdkafka does not split one, so a larger batch fails the
transaction. Its requests in flight and linger: ours, unless the user sets them."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.kafka.admin_ops import broker_error
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy import target_producer
from tests.helpers.fake_admin import RecordingAdminOps

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
