"""Unit tests of topic/config/ACL/partition sync (docs/mm2-reference.md#topic-sync) against
RecordingAdminOps."""

from __future__ import annotations

import logging

import pytest

from mirror_lib.errors import ConfigError, UnsupportedOperationError
from mirror_lib.kafka.admin_ops import (
    AclBinding,
    ConfigEntry,
    ConfigOp,
    NewTopicSpec,
    broker_error,
    kafka_error_name,
)
from mirror_lib.replication.companions.topic_sync import (
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    ConfigPropertyFilter,
    TopicSyncer,
    acl_sync_bindings,
    config_sync_ops,
    initial_topic_configs,
    partition_plan,
    refusal_error,
)
from tests.helpers.fake_admin import RecordingAdminOps

# The settings of MM2's integration tests (MirrorConnectorsIntegrationBaseTest).
TEST_EXCLUDE = r"delete\.retention\..*"


def should_replicate(topic: str) -> bool:
    return topic.startswith("test-topic-")


def remote(topic: str) -> str:
    return f"primary.{topic}"


def _entry(name: str, value: str | None, source: str = "DYNAMIC_TOPIC_CONFIG", **kw) -> ConfigEntry:
    return ConfigEntry(name, value, is_default=source == "DEFAULT_CONFIG", source=source, **kw)


def make(
    use_defaults_from: str = "target", **kw
) -> tuple[RecordingAdminOps, RecordingAdminOps, TopicSyncer]:
    src, tgt = RecordingAdminOps(), RecordingAdminOps()
    flt = ConfigPropertyFilter(TEST_EXCLUDE, use_defaults_from)  # type: ignore[arg-type]
    syncer = TopicSyncer(
        src, tgt, should_replicate, remote, config_filter=flt, replication_factor=1, **kw
    )
    return src, tgt, syncer


# --- ConfigPropertyFilter ------------------------------------------------------------------


def test_default_excludes_are_the_4x_list() -> None:
    flt = ConfigPropertyFilter()
    assert len(DEFAULT_CONFIG_PROPERTIES_EXCLUDE) == 6
    for name in [
        "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
        "message.timestamp.difference.max.ms", "message.timestamp.type",
        "unclean.leader.election.enable", "min.insync.replicas",
    ]:  # fmt: skip
        assert flt.excluded(name)
    assert not flt.excluded("retention.bytes")
    assert not flt.excluded("min.insync.replicas.x")  # full match only
    assert not flt.excluded("min_insync_replicas")  # dots are literal
    assert flt.use_defaults_from == "target"


def test_filter_accepts_comma_separated_string() -> None:
    flt = ConfigPropertyFilter(r"delete\.retention\..*, segment\.ms")
    assert flt.excluded("delete.retention.ms") and flt.excluded("segment.ms")
    assert not flt.excluded("retention.ms")
    assert not ConfigPropertyFilter("").excluded("anything")


def test_filter_rejects_bad_input() -> None:
    with pytest.raises(ConfigError, match=r"use\.defaults\.from"):
        ConfigPropertyFilter(use_defaults_from="both")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"config\.properties\.exclude"):
        ConfigPropertyFilter("(unclosed")


# --- initial configs / sync ops -------------------------------------------------------------

SOURCE_ENTRIES = {
    e.name: e
    for e in [
        _entry("retention.bytes", "1000"),
        _entry("cleanup.policy", "delete", "DEFAULT_CONFIG"),
        _entry("compression.type", "zstd", "DYNAMIC_BROKER_CONFIG"),
        _entry("segment.bytes", "1000", "STATIC_BROKER_CONFIG"),
        _entry("read.only.thing", "x", is_read_only=True),
        _entry("secret.thing", None, is_sensitive=True),
        _entry("min.insync.replicas", "2"),
        _entry("delete.retention.ms", "1000"),
    ]
}


def test_initial_configs_target_defaults() -> None:
    configs = initial_topic_configs(SOURCE_ENTRIES, ConfigPropertyFilter())
    assert configs == {
        "retention.bytes": "1000",
        "compression.type": "zstd",
        "delete.retention.ms": "1000",
    }


def test_initial_configs_source_defaults() -> None:
    flt = ConfigPropertyFilter(TEST_EXCLUDE, "source")
    configs = initial_topic_configs(SOURCE_ENTRIES, flt)
    assert configs == {
        "retention.bytes": "1000",
        "cleanup.policy": "delete",
        "compression.type": "zstd",
        "min.insync.replicas": "2",
    }


def test_sync_ops_target_defaults_delete() -> None:
    ops = config_sync_ops(SOURCE_ENTRIES, ConfigPropertyFilter())
    assert ops == [
        ConfigOp("cleanup.policy", None, "DELETE"),
        ConfigOp("compression.type", "zstd", "SET"),  # inherited broker value is SET
        ConfigOp("delete.retention.ms", "1000", "SET"),
        ConfigOp("retention.bytes", "1000", "SET"),
    ]


def test_sync_ops_source_defaults_set() -> None:
    ops = config_sync_ops(SOURCE_ENTRIES, ConfigPropertyFilter(TEST_EXCLUDE, "source"))
    assert ConfigOp("cleanup.policy", "delete", "SET") in ops
    assert all(o.op == "SET" for o in ops)
    assert not any(o.name == "delete.retention.ms" for o in ops)


def test_unknown_source_uses_is_default_flag() -> None:
    entries = {"a": ConfigEntry("a", "1", is_default=True, source="UNKNOWN_CONFIG")}
    assert config_sync_ops(entries, ConfigPropertyFilter()) == [ConfigOp("a", None, "DELETE")]


# --- MM2's testSyncTopicConfigs, testReplicateSourceDefault, testReplicateTargetDefault -----------


def test_9_9_sync_topic_configs() -> None:
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 1, {"delete.retention.ms": "1000", "retention.bytes": "1000"})
    syncer.create_missing()
    tgt.incremental_alter_configs(
        "primary.test-topic-1",
        [ConfigOp("delete.retention.ms", "2000"), ConfigOp("retention.bytes", "2000")],
    )
    syncer.sync_configs()
    assert tgt.config_value("primary.test-topic-1", "delete.retention.ms") == "2000"
    assert tgt.config_value("primary.test-topic-1", "retention.bytes") == "1000"


def test_9_10_replicate_source_default() -> None:
    src, tgt, syncer = make("source")
    src.add_topic("test-topic-1", 1)
    tgt.add_topic("primary.test-topic-1", 1)
    tgt.default_configs["retention.bytes"] = _entry("retention.bytes", "123", "DEFAULT_CONFIG")
    tgt.incremental_alter_configs(
        "primary.test-topic-1",
        [ConfigOp("delete.retention.ms", "2000"), ConfigOp("retention.bytes", "2000")],
    )
    applied = syncer.sync_configs()
    assert ConfigOp("retention.bytes", "-1", "SET") in applied["primary.test-topic-1"]
    assert tgt.config_value("primary.test-topic-1", "retention.bytes") == "-1"  # source default
    assert tgt.config_value("primary.test-topic-1", "delete.retention.ms") == "2000"


def test_9_11_replicate_target_default() -> None:
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 1, {"retention.bytes": "1000"})
    syncer.create_missing()
    assert tgt.config_value("primary.test-topic-1", "retention.bytes") == "1000"
    src.incremental_alter_configs("test-topic-1", [ConfigOp("retention.bytes", None, "DELETE")])
    tgt.default_configs["retention.bytes"] = _entry("retention.bytes", "-1", "DEFAULT_CONFIG")
    applied = syncer.sync_configs()
    assert ConfigOp("retention.bytes", None, "DELETE") in applied["primary.test-topic-1"]
    assert tgt.config_value("primary.test-topic-1", "retention.bytes") == "-1"


def test_sync_configs_only_replicated_topics_with_existing_remote() -> None:
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 1, {"retention.bytes": "1"})
    src.add_topic("test-topic-2", 1, {"retention.bytes": "2"})  # remote missing
    src.add_topic("other", 1, {"retention.bytes": "3"})  # not replicated
    tgt.add_topic("primary.test-topic-1", 1)
    tgt.add_topic("primary.other", 1)
    assert set(syncer.sync_configs()) == {"primary.test-topic-1"}
    assert [a[0] for a in tgt.calls_of("incremental_alter_configs")] == ["primary.test-topic-1"]


def test_sync_configs_unsupported_raises_other_errors_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 1, {"retention.bytes": "1"})
    tgt.add_topic("primary.test-topic-1", 1)
    tgt.failures["incremental_alter_configs"] = broker_error("denied", "TOPIC_AUTHORIZATION_FAILED")
    assert syncer.sync_configs() == {}
    assert "could not sync configs" in caplog.text
    tgt.unsupported.add("incremental_alter_configs")
    with pytest.raises(UnsupportedOperationError):
        syncer.sync_configs()


# --- creation -------------------------------------------------------------------------------


def test_create_missing_copies_partitions_and_filtered_configs() -> None:
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 10, {"cleanup.policy": "compact", "delete.retention.ms": "5"})
    src.add_topic("test-topic-2", 3)
    src.add_topic("not-mine", 1)
    tgt.add_topic("primary.test-topic-2", 1)  # existing: left alone
    out = syncer.create_missing()
    assert {t: o.status for t, o in out.items()} == {"primary.test-topic-1": "created"}
    (specs,) = tgt.calls_of("create_topics")[0]
    assert specs == [NewTopicSpec("primary.test-topic-1", 10, 1, {"cleanup.policy": "compact"})]
    assert tgt.topics["primary.test-topic-2"] == 1


def test_create_missing_subset_and_errors_are_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    src, tgt, syncer = make()
    syncer.replication_factor = 3  # fake target has one broker
    src.add_topic("test-topic-1", 2)
    src.add_topic("test-topic-2", 2)
    out = syncer.create_missing(["test-topic-2"])
    assert out["primary.test-topic-2"].status == "failed"
    assert "could not create remote topic" in caplog.text
    assert tgt.calls_of("create_topics")[0][0][0].name == "primary.test-topic-2"


def test_a_config_the_target_release_lacks_is_left_out_and_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 2.8 source's message.format.version on a 4.x target (and a 4.x source's settings on a
    2.8 target): Kafka refuses the whole topic with INVALID_CONFIG. The topic is created without
    it, later syncs never send it again, and one warning says so."""
    src, tgt, syncer = make()
    tgt.unknown_configs = {"message.format.version", "message.downconversion.enable"}
    old = {"message.format.version": "2.8", "message.downconversion.enable": "false"}
    src.add_topic("test-topic-1", 2, {"retention.ms": "5000", **old})
    src.add_topic("test-topic-2", 1, {"message.format.version": "2.8"})
    caplog.set_level(logging.WARNING)
    out = syncer.create_missing()
    assert {t: o.status for t, o in out.items()} == {
        "primary.test-topic-1": "created",
        "primary.test-topic-2": "created",
    }
    assert tgt.overrides["primary.test-topic-1"] == {"retention.ms": "5000"}
    assert tgt.overrides["primary.test-topic-2"] == {}
    assert syncer.unknown_configs == set(old) and not syncer.refused
    src.overrides["test-topic-1"]["retention.ms"] = "6000"
    calls = len(tgt.calls_of("incremental_alter_configs"))
    applied = syncer.sync_configs()
    assert tgt.overrides["primary.test-topic-1"] == {"retention.ms": "6000"}
    sent = [op.name for _t, ops in tgt.calls_of("incremental_alter_configs")[calls:] for op in ops]
    assert not set(old) & set(sent) and "retention.ms" in sent
    assert set(applied) == {"primary.test-topic-1", "primary.test-topic-2"}
    syncer.create_missing()
    syncer.sync_configs()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for name in old:
        (warning,) = [w for w in warnings if name in w]
        assert warning.startswith(f"the target does not know topic config {name} (its Kafka")
        assert "primary.test-topic-" in warning and "created and synced without it" in warning


def test_a_config_the_target_release_lacks_is_found_by_config_sync_too() -> None:
    """A remote topic that exists already: the SET the target refuses is dropped, the others
    applied in the same sync; a DELETE of it (a default on the source) the target takes."""
    src, tgt, syncer = make()
    tgt.unknown_configs = {"message.timestamp.after.max.ms"}
    newer = {"message.timestamp.after.max.ms": "86400000"}
    src.add_topic("test-topic-1", 1, {"retention.ms": "5000", **newer})
    tgt.add_topic("primary.test-topic-1", 1)
    applied = syncer.sync_configs()["primary.test-topic-1"]
    assert ConfigOp("retention.ms", "5000") in applied
    assert "message.timestamp.after.max.ms" not in {op.name for op in applied}
    assert tgt.overrides["primary.test-topic-1"]["retention.ms"] == "5000"
    assert syncer.unknown_configs == set(newer)


def test_another_invalid_config_is_no_config_of_another_release(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only Kafka's "Unknown topic config name" is a config of another release: any other
    refusal is logged as before, and nothing is left out of later syncs."""
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 1, {"retention.ms": "5000"})
    tgt.add_topic("primary.test-topic-1", 1)
    bad = broker_error("INVALID_CONFIG: Invalid value -7 for configuration x", "INVALID_CONFIG")
    tgt.failures["incremental_alter_configs"] = bad
    assert syncer.sync_configs() == {}
    assert "could not sync configs of test-topic-1" in caplog.text
    assert not syncer.unknown_configs
    assert ConfigOp("retention.ms", "5000") in syncer.sync_configs()["primary.test-topic-1"]


def test_a_topic_whose_configs_the_source_refuses_is_not_created_without_them() -> None:
    """An ACL without DESCRIBE_CONFIGS on one topic (real Kafka's TOPIC_AUTHORIZATION_FAILED):
    that remote topic is refused, named with the cause; the others are created."""
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 1, {"cleanup.policy": "compact"})
    src.add_topic("test-topic-2", 1, {"cleanup.policy": "compact"})
    describe = src.describe_topic_configs

    def refuse_2(topics):
        if "test-topic-2" in topics:
            raise broker_error("describe configs: denied", "TOPIC_AUTHORIZATION_FAILED")
        return describe(topics)

    src.describe_topic_configs = refuse_2  # type: ignore[method-assign]
    out = syncer.create_missing()
    assert {t: o.status for t, o in out.items()} == {
        "primary.test-topic-1": "created",
        "primary.test-topic-2": "failed",
    }
    assert "primary.test-topic-2" not in tgt.topics
    assert kafka_error_name(syncer.refused["primary.test-topic-2"]) == "TOPIC_AUTHORIZATION_FAILED"
    assert tgt.config_value("primary.test-topic-1", "cleanup.policy") == "compact"


# --- ACLs ----------------------------------------------------------------------------------


def _acl(op: str, perm: str = "ALLOW", name: str = "test-topic-1", pattern: str = "LITERAL", **kw):
    return AclBinding(name, pattern, "User:dummy", "*", op, perm, **kw)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (_acl("READ"), _acl("READ", name="primary.test-topic-1")),
        (_acl("DESCRIBE"), _acl("DESCRIBE", name="primary.test-topic-1")),
        (_acl("ALL"), _acl("READ", name="primary.test-topic-1")),
        (_acl("WRITE"), None),
        (_acl("WRITE", "DENY"), _acl("WRITE", "DENY", name="primary.test-topic-1")),
        (_acl("ALL", "DENY"), _acl("ALL", "DENY", name="primary.test-topic-1")),
        (_acl("READ", "DENY"), _acl("READ", "DENY", name="primary.test-topic-1")),
        (_acl("ALTER_CONFIGS"), _acl("ALTER_CONFIGS", name="primary.test-topic-1")),
        (_acl("READ", pattern="PREFIXED", name="test-topic-"), None),
        (_acl("READ", name="other-topic"), None),
        (_acl("READ", resource_type="GROUP", name="test-topic-1"), None),
    ],
)
def test_acl_mapping_table(source: AclBinding, expected: AclBinding | None) -> None:
    assert acl_sync_bindings([source], should_replicate, remote) == ([expected] if expected else [])


def test_acl_mapping_keeps_principal_host_and_dedupes() -> None:
    a = AclBinding("test-topic-1", "LITERAL", "User:x", "10.0.0.1", "ALL", "ALLOW")
    b = AclBinding("test-topic-1", "LITERAL", "User:x", "10.0.0.1", "READ", "ALLOW")
    out = acl_sync_bindings([a, b], should_replicate, remote)
    assert out == [
        AclBinding("primary.test-topic-1", "LITERAL", "User:x", "10.0.0.1", "READ", "ALLOW")
    ]


def test_sync_acls_creates_remote_bindings() -> None:
    src, tgt, syncer = make()
    src.acls = [_acl("DESCRIBE"), _acl("WRITE"), _acl("READ", pattern="PREFIXED")]
    assert syncer.sync_acls() == [_acl("DESCRIBE", name="primary.test-topic-1")]
    assert tgt.acls == [_acl("DESCRIBE", name="primary.test-topic-1")]
    tgt.acls.clear()
    src.acls = [_acl("WRITE")]
    assert syncer.sync_acls() == []
    assert len(tgt.calls_of("create_acls")) == 1  # nothing to create: no request


def test_sync_acls_disabled_makes_no_calls() -> None:
    src, tgt, syncer = make(sync_acls_enabled=False)
    assert syncer.sync_acls() == []
    assert src.calls == [] and tgt.calls == []


def test_sync_acls_security_disabled_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    src, tgt, syncer = make()
    src.security_disabled = True
    with caplog.at_level(logging.WARNING):
        assert syncer.sync_acls() == []
        assert syncer.sync_acls() == []
    assert caplog.text.count("skipping ACL sync") == 1
    assert tgt.calls == []


def test_sync_acls_target_without_acl_api(caplog: pytest.LogCaptureFixture) -> None:
    src, tgt, syncer = make()
    src.acls = [_acl("READ")]
    tgt.unsupported.add("create_acls")
    assert syncer.sync_acls() == []
    assert "target has no ACL support" in caplog.text


def test_sync_acls_per_binding_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    src, tgt, syncer = make()
    src.acls = [_acl("READ"), _acl("DESCRIBE")]
    bad = _acl("READ", name="primary.test-topic-1")
    # type: ignore[method-assign]
    tgt.create_acls = lambda bs: {b: (broker_error("no", "X") if b == bad else None) for b in bs}
    assert syncer.sync_acls() == [_acl("DESCRIBE", name="primary.test-topic-1")]
    assert "could not create ACL" in caplog.text


# --- partitions ------------------------------------------------------------------------------


def test_partition_plan() -> None:
    create, grow = partition_plan(
        {"a": 3, "b": 5, "c": 2, "d": 4},
        {"primary.b": 5, "primary.c": 7, "primary.d": 1, "primary.zzz": 1},
        lambda t: f"primary.{t}",
    )
    assert create == {"primary.a": 3}
    assert grow == {"primary.d": 4}  # c: never reduced; b: equal


def test_9_14_partition_increase_10_to_11() -> None:
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 10)
    syncer.sync_partitions()
    assert tgt.topics["primary.test-topic-1"] == 10
    src.topics["test-topic-1"] = 11
    result = syncer.sync_partitions()
    assert result.grown == {"primary.test-topic-1": 11}
    assert tgt.topics["primary.test-topic-1"] == 11
    assert tgt.calls_of("create_partitions") == [("primary.test-topic-1", 11)]


def test_sync_partitions_creates_new_topics_and_never_shrinks() -> None:
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 2)
    src.add_topic("test-topic-2", 4, {"retention.bytes": "7"})
    tgt.add_topic("primary.test-topic-1", 5)
    result = syncer.sync_partitions()
    assert set(result.created) == {"primary.test-topic-2"}
    assert result.grown == {}
    assert tgt.topics == {"primary.test-topic-1": 5, "primary.test-topic-2": 4}
    assert tgt.config_value("primary.test-topic-2", "retention.bytes") == "7"
    assert tgt.calls_of("create_partitions") == []


def test_sync_partitions_invalid_partitions_ignored_unsupported_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 3)
    tgt.add_topic("primary.test-topic-1", 1)
    tgt.failures["create_partitions"] = broker_error("raced", "INVALID_PARTITIONS")
    assert syncer.sync_partitions().grown == {}
    assert "could not grow" not in caplog.text
    tgt.unsupported.add("create_partitions")
    with caplog.at_level(logging.WARNING):
        syncer.sync_partitions()
        syncer.sync_partitions()
    assert caplog.text.count("cannot grow primary.test-topic-1") == 1


def test_refusals_are_kept_until_the_remote_topic_is_made() -> None:
    src, tgt, syncer = make()
    syncer.replication_factor = 3  # fake target has one broker: creating fails
    src.add_topic("test-topic-1", 2)
    src.add_topic("test-topic-2", 3)
    tgt.add_topic("primary.test-topic-2", 1)
    tgt.unsupported.add("create_partitions")
    syncer.sync_partitions()
    assert set(syncer.refused) == {"primary.test-topic-1", "primary.test-topic-2"}
    assert not any(e.transient for e in syncer.refused.values())
    syncer.replication_factor = 1
    tgt.unsupported.clear()
    syncer.sync_partitions()
    assert syncer.refused == {}


def test_a_terminal_refusal_names_topic_counts_and_cause() -> None:
    refused = {
        "primary.a": broker_error("grow refused", "POLICY_VIOLATION"),
        "primary.b": broker_error("create refused", "TOPIC_AUTHORIZATION_FAILED"),
        "primary.c": broker_error("timed out", "REQUEST_TIMED_OUT", transient=True),
    }
    source = {"a": 4, "b": 2, "c": 2, "d": 3}
    target = {"primary.a": 2, "primary.c": 0, "primary.d": 0}
    err = refusal_error("flow A->B", "target cluster B", source, target, remote, refused)
    assert err is not None and not err.transient
    text = str(err)
    assert "a has 4 partitions; growing primary.a from 2 was refused: grow refused" in text
    assert "b has 2 partitions; creating primary.b was refused: create refused" in text
    assert "primary.c" not in text and "primary.d" not in text  # transient; not refused yet
    assert "topics.exclude" in text
    # a transient refusal, a remote topic large enough, or none refused yet: the planner waits
    assert refusal_error("f", "t", {"c": 2, "d": 3}, target, remote, refused) is None
    assert refusal_error("f", "t", {"a": 2}, target, remote, refused) is None


def test_9_14_forwarding_admin_sees_every_topic_creation() -> None:
    """All remote and internal topic creation goes through the (recording) admin layer."""
    src, tgt, syncer = make()
    src.add_topic("test-topic-1", 10, {"cleanup.policy": "compact"})
    syncer.sync_partitions()
    for name in ["A.checkpoints.internal", "heartbeats", "primary.heartbeats"]:
        tgt.create_compacted_topic(name, 1)
    src.create_compacted_topic("mm2-offset-syncs.backup.internal", 1)
    created = [s.name for (specs,) in tgt.calls_of("create_topics") for s in specs]
    assert created == [
        "primary.test-topic-1",
        "A.checkpoints.internal",
        "heartbeats",
        "primary.heartbeats",
    ]
    assert src.topics["mm2-offset-syncs.backup.internal"] == 1
    syncer.sync_configs()
    assert tgt.config_value("primary.test-topic-1", "cleanup.policy") == "compact"


def test_config_properties_exclude_is_one_pattern_joined_with_a_bar_as_in_mm2():
    """MM2 splits the list at every comma and joins the items with '|': ``(min, max)-x`` is
    ``(min|max)-x``, not the two patterns ``(min`` and ``max)-x``."""
    excluded = ConfigPropertyFilter("(min, max)-x").excluded
    assert [n for n in ("min", "max-x", "min-x", "max") if excluded(n)] == ["max-x", "min-x"]
