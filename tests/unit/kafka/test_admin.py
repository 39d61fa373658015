"""Unit tests of the admin layer: error mapping, KafkaAdminOps over a stub client, the fake."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import admin as ka

from mirror_lib.errors import BrokerError, UnsupportedOperationError
from mirror_lib.kafka import admin as kafka_admin
from mirror_lib.kafka.admin import (
    KafkaAdminOps,
    first_answer,
    first_few,
    left_cluster,
    lost_brokers,
    map_kafka_error,
    min_insync,
    replica_trouble,
    whole_numbers,
)
from mirror_lib.kafka.admin_ops import (
    AclBinding,
    ConfigEntry,
    ConfigOp,
    CreateOutcome,
    NewTopicSpec,
    SecurityDisabledError,
    broker_error,
    kafka_error_name,
    unknown_topic_config,
)
from tests.helpers.fake_admin import RecordingAdminOps
from tests.helpers.fake_metadata import (
    FakeCluster,
    FakeMetaProducer,
    FakePartition,
    FakeTopic,
    topics_of,
)

# --- error mapping -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "cls", "transient"),
    [
        (KafkaError.UNSUPPORTED_VERSION, UnsupportedOperationError, False),
        (KafkaError.INVALID_REQUEST, UnsupportedOperationError, False),
        (KafkaError._UNSUPPORTED_FEATURE, UnsupportedOperationError, False),
        (KafkaError.SECURITY_DISABLED, SecurityDisabledError, False),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, BrokerError, False),
        (KafkaError.CLUSTER_AUTHORIZATION_FAILED, BrokerError, False),
        (KafkaError._TIMED_OUT, BrokerError, True),
        (KafkaError.REQUEST_TIMED_OUT, BrokerError, True),
        (KafkaError._TRANSPORT, BrokerError, True),
        (KafkaError.INVALID_CONFIG, BrokerError, False),
        # what a moving leader answers for a while (two brokers of three cut off)
        (KafkaError.OFFSET_NOT_AVAILABLE, BrokerError, True),
        (KafkaError.FENCED_LEADER_EPOCH, BrokerError, True),
        (KafkaError.NOT_ENOUGH_REPLICAS, BrokerError, True),
        (KafkaError.NOT_COORDINATOR, BrokerError, True),
    ],
)
def test_map_kafka_error(code: int, cls: type, transient: bool) -> None:
    err = map_kafka_error(KafkaError(code), "do thing")
    assert type(err) is cls
    assert err.transient is transient
    assert kafka_error_name(err) == KafkaError(code).name()
    assert str(err).startswith("do thing: ")


def test_authorization_is_not_unsupported() -> None:
    err = map_kafka_error(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), "x")
    assert not isinstance(err, UnsupportedOperationError)


def test_config_op_validation() -> None:
    assert ConfigOp("a", None, "DELETE").op == "DELETE"
    with pytest.raises(ValueError):
        ConfigOp("a", None, "SET")
    with pytest.raises(ValueError):
        ConfigOp("a", "1", "APPEND")  # type: ignore[arg-type]


# --- KafkaAdminOps over a stub AdminClient -----------------------------------------------


def _done(value: Any = None, error: int | None = None) -> concurrent.futures.Future:
    f: concurrent.futures.Future = concurrent.futures.Future()
    if error is None:
        f.set_result(value)
    else:
        f.set_exception(KafkaException(KafkaError(error)))
    return f


class StubAdmin:
    """Answers AdminClient calls from canned values and records what was asked."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.asked.append(name)
            answer = self.answers[name]
            return answer(*args) if callable(answer) else answer

        return call


def _ops(stub: StubAdmin, **kwargs: Any) -> KafkaAdminOps:
    ops = KafkaAdminOps({"bootstrap.servers": "127.0.0.1:1"}, timeout_s=0.1, **kwargs)
    ops._admin = stub  # type: ignore[assignment]
    return ops


def test_future_timeout_is_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    never: concurrent.futures.Future = concurrent.futures.Future()
    ops = _ops(StubAdmin(create_partitions={"t": never}))
    monkeypatch.setattr(ops, "timeout_s", -4.9)  # result(timeout=0.1)
    with pytest.raises(BrokerError) as info:
        ops.create_partitions("t", 3)
    assert info.value.transient is True
    assert kafka_error_name(info.value) == "_TIMED_OUT"


def test_create_partitions_unsupported_maps() -> None:
    ops = _ops(StubAdmin(create_partitions={"t": _done(error=KafkaError._UNSUPPORTED_FEATURE)}))
    with pytest.raises(UnsupportedOperationError):
        ops.create_partitions("t", 3)


def test_create_topics_outcomes() -> None:
    futures = {
        "new": _done(),
        "old": _done(error=KafkaError.TOPIC_ALREADY_EXISTS),
        "bad": _done(error=KafkaError.INVALID_CONFIG),
    }
    ops = _ops(StubAdmin(create_topics=futures))
    out = ops.create_topics([NewTopicSpec(n, 1) for n in futures])
    assert {n: o.status for n, o in out.items()} == {
        "new": "created",
        "old": "exists",
        "bad": "failed",
    }
    assert kafka_error_name(out["bad"].error) == "INVALID_CONFIG"  # type: ignore[arg-type]
    assert ops.create_topics([]) == {}


def test_a_config_of_another_kafka_release_is_told_from_other_invalid_configs() -> None:
    """Apache Kafka 2.8 and 4.4 word it alike, in CreateTopics and IncrementalAlterConfigs."""
    unknown = KafkaError(
        KafkaError.INVALID_CONFIG, "Unknown topic config name: message.format.version"
    )
    invalid = KafkaError(KafkaError.INVALID_CONFIG, "Invalid value -7 for configuration x.y")
    futures = {"old": _done(), "new": _done(), "bad": _done()}
    futures["new"] = concurrent.futures.Future()
    futures["new"].set_exception(KafkaException(unknown))
    futures["bad"] = concurrent.futures.Future()
    futures["bad"].set_exception(KafkaException(invalid))
    out = _ops(StubAdmin(create_topics=futures)).create_topics(
        [NewTopicSpec(n, 1) for n in futures]
    )
    assert unknown_topic_config(out["new"].error) == "message.format.version"
    assert unknown_topic_config(out["bad"].error) is None
    assert unknown_topic_config(out["old"].error) is None
    other = broker_error("x: Unknown topic config name: y", "TOPIC_AUTHORIZATION_FAILED")
    assert unknown_topic_config(other) is None


def _native(name: str, value: str, source: ka.ConfigSource, default: bool) -> ka.ConfigEntry:
    return ka.ConfigEntry(name, value, source=source, is_default=default)


def _describe_answer(per_topic: dict[str, dict[str, ka.ConfigEntry]]) -> Any:
    def answer(resources: list[ka.ConfigResource]) -> dict:
        return {r: _done(per_topic[r.name]) for r in resources}

    return answer


def test_describe_configs_trusts_a_full_answer() -> None:
    full = {
        "segment.bytes": _native(
            "segment.bytes", "1073741824", ka.ConfigSource.DEFAULT_CONFIG, True
        ),
        "retention.bytes": _native(
            "retention.bytes", "5", ka.ConfigSource.DYNAMIC_TOPIC_CONFIG, False
        ),
    }
    ops = _ops(StubAdmin(describe_configs=_describe_answer({"t": full})))
    entries = ops.describe_topic_configs(["t"])["t"]
    assert entries["segment.bytes"] == ConfigEntry(
        "segment.bytes", "1073741824", True, False, False, "DEFAULT_CONFIG"
    )
    assert entries["retention.bytes"].source == "DYNAMIC_TOPIC_CONFIG"
    assert set(entries) == {"segment.bytes", "retention.bytes"}


def test_describe_configs_explicit_only_broker_is_normalized() -> None:
    # tansu lists only explicitly set configs and labels them DEFAULT_CONFIG.
    explicit = {
        "retention.bytes": _native("retention.bytes", "1000", ka.ConfigSource.DEFAULT_CONFIG, True)
    }
    stub = StubAdmin(
        describe_configs=_describe_answer({"t": explicit}),
        list_topics=type(
            "MD", (), {"topics": {"t": type("T", (), {"partitions": {0: 0}, "error": None})()}}
        )(),
    )
    entries = _ops(stub).describe_topic_configs(["t"])["t"]
    assert entries["retention.bytes"] == ConfigEntry("retention.bytes", "1000")
    assert entries["segment.bytes"].source == "DEFAULT_CONFIG"
    assert entries["cleanup.policy"].value == "delete"


def test_describe_configs_skips_unknown_topics() -> None:
    answer = {"gone": _done(error=KafkaError.UNKNOWN_TOPIC_OR_PART)}
    stub = StubAdmin(describe_configs=lambda resources: {r: answer[r.name] for r in resources})
    assert _ops(stub, explicit_only_configs=False).describe_topic_configs(["gone"]) == {}


def test_incremental_alter_configs_builds_ops() -> None:
    seen: list[ka.ConfigResource] = []

    def answer(resources: list[ka.ConfigResource]) -> dict:
        seen.extend(resources)
        return {r: _done() for r in resources}

    ops = _ops(StubAdmin(incremental_alter_configs=answer))
    ops.incremental_alter_configs("t", [ConfigOp("a", "1"), ConfigOp("b", None, "DELETE")])
    ops.incremental_alter_configs("t", [])  # no request for no ops
    assert len(seen) == 1
    kinds = {c.name: c.incremental_operation for c in seen[0].incremental_configs}
    assert kinds == {"a": ka.AlterConfigOpType.SET, "b": ka.AlterConfigOpType.DELETE}


def test_acl_apis_disabled_never_reach_the_client() -> None:
    stub = StubAdmin()  # any call would raise KeyError
    ops = _ops(stub, acl_apis=False)
    with pytest.raises(UnsupportedOperationError):
        ops.describe_topic_acls()
    with pytest.raises(UnsupportedOperationError):
        ops.create_acls([AclBinding("t", "LITERAL", "User:a", "*", "READ", "ALLOW")])
    assert stub.asked == []


def test_acl_apis_auto_detect_tansu() -> None:
    node = type("Node", (), {"id": 111})()
    desc = type("D", (), {"cluster_id": "tansu_cluster", "controller": node, "nodes": [node]})()
    stub = StubAdmin(describe_cluster=_done(desc))
    ops = _ops(stub)
    assert ops.supports_acl_apis() is False
    with pytest.raises(UnsupportedOperationError):
        ops.describe_topic_acls()
    assert stub.asked == ["describe_cluster"]
    assert ops.describe_cluster().broker_ids == (111,)


def test_describe_acls_security_disabled() -> None:
    stub = StubAdmin(describe_acls=_done(error=KafkaError.SECURITY_DISABLED))
    with pytest.raises(SecurityDisabledError):
        _ops(stub, acl_apis=True).describe_topic_acls()


def test_acl_round_trip_through_native_types() -> None:
    mine = AclBinding("t", "LITERAL", "User:a", "*", "DESCRIBE", "ALLOW")
    native = ka.AclBinding(
        ka.ResourceType.TOPIC, "t", ka.ResourcePatternType.LITERAL, "User:a", "*",
        ka.AclOperation.DESCRIBE, ka.AclPermissionType.ALLOW,
    )  # fmt: skip
    created: list[ka.AclBinding] = []

    def answer(bindings: list[ka.AclBinding]) -> dict:
        created.extend(bindings)
        return {b: _done() for b in bindings}

    stub = StubAdmin(describe_acls=_done([native]), create_acls=answer)
    ops = _ops(stub, acl_apis=True)
    assert ops.describe_topic_acls() == [mine]
    assert ops.create_acls([mine, mine]) == {mine: None}
    assert created == [native]


# --- create_compacted_topic and the fake ---------------------------------------------------


def test_create_compacted_topic_is_idempotent() -> None:
    fake = RecordingAdminOps()
    assert fake.create_compacted_topic("heartbeats").status == "created"
    assert fake.create_compacted_topic("heartbeats").status == "exists"
    spec = fake.calls_of("create_topics")[0][0][0]
    assert spec == NewTopicSpec("heartbeats", 1, -1, {"cleanup.policy": "compact"})
    assert fake.topics["heartbeats"] == 1
    assert fake.config_value("heartbeats", "cleanup.policy") == "compact"


@pytest.mark.parametrize("method_error", ["UNSUPPORTED_VERSION", "TOPIC_AUTHORIZATION_FAILED"])
def test_create_compacted_topic_assumes_exists(method_error: str) -> None:
    fake = RecordingAdminOps()

    def refuse(specs: list[NewTopicSpec]) -> dict[str, CreateOutcome]:
        return {
            s.name: CreateOutcome(s.name, "failed", broker_error("no", method_error)) for s in specs
        }

    fake.create_topics = refuse  # type: ignore[method-assign]
    assert fake.create_compacted_topic("A.checkpoints.internal", 3).status == "exists"


def test_create_compacted_topic_fatal_errors_raise() -> None:
    fake = RecordingAdminOps()
    fake.create_topics = lambda specs: {  # type: ignore[method-assign]
        s.name: CreateOutcome(s.name, "failed", broker_error("bad", "INVALID_CONFIG"))
        for s in specs
    }
    with pytest.raises(BrokerError, match="bad"):
        fake.create_compacted_topic("heartbeats", 1)


def test_create_compacted_topic_replication_factor_too_large() -> None:
    fake = RecordingAdminOps(brokers=1)
    with pytest.raises(BrokerError, match="replication factor 3 but the cluster has 1 live broker"):
        fake.create_compacted_topic("mm2-offset-syncs.B.internal", 3)
    assert "mm2-offset-syncs.B.internal" not in fake.topics
    out = fake.create_compacted_topic("mm2-offset-syncs.B.internal", 3, fit_to_cluster=True)
    assert out.status == "created"
    rfs = [args[0][0].replication_factor for args in fake.calls_of("create_topics")]
    assert rfs == [3, 3, 1]


def test_recording_fake_records_and_switches() -> None:
    fake = RecordingAdminOps({"t": 2})
    assert fake.list_topics() == {"t": 2}
    fake.create_partitions("t", 4)
    with pytest.raises(BrokerError) as info:
        fake.create_partitions("t", 3)
    assert kafka_error_name(info.value) == "INVALID_PARTITIONS"
    assert fake.topics["t"] == 4
    fake.unsupported.add("create_partitions")
    with pytest.raises(UnsupportedOperationError):
        fake.create_partitions("t", 8)
    fake.failures["list_topics"] = broker_error("down", "_TRANSPORT", transient=True)
    with pytest.raises(BrokerError):
        fake.list_topics()
    assert fake.list_topics() == {"t": 4}  # failures fire once
    fake.security_disabled = True
    with pytest.raises(SecurityDisabledError):
        fake.describe_topic_acls()
    assert [m for m, _ in fake.calls] == [
        "list_topics", "create_partitions", "create_partitions", "create_partitions",
        "list_topics", "list_topics", "describe_topic_acls",
    ]  # fmt: skip


def test_recording_fake_configs() -> None:
    fake = RecordingAdminOps({"t": 1})
    fake.incremental_alter_configs("t", [ConfigOp("retention.bytes", "10")])
    entries = fake.describe_topic_configs(["t", "missing"])
    assert set(entries) == {"t"}
    assert entries["t"]["retention.bytes"] == ConfigEntry("retention.bytes", "10")
    assert entries["t"]["retention.ms"].source == "DEFAULT_CONFIG"
    fake.incremental_alter_configs("t", [ConfigOp("retention.bytes", None, "DELETE")])
    assert fake.config_value("t", "retention.bytes") == "-1"
    with pytest.raises(BrokerError):
        fake.incremental_alter_configs("missing", [ConfigOp("a", "1")])


def test_fit_to_cluster_does_not_loop_when_brokers_suffice() -> None:
    fake = RecordingAdminOps(brokers=3)
    fake.create_topics = lambda specs: {  # type: ignore[method-assign]
        s.name: CreateOutcome(s.name, "failed", broker_error("rf", "INVALID_REPLICATION_FACTOR"))
        for s in specs
    }
    with pytest.raises(BrokerError, match="3 live broker"):
        fake.create_compacted_topic("heartbeats", 3, fit_to_cluster=True)


def test_acl_apis_auto_detect_real_cluster() -> None:
    node = type("Node", (), {"id": 1})()
    desc = type("D", (), {"cluster_id": "q1w2e3", "controller": None, "nodes": [node]})()
    ops = _ops(StubAdmin(describe_cluster=_done(desc)))
    assert ops.supports_acl_apis() is True
    assert ops.describe_cluster().controller_id is None


def test_future_result_is_the_one_wait_for_every_caller():
    """A future with no answer is a transient error on every Python (3.10's
    concurrent.futures.TimeoutError is not the builtin one); a Kafka error names what failed."""
    from mirror_lib.kafka.admin import future_result
    from mirror_lib.kafka.lookups import wait_futures

    pending: concurrent.futures.Future = concurrent.futures.Future()
    with pytest.raises(BrokerError, match=r"listing groups: no answer in 0.01s") as info:
        future_result(pending, "listing groups", 0.01)
    assert info.value.transient
    with pytest.raises(BrokerError, match=r"describing: no answer") as info:
        wait_futures({"t": pending}, "describing", 0.01)
    assert info.value.transient

    failed: concurrent.futures.Future = concurrent.futures.Future()
    failed.set_exception(KafkaException(KafkaError(KafkaError._TRANSPORT, "down", retriable=True)))
    with pytest.raises(BrokerError, match=r"describing failed: .*down") as info:
        wait_futures({"t": failed}, "describing", 1)
    assert info.value.transient


def test_a_moving_leaders_answer_in_a_failed_querys_text_is_transient() -> None:
    from mirror_lib.errors import is_transient_text

    text = 'KafkaError{code=OFFSET_NOT_AVAILABLE,val=78,str="Broker: Leader high watermark..."}'
    assert is_transient_text(text)
    gone = 'KafkaError{code=_DESTROY_BROKER,val=-137,str="Local: Broker handle destroyed..."}'
    assert is_transient_text(gone)


@pytest.mark.parametrize(
    "code",
    [KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError._DESTROY_BROKER],
)
def test_an_admin_future_failing_on_a_moving_leader_is_transient(code: int) -> None:
    """Listing offsets while two brokers of three were cut off failed on these, and the
    tables thread took them as terminal: the run ended."""
    import concurrent.futures

    from confluent_kafka import KafkaException

    from mirror_lib.kafka.admin import future_result

    fut: concurrent.futures.Future = concurrent.futures.Future()
    fut.set_exception(KafkaException(KafkaError(code)))
    with pytest.raises(BrokerError) as caught:
        future_result(fut, "listing offsets on cluster B", 1)
    assert caught.value.transient


def test_an_admin_future_failing_before_the_leaders_are_known_is_transient() -> None:
    """A 40-minute soak's run ended on this from its tables thread while its one-broker target
    was slow to answer (load average 50): librdkafka had not found the leaders yet."""
    fut: concurrent.futures.Future = concurrent.futures.Future()
    text = "Failed to query partition leaders: No leaders found"
    fut.set_exception(KafkaException(KafkaError(KafkaError._NOENT, text)))
    from mirror_lib.kafka.admin import future_result

    with pytest.raises(BrokerError, match="No leaders found") as caught:
        future_result(fut, "listing offsets on cluster B", 1)
    assert caught.value.transient
    other = map_kafka_error(KafkaError(KafkaError._NOENT, "no such entry"), "reading")
    assert not other.transient  # a _NOENT about anything else stays terminal


def _insync_configs() -> RecordingAdminOps:
    """Topics whose min.insync.replicas is a whole number, not one, and unset."""
    admin = RecordingAdminOps()
    admin.add_topic("A.two", 1, {"min.insync.replicas": "2"})
    admin.add_topic("A.odd", 1, {"min.insync.replicas": "two"})
    admin.add_topic("A.unset", 1)
    admin.default_configs.pop("min.insync.replicas", None)
    return admin


def test_whole_numbers_reads_a_config_of_each_topic_and_leaves_out_the_rest() -> None:
    admin = _insync_configs()
    wanted = ["A.two", "A.odd", "A.unset"]
    assert whole_numbers(admin, wanted, "min.insync.replicas") == {"A.two": 2}
    assert admin.calls_of("describe_topic_configs") == [(wanted,)]


def test_min_insync_is_unknown_where_the_cluster_does_not_say() -> None:
    admin = _insync_configs()
    assert min_insync(admin, ["A.two", "A.odd", "A.unset"]) == {"A.two": 2}
    admin.failures["describe_topic_configs"] = broker_error("no answer", "_TIMED_OUT")
    assert min_insync(admin, ["A.two"]) == {}  # replica_trouble then needs one in-sync replica


def test_replica_trouble_names_partitions_without_a_leader_or_below_min_insync() -> None:
    meta = topics_of(**{"A.t": {0: (1, [1, 2]), 1: (-1, []), 2: (3, [3])}, "other": {0: (1, [1])}})
    problems = replica_trouble(meta, [("A.t", 0), ("A.t", 1), ("A.t", 2), ("gone", 0)], {"A.t": 2})
    assert problems == [
        "A.t[1] has no leader",
        "A.t[2] has 1 in-sync replica, fewer than its min.insync.replicas = 2, so the target "
        "refuses its writes (NOT_ENOUGH_REPLICAS) until a replica returns",
    ]
    assert replica_trouble(meta, [("A.t", 2)], {}) == []  # min.insync.replicas unknown: 1


def test_replica_trouble_tells_each_kind_of_trouble_once_with_its_partitions() -> None:
    """Two brokers of three cut off: every partition of the flow's topics and of the internal
    ones has one in-sync replica. One line tells them all, and how many, not one line each."""
    meta = topics_of(**{"A.t": {p: (1, [1]) for p in range(5)}, "A.u": {0: (2, [])}})
    written = [("A.t", p) for p in range(5)] + [("A.u", 0)]
    assert replica_trouble(meta, written, {"A.t": 2, "A.u": 2}) == [
        "A.t[0], A.t[1], A.t[2] and 2 more partitions have 1 in-sync replica, fewer than their "
        "min.insync.replicas = 2, so the target refuses their writes (NOT_ENOUGH_REPLICAS) "
        "until a replica returns",
        "A.u[0] has 0 in-sync replicas, fewer than its min.insync.replicas = 2, so the target "
        "refuses its writes (NOT_ENOUGH_REPLICAS) until a replica returns",
    ]
    no_leader = topics_of(**{"A.t": {0: (-1, []), 1: (-1, [])}})
    assert replica_trouble(no_leader, [("A.t", 0), ("A.t", 1)], {}) == [
        "A.t[0], A.t[1] have no leader"
    ]


def test_lost_brokers_hold_replicas_of_the_partitions_but_left_the_broker_list() -> None:
    meta = {
        "A.T": FakeTopic({0: FakePartition(1, [1, 3]), 1: FakePartition(3, [3, 1])}),
        "A.U": FakeTopic({0: FakePartition(1, [1], replicas=[1, 4])}),
    }
    assert lost_brokers(meta, [1, 3], [("A.T", 1), ("gone", 0)]) == (2,)
    assert lost_brokers(meta, [1, 3], [("A.U", 0)]) == (4,)
    assert lost_brokers(meta, [1, 2, 3], [("A.T", 0)]) == ()


def test_a_broker_that_left_the_cluster_is_named_from_any_client_s_metadata() -> None:
    """A hung transactional call's cause: any broker the replicas name but the broker list
    does not (the coordinators' topics included); a wait the source held asks only about the
    partitions that waited."""
    offsets = FakeTopic({0: FakePartition(2, [2, 3], replicas=[2, 3, 4])})
    topics = {"A.T": FakeTopic({0: FakePartition(1, [1, 2])}), "__consumer_offsets": offsets}
    meta = FakeCluster(topics, live=(1, 2, 3))
    assert left_cluster(FakeMetaProducer(meta), 1) == "broker 4 had left the cluster"
    assert left_cluster(FakeMetaProducer(meta), 1, [("A.T", 0)]) is None
    gone = FakeCluster(topics, live=(1, 3))
    assert left_cluster(FakeMetaProducer(gone), 1) == "brokers 2, 4 had left the cluster"
    every_live = FakeCluster(topics, (1, 2, 3, 4))
    assert left_cluster(FakeMetaProducer(every_live), 1) is None
    assert left_cluster(FakeMetaProducer(None), 1) is None


def test_first_few_says_how_many_more_there_are() -> None:
    assert first_few(["a", "b"]) == "a; b"
    assert first_few(["a", "b", "c", "d", "e"]) == "a; b; c (and 2 more)"


def test_first_answer_asks_each_address_and_names_the_silent_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each bootstrap address is asked on its own; one named in ``skip`` is silent unasked,
    unless it is the only one."""
    asked: list[str] = []
    answer = FakeCluster(topics_of(t={0: (1, [1])}))

    class Admin:
        def __init__(self, conf: dict[str, Any]) -> None:
            self.address = conf["bootstrap.servers"]
            asked.append(self.address)
            assert conf["log_level"] == 0 and conf["client.id"] == "probe"

        def list_topics(self, timeout: float = 0) -> FakeCluster:
            if self.address != "c:3":
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
            return answer

    monkeypatch.setattr(kafka_admin, "admin_client", Admin)
    conf = {"bootstrap.servers": "a:1, b:2,c:3", "client.id": "probe"}
    assert first_answer(conf, 1.0) == (answer, ["a:1", "b:2"])
    assert sorted(asked) == ["a:1", "b:2", "c:3"]
    asked.clear()
    assert first_answer(conf, 1.0, skip=("b:2",)) == (answer, ["b:2", "a:1"])
    assert sorted(asked) == ["a:1", "c:3"]
    asked.clear()
    alone = {"bootstrap.servers": "a:1", "client.id": "probe"}
    assert first_answer(alone, 1.0, skip=("a:1",)) == (None, ["a:1"])
    assert asked == ["a:1"]  # the only address is asked all the same
