"""Unit tests of mm2.properties parsing, validation, secrets and client configs."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import load_config, parse_config
from mirror_lib.config.properties import REDACTED, parse_properties
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.clients import client_config

BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
}


def cfg(**extra: str):
    props = dict(BASE)
    props.update({k.replace("__", "."): v for k, v in extra.items()})
    return parse_config(props)


def test_java_properties_syntax():
    text = (
        "# comment\n! also a comment\n"
        "a = 1\nb:2\nc 3\n"
        "long = one, \\\n    two\n"
        "esc\\=key = x\\ty\n"
        "uni = \\u0041\n"
        "A->B.enabled=true\n"
        "empty =\n"
    )
    props = parse_properties(text)
    assert props == {
        "a": "1",
        "b": "2",
        "c": "3",
        "long": "one, two",
        "esc=key": "x\ty",
        "uni": "A",
        "A->B.enabled": "true",
        "empty": "",
    }


def test_defaults_match_mm2():
    flow = cfg().flow("A->B")
    s = flow.settings
    assert flow.enabled
    assert s.topics == (".*",)
    assert s.topics_exclude == (r"mm2.*\.internal", r".*\.replica", "__.*")
    assert s.groups_exclude == ("console-consumer-.*", "connect-.*", "__.*")
    assert s.checkpoints_interval == 60
    assert s.heartbeats_interval == 1
    assert not s.sync_group_offsets
    assert s.sync_group_offsets_interval == 60
    assert s.refresh_topics_interval == 600
    assert s.offset_lag_max == 100
    assert s.replication_factor == 2
    assert s.tasks == 1
    assert s.exactly_once
    assert s.separator == "."
    assert s.offset_syncs_location == "target"  # ours: atomic with the data (MM2: source)


def test_flow_overrides_win_over_top_level():
    config = cfg(
        topics="x.*",
        **{"A->B.topics": "orders, payments", "emit.checkpoints.interval.seconds": "5"},
    )
    s = config.flow("A->B").settings
    assert s.topics == ("orders", "payments")
    assert s.checkpoints_interval == 5
    assert config.flow("B->A").settings.topics == ("x.*",)


def test_only_enabled_flows_replicate_but_all_pairs_heartbeat():
    config = cfg()
    assert [f.name for f in config.enabled_flows()] == ["A->B"]
    assert {f.name for f in config.heartbeat_flows()} == {"A->B", "B->A"}


def test_old_blacklist_names_are_accepted():
    s = cfg(**{"topics.blacklist": "secret.*", "groups.blacklist": "tmp.*"}).flow("A->B").settings
    assert s.topics_exclude == ("secret.*",)
    assert s.groups_exclude == ("tmp.*",)


def test_cluster_client_properties_and_roles():
    config = cfg(
        **{
            "security.protocol": "SASL_SSL",
            "A.sasl.mechanism": "PLAIN",
            "A.consumer.isolation.level": "read_committed",
            "B.producer.linger.ms": "5",
        }
    )
    a = config.cluster("A")
    assert a.role_properties("consumer")["isolation.level"] == "read_committed"
    assert a.role_properties("consumer")["security.protocol"] == "SASL_SSL"
    assert "isolation.level" not in a.role_properties("producer")
    assert config.cluster("B").role_properties("producer")["linger.ms"] == "5"


@pytest.mark.parametrize(
    ("props", "key", "expected"),
    [
        ({"A->A.enabled": "true"}, "A->A.enabled", "two different clusters"),
        ({"topics": "orders[", "A->B.enabled": "true"}, "topics", "regular expression"),
        ({"A->B.groups.exclude": "(x"}, "A->B.groups.exclude", "regular expression"),
        (
            {"emit.checkpoints.interval.seconds": "-5"},
            "emit.checkpoints.interval.seconds",
            "positive",
        ),
        ({"offset.lag.max": "-1"}, "offset.lag.max", ">= 0"),
        ({"replication.policy.class": "com.acme.Mine"}, "replication.policy.class", "Default"),
        ({"replication.policy.separator": ""}, "replication.policy.separator", "non-empty"),
        ({"A->B.enabled": "yes"}, "A->B.enabled", "true or false"),
        ({"mirror.deliverx": "x"}, "mirror.deliverx", "mirror.delivery"),
        ({"mirror.delivery": "twice"}, "mirror.delivery", "exactly_once"),
        ({"tasks.max": "0"}, "tasks.max", ">= 1"),
        # process-wide keys set per flow would be ignored: refused, naming the top-level key
        ({"A->B.mirror.tables.enabled": "true"}, "A->B.mirror.tables.enabled", "process-wide"),
        ({"A->B.mirror.state.dir": "/x"}, "mirror.state.dir without 'A->B.'", "process-wide"),
        ({"A->B.mirror.deliverx": "x"}, "A->B.mirror.deliverx", "per-flow mirror.* key"),
        # a plug-in class that cannot run here would change what is copied: refused
        ({"topic.filter.class": "com.acme.F"}, "topic.filter.class", "topics.exclude"),
        ({"A->B.group.filter.class": "x.G"}, "A->B.group.filter.class", "DefaultGroupFilter"),
        ({"forwarding.admin.class": "x.A"}, "forwarding.admin.class", "remove the key"),
    ],
)
def test_bad_input_names_key_value_and_valid_form(props, key, expected):
    with pytest.raises(ConfigError) as err:
        cfg(**props)
    message = str(err.value)
    assert key in message
    assert expected in message


def test_missing_bootstrap_and_clusters():
    with pytest.raises(ConfigError, match=r"B\.bootstrap\.servers = <missing>"):
        parse_config({"clusters": "A, B", "A.bootstrap.servers": "a:1"})
    with pytest.raises(ConfigError, match="clusters"):
        parse_config({"A.bootstrap.servers": "a:1"})
    with pytest.raises(ConfigError, match="distinct"):
        parse_config({"clusters": "A, A", "A.bootstrap.servers": "a:1"})


def test_unknown_keys_are_reported_not_fatal():
    config = cfg(**{"emit.checkpoint.interval.seconds": "5", "A->B.topic": "x"})
    assert set(config.unknown_keys) == {"emit.checkpoint.interval.seconds", "A->B.topic"}


def test_plug_in_classes_at_their_default_are_accepted_quietly():
    config = cfg(
        **{
            "topic.filter.class": "org.apache.kafka.connect.mirror.DefaultTopicFilter",
            "A->B.group.filter.class": "DefaultGroupFilter",
            "forwarding.admin.class": "org.apache.kafka.clients.admin.ForwardingAdmin",
        }
    )
    assert not any("class" in w for w in config.warnings)
    assert config.unknown_keys == ()


def test_checkpoints_need_offset_syncs():
    with pytest.raises(ConfigError, match=r"emit\.offset-syncs\.enabled"):
        cfg(**{"A->B.emit.offset-syncs.enabled": "false"})
    ok = cfg(
        **{
            "A->B.emit.offset-syncs.enabled": "false",
            "A->B.emit.checkpoints.enabled": "false",
        }
    )
    assert not ok.flow("A->B").settings.emit_offset_syncs


def test_secrets_are_redacted_everywhere_and_resolved_late(monkeypatch):
    config = cfg(
        **{
            "A.sasl.password": "${env:A_PW}",
            "B.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="bob" password="hunter2";'
            ),
            "B.ssl.key.password": "literal-secret",
        }
    )
    printed = repr(config) + repr(config.cluster("A")) + repr(config.cluster("B"))
    printed += str(config.cluster("B").describe())
    assert "hunter2" not in printed
    assert "literal-secret" not in printed
    assert REDACTED in printed
    monkeypatch.setenv("A_PW", "s3cret")
    conf = client_config(config.cluster("A"), "admin")
    assert conf["sasl.password"] == "s3cret"
    b = client_config(config.cluster("B"), "producer")
    assert (b["sasl.username"], b["sasl.password"]) == ("bob", "hunter2")
    assert "sasl.jaas.config" not in b


def test_unresolvable_references_fail_with_the_variable_name(monkeypatch):
    monkeypatch.delenv("NOPE_PW", raising=False)
    config = cfg(**{"A.sasl.password": "${env:NOPE_PW}"})
    with pytest.raises(ConfigError, match="NOPE_PW"):
        client_config(config.cluster("A"), "consumer")
    with pytest.raises(ConfigError, match=r"\$\{env:NAME\}"):
        cfg(**{"A.sasl.password": "${vault:x}"})


def test_secret_scope_lookup_is_pluggable():
    config = cfg(**{"A.sasl.password": "${secret:kafka/a-pw}"})
    conf = client_config(
        config.cluster("A"), "consumer", secret_lookup=lambda scope, key: f"{scope}:{key}"
    )
    assert conf["sasl.password"] == "kafka:a-pw"


def test_java_only_client_settings_get_a_librdkafka_hint():
    config = cfg(**{"A.ssl.truststore.location": "/x.jks"})
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location"):
        client_config(config.cluster("A"), "consumer")


def test_load_config_reads_the_example(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text("clusters=A,B\nA.bootstrap.servers=x:1\nB.bootstrap.servers=y:1\n")
    config = load_config(path)
    assert config.origin == str(path)
    with pytest.raises(ConfigError, match="CONFIG"):
        load_config(tmp_path / "missing.properties")
