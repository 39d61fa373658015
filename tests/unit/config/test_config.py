"""Unit tests of mm2.properties parsing, validation, secrets and client configs."""

from __future__ import annotations

import pytest

from mirror_lib.config.describe import describe_flow
from mirror_lib.config.parse import load_config, parse_config
from mirror_lib.config.properties import REDACTED, parse_properties
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.clients import check_clients, client_config

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


def test_at_least_once_commits_every_second_unless_the_interval_is_set():
    """At least once a commit does not decide when a record is visible: its default interval is
    longer, and a value the user set (per flow or top level) is kept as written."""
    assert cfg().flow("A->B").settings.commit_interval_ms == 20
    alo = {"mirror.delivery": "at_least_once"}
    assert cfg(**alo).flow("A->B").settings.commit_interval_ms == 1000
    assert (
        cfg(**alo, **{"mirror.commit.interval.ms": "20"}).flow("A->B").settings.commit_interval_ms
        == 20
    )
    per_flow = {"A->B.mirror.delivery": "at_least_once", "A->B.mirror.commit.interval.ms": "50"}
    assert cfg(**per_flow).flow("A->B").settings.commit_interval_ms == 50


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
    assert s.refresh_topics_interval == 15  # ours: a new topic within a minute (MM2: 600)
    assert s.offset_lag_max == 100
    assert s.replication_factor == 2
    assert s.tasks == 2  # ours: a fixed 2 uses a 2-core machine (MM2: 1)
    assert s.exactly_once
    assert s.separator == "."
    assert s.offset_syncs_location == "target"  # ours: atomic with the data (MM2: source)


@pytest.mark.parametrize("value", ["1", "2", "7"])
def test_an_explicit_tasks_max_keeps_its_meaning(value):
    assert cfg(**{"tasks.max": value}).flow("A->B").settings.tasks == int(value)
    assert cfg(**{"A->B.tasks.max": value}).flow("A->B").settings.tasks == int(value)


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


@pytest.mark.parametrize(
    "key",
    [
        "security.protocol",
        "A.security.protocol",
        "B.producer.security.protocol",
        "admin.security.protocol",
        "A->B.consumer.security.protocol",
        "A->B.producer.override.security.protocol",
    ],
)
def test_a_security_protocol_that_names_none_is_refused_when_read(key):
    """As MM2 refuses it when it reads its configuration: the library API fails, not only
    validate (MirrorMakerConfigTest.testInvalidSecurityProtocol)."""
    with pytest.raises(ConfigError, match="SASL_PLAINTEXT, SASL_SSL") as caught:
        parse_config({**BASE, key: "abc"}, origin="mm2.properties")
    assert (caught.value.key, caught.value.value, caught.value.where) == (
        key,
        "abc",
        "mm2.properties",
    )


def test_a_security_protocol_in_any_case_or_as_a_reference_is_read():
    config = cfg(**{"A.security.protocol": "sasl_ssl", "B.security.protocol": "${env:PROTO}"})
    assert config.cluster("A").client["security.protocol"] == "sasl_ssl"
    assert config.cluster("B").client["security.protocol"] == "${env:PROTO}"


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


def test_a_java_store_not_on_this_machine_stays_a_file_for_the_client_checks():
    config = cfg(**{"A.ssl.truststore.location": "/x.jks"})
    assert client_config(config.cluster("A"), "consumer")["ssl.ca.location"] == "/x.jks"


def test_load_config_reads_the_example(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text("clusters=A,B\nA.bootstrap.servers=x:1\nB.bootstrap.servers=y:1\n")
    config = load_config(path)
    assert config.origin == str(path)
    with pytest.raises(ConfigError, match="CONFIG"):
        load_config(tmp_path / "missing.properties")


@pytest.mark.parametrize("specific_first", [True, False])
def test_a_source_or_target_flow_client_prefix_beats_the_generic_one_in_any_order(specific_first):
    pairs = [
        ("A->B.source.consumer.fetch.min.bytes", "10"),
        ("A->B.target.producer.linger.ms", "7"),
        ("A->B.source.admin.request.timeout.ms", "500"),
    ]
    generic = [
        ("A->B.consumer.fetch.min.bytes", "20"),
        ("A->B.producer.linger.ms", "70"),
        ("A->B.admin.request.timeout.ms", "900"),
    ]
    lines = pairs + generic if specific_first else generic + pairs
    flow = parse_config({**BASE, **dict(lines)}).flow("A->B")
    assert flow.overrides("source", "consumer")["fetch.min.bytes"][0] == "10"
    assert flow.overrides("target", "producer")["linger.ms"][0] == "7"
    assert flow.overrides("source", "admin")["request.timeout.ms"][0] == "500"
    assert flow.overrides("target", "admin")["request.timeout.ms"][0] == "900"  # generic: both


@pytest.mark.parametrize("order", [0, 1, 2])
def test_a_flow_producer_override_is_the_target_producer_setting_and_wins_in_any_order(order):
    """``A->B.producer.override.*`` is Connect's override of the producer that writes MM2's
    replicated records (taken by default since Kafka 3.0, KIP-722), as in Strimzi's MM2 configs.
    It was ignored with a warning; it beats ``A->B.target.producer.*`` and ``A->B.producer.*``."""
    lines = [
        ("A->B.producer.linger.ms", "70"),
        ("A->B.target.producer.linger.ms", "7"),
        ("A->B.producer.override.linger.ms", "5"),
    ]
    lines = lines[order:] + lines[:order]
    config = parse_config(
        {**BASE, **dict(lines), "A->B.producer.override.compression.type": "zstd"}
    )
    flow = config.flow("A->B")
    producer = flow.overrides("target", "producer")
    assert producer["linger.ms"] == ("5", "A->B.producer.override.linger.ms")
    built = client_config(config.cluster("B"), "producer", overrides=producer)
    assert (built["linger.ms"], built["compression.type"]) == ("5", "zstd")
    assert "linger.ms" not in flow.overrides("source", "consumer")


def test_a_producer_override_is_checked_like_the_producer_setting():
    config = parse_config({**BASE, "A->B.enabled": "true", "A->B.producer.override.acks": "1"})
    with pytest.raises(ConfigError, match=r"A->B\.producer\.override\.acks.*all or unset"):
        check_clients(config)


@pytest.mark.parametrize(
    "key", ["A->B.consumer.override.fetch.min.bytes", "B.producer.override.linger.ms",
            "producer.override.linger.ms"],
)  # fmt: skip
def test_other_connect_overrides_stay_ignored_with_a_warning_that_names_the_one_taken(key):
    """MM2 takes none of these: a source connector has no Connect consumer, and only a flow's
    connector config holds Connect overrides."""
    config = parse_config({**BASE, "A->B.enabled": "true", key: "5"})
    notes = check_clients(config)
    assert any(f"{key} is ignored" in n and "producer.override" in n for n in notes), notes


def test_the_flow_client_listing_leaves_out_what_a_warning_calls_ignored():
    """`mirror validate` lists a flow's client settings; one the client never gets (ignored, or
    librdkafka has it only for another role) is left out, and its warning says why."""
    config = parse_config(
        {
            **BASE,
            "A->B.enabled": "true",
            "A->B.producer.linger.ms": "5",
            "A->B.producer.session.timeout.ms": "10000",  # a consumer setting
            "A->B.consumer.fetch.max.wait.ms": "100",  # renamed, still listed
            "A->B.consumer.max.poll.records": "50",  # ignored
        }
    )
    clients = describe_flow(config.flow("A->B"))["clients"]
    assert {s: sorted(v) for s, v in clients.items()} == {
        "source consumer": ["fetch.max.wait.ms"],
        "target producer": ["linger.ms"],
    }
    notes = check_clients(config)
    assert any("A->B.producer.session.timeout.ms is ignored" in n for n in notes), notes
    assert any("A->B.consumer.max.poll.records is ignored" in n for n in notes), notes


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("transforms", "transforms"),
        ("A->B.transforms", "transforms"),
        ("predicates", "predicates"),
        ("A->B.predicates", "predicates"),
    ],
)
def test_transforms_are_refused_since_records_are_copied_unchanged(key, name):
    extra = {key: "a, b", f"{name}.a.type": "org.apache.kafka.connect.transforms.Filter"}
    with pytest.raises(ConfigError) as err:
        parse_config({**BASE, **extra})
    assert err.value.key == key
    assert err.value.value == "a, b"
    assert "copies records unchanged" in err.value.expected
    assert f"remove {name}" in err.value.expected


def test_transform_sub_keys_without_transforms_are_one_warning_not_unknown_keys():
    config = cfg(
        **{
            "transforms": "",
            "transforms.a.type": "x.Filter",
            "A->B.predicates.p.type": "x.Pred",
        }
    )
    assert config.unknown_keys == ()
    [warning] = [w for w in config.warnings if "transforms" in w]
    assert warning.startswith("transforms.a.type, A->B.predicates.p.type are ignored")


def test_regex_lists_are_one_pattern_joined_with_a_bar_as_in_mm2():
    from mirror_lib.config.stale import SkipPolicy

    config = cfg(
        **{
            "A->B.groups": "(billing, shipping)-consumers",
            "A->B.mirror.on.gap": "skip",
            "A->B.mirror.skip.older.than.ms": "1000",
            "A->B.mirror.skip.topics": "(logs, metrics)-.*",
        }
    )
    s = config.flow("A->B").settings
    assert s.groups == ("(billing", "shipping)-consumers")  # MM2's LIST items
    assert s.describe()["groups"] == "(billing, shipping)-consumers"
    assert SkipPolicy.from_settings(s).applies_to("logs-1")
    assert not SkipPolicy.from_settings(s).applies_to("orders")


@pytest.mark.parametrize("key", ["A->B.topics", "topics.exclude", "mirror.skip.topics"])
def test_a_comma_splitting_a_regex_is_refused_before_anything_starts(key):
    with pytest.raises(ConfigError) as err:
        cfg(**{key: "orders-v[0-9]{1,2}, payments"})
    assert err.value.key == key
    assert "joins the items with '|'" in err.value.expected


def test_a_latin_1_file_is_read_as_mm2_reads_it_and_a_bom_is_dropped(tmp_path):
    latin = tmp_path / "latin1.properties"
    latin.write_bytes(
        b"# caf\xe9\nclusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b\xe9:1\n"
    )
    assert load_config(latin).cluster("B").bootstrap_servers == "b\u00e9:1"
    bom = tmp_path / "bom.properties"
    bom.write_bytes(
        b"\xef\xbb\xbfclusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
    )
    assert load_config(bom).cluster("B").bootstrap_servers == "b:1"


def test_top_level_bootstrap_servers_is_the_default_of_every_cluster():
    config = parse_config(
        {"clusters": "A, B", "bootstrap.servers": "x:1", "A.bootstrap.servers": "a:1"}
    )
    assert config.cluster("A").bootstrap_servers == "a:1"
    assert config.cluster("B").bootstrap_servers == "x:1"
    assert config.unknown_keys == ()


@pytest.mark.parametrize(
    ("props", "expected", "ignored"),
    [
        (
            {"topics.exclude": "secret.*", "A->B.topics.blacklist": "tmp.*"},
            "secret.*",
            "A->B.topics.blacklist",
        ),
        (
            {"topics.blacklist": "tmp.*", "topics.exclude": "secret.*"},
            "secret.*",
            "topics.blacklist",
        ),
        ({"A->B.topics.exclude": "secret.*", "topics.blacklist": "tmp.*"}, "secret.*", None),
        ({"topics.blacklist": "tmp.*", "A->B.topics.blacklist": "secret.*"}, "secret.*", None),
    ],
)
def test_the_current_name_beats_a_deprecated_alias_at_any_level(props, expected, ignored):
    config = cfg(**props)
    assert config.flow("A->B").settings.topics_exclude == (expected,)
    alias_warnings = [w for w in config.warnings if "deprecated" in w]
    if ignored is None:
        assert alias_warnings == []
    else:
        assert alias_warnings[0].startswith(f"{ignored} is ignored")


@pytest.mark.parametrize(
    ("key", "hint"), [("topics.whitelist", "topics"), ("A->B.groups.whitelist", "groups")]
)
def test_mirror_maker_1_whitelists_point_to_the_mm2_include_list(key, hint):
    from mirror_lib.config.describe import describe_config

    config = cfg(**{key: "orders.*"})
    assert key not in config.unknown_keys
    warnings = describe_config(config)["warnings"]
    assert any(w.startswith(key) and f"did you mean {hint!r}" in w for w in warnings)
    assert not any("exclude" in w for w in warnings)


def test_references_in_flow_settings_are_resolved_when_parsing(monkeypatch, tmp_path):
    monkeypatch.setenv("MM2_TOPICS", "orders, payments")
    (tmp_path / "flow.properties").write_text("sync = true\n")
    config = cfg(
        **{
            "A->B.topics": "${env:MM2_TOPICS}",
            "sync.group.offsets.enabled": f"${{file:{tmp_path}/flow.properties:sync}}",
        }
    )
    s = config.flow("A->B").settings
    assert s.topics == ("orders", "payments")
    assert s.sync_group_offsets
    assert config.properties["A->B.topics"] == "${env:MM2_TOPICS}"  # the raw file stays raw


def test_a_bad_resolved_flow_setting_names_the_reference_not_its_value(monkeypatch):
    monkeypatch.setenv("SYNC_FLAG", "hunter2")
    with pytest.raises(ConfigError) as err:
        cfg(**{"sync.group.offsets.enabled": "${env:SYNC_FLAG}"})
    assert err.value.value == "${env:SYNC_FLAG}"
    assert "true or false (as the value that ${env:SYNC_FLAG} resolves to)" in str(err.value)
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("A->B.topics", "${secret:kafka/topics}", "only in client settings"),
        ("A->B.enabled", "${env:NOPE_ENABLED}", "environment variable NOPE_ENABLED"),
        ("mirror.state.dir", "${env:STATE}", "not in clusters, mirror.state.dir"),
        ("clusters", "${env:CLUSTERS}", "not in clusters, mirror.state.dir"),
        ("mirror.tables.enabled", "${env:TABLES}", "process-wide mirror.* keys"),
    ],
)
def test_references_that_cannot_be_resolved_when_parsing_are_refused(
    monkeypatch, key, value, expected
):
    monkeypatch.delenv("NOPE_ENABLED", raising=False)
    with pytest.raises(ConfigError) as err:
        cfg(**{key: value})
    assert err.value.key == key
    assert expected in err.value.expected


def test_group_sync_without_emitted_checkpoints_is_a_warning_naming_both_keys():
    """MM2 syncs group offsets from the checkpoints it writes: without them, nothing is synced."""
    config = cfg(**{"A->B.emit.checkpoints.enabled": "false", "sync.group.offsets.enabled": "true"})
    (warning,) = [w for w in config.warnings if "sync.group.offsets.enabled" in w]
    assert warning.startswith("A->B:") and "emit.checkpoints.enabled = false" in warning
    assert not cfg(**{"A->B.emit.checkpoints.enabled": "false"}).warnings


def test_a_key_set_twice_is_warned_with_its_lines_and_the_last_value_is_used(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\n"
        "A.bootstrap.servers = a:9092\n"
        "B.bootstrap.servers = b:9092\n"
        "B.sasl.mechanism = PLAIN\n"
        "B.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerLoginModule required;\n"
        "# Google's migration example has both lines; Java keeps the last\n"
        "B.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule \\\n"
        '    required username="u" password="s3cret";\n'
        "A->B.enabled = true\n"
    )
    config = load_config(path)
    assert config.warnings[0] == (
        "B.sasl.jaas.config is set 2 times (lines 5, 7): the last one is used, as Java does"
    )
    assert "s3cret" not in " ".join(config.warnings)
    assert client_config(config.cluster("B"), "producer")["sasl.username"] == "u"


def test_relative_client_files_reach_the_executors_as_absolute_paths(tmp_path, monkeypatch):
    """An executor's Python worker starts in its own work folder, not the driver's."""
    from mirror_lib.config.parse import resolved_flow_properties

    monkeypatch.chdir(tmp_path)
    given = {
        **BASE,
        "A.ssl.ca.location": "certs/ca.pem",
        "A->B.target.producer.ssl.key.location": " key.pem",
        "B.ssl.ca.location": "probe",
        "B.ssl.keystore.location": "/abs/store.p12",
        "B.ssl.truststore.location": "dbfs:/Volumes/x/trust.jks",
        "offset-syncs.topic.location": "target",
    }
    shipped = resolved_flow_properties(given)
    assert shipped["A.ssl.ca.location"] == str(tmp_path / "certs" / "ca.pem")
    assert shipped["A->B.target.producer.ssl.key.location"] == str(tmp_path / "key.pem")
    kept = ("B.ssl.ca.location", "B.ssl.keystore.location", "B.ssl.truststore.location")
    for key in (*kept, "offset-syncs.topic.location"):
        assert shipped[key] == given[key]
