"""Unit tests of the Java -> librdkafka client table, JAAS parsing and MM2 config providers."""

from __future__ import annotations

import pytest

from mirror_lib.config.jaas import parse_jaas
from mirror_lib.config.java_clients import IGNORED, RENAMED, translate
from mirror_lib.config.librdkafka_conf import PROPERTIES
from mirror_lib.config.model import CopyWarning
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.client_check import client_specs
from mirror_lib.kafka.clients import _translate_jaas, check_clients, client_config

BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
}
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def cfg(**extra: str):
    return parse_config({**BASE, **extra})


def props(**kv: str) -> dict[str, tuple[str, str]]:
    return {k.replace("__", "."): (v, "A." + k.replace("__", ".")) for k, v in kv.items()}


@pytest.mark.parametrize(
    "text",
    [
        f'{PLAIN} required username="alice" password="s3cret";',
        f"{PLAIN} required username=alice password=s3cret;",
        f"{PLAIN} required password='s3cret' username='alice' ;",
        f'{PLAIN} required\n  /* who */ username = alice // the user\n  password="s3cret";',
        f'{PLAIN} REQUIRED username="alice" password="s3\\cret";',
    ],
)
def test_jaas_forms_java_accepts(text):
    assert _translate_jaas(text) == {"sasl.username": "alice", "sasl.password": "s3cret"}


def test_jaas_quoted_values_keep_special_characters():
    entry = parse_jaas(f'{PLAIN} required username="a b" password=\'x";=y\' extra="\\"q\\"";')
    assert entry.options == {"username": "a b", "password": 'x";=y', "extra": '"q"'}


def test_jaas_other_login_modules():
    kerberos = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        'keyTab="/etc/security/mm2.keytab" principal="mm2@EXAMPLE.COM";'
    )
    assert _translate_jaas(kerberos) == {
        "sasl.kerberos.keytab": "/etc/security/mm2.keytab",
        "sasl.kerberos.principal": "mm2@EXAMPLE.COM",
    }
    oidc = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        "clientId='mm2' clientSecret='cs' scope='kafka';"
    )
    assert _translate_jaas(oidc) == {
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "mm2",
        "sasl.oauthbearer.client.secret": "cs",
        "sasl.oauthbearer.scope": "kafka",
    }
    with pytest.raises(ConfigError, match="more than one"):
        _translate_jaas(f"{PLAIN} required username=a password=b; {PLAIN} required;")


def test_renamed_and_converted():
    conf, notes = translate(
        props(
            buffer__memory="33554433",
            max__request__size="2097152",
            send__buffer__bytes="-1",
            compression__zstd__level="3",
        ),
        "producer",
    )
    assert conf == {
        "queue.buffering.max.kbytes": "32769",
        "message.max.bytes": "2097152",
        "socket.send.buffer.bytes": "0",
        "compression.level": "3",
    }
    assert notes == []


def test_every_table_target_is_a_librdkafka_property_and_ignored_names_are_not():
    assert all(name in PROPERTIES for name, _ in RENAMED.values())
    assert not set(RENAMED) & set(PROPERTIES)
    # deliberately ignored although librdkafka has the name: share consumers only / class names
    assert set(IGNORED) & set(PROPERTIES) == {"max.poll.records", "partition.assignment.strategy"}


def test_role_specific_keys():
    # set at cluster level: left out of the roles it does not apply to, silently
    conf, notes = translate(props(linger__ms="5", fetch__min__bytes="1"), "admin")
    assert conf == {} and notes == []
    # set for the role itself: a warning
    conf, notes = translate(props(linger__ms="5"), "consumer", frozenset({"linger.ms"}))
    assert conf == {}
    assert notes == ["A.linger.ms is ignored: librdkafka's consumer has no linger.ms"]


def test_values_checked_against_librdkafka_ranges():
    with pytest.raises(ConfigError, match=r"A\.session\.timeout\.ms = 'soon'"):
        translate(props(session__timeout__ms="soon"), "consumer")
    with pytest.raises(ConfigError, match="read_committed"):
        translate(props(isolation__level="committed"), "consumer")
    conf, _ = translate(props(acks="all", enable__idempotence="TRUE"), "producer")
    assert conf == {"acks": "all", "enable.idempotence": "true"}
    conf, _ = translate(props(auto__offset__reset="none"), "consumer")
    assert conf == {"auto.offset.reset": "error"}


def test_unknown_client_key_is_ignored_once_with_the_closest_key_we_use():
    """MM2's Java clients drop a key they do not know ("supplied but isn't a known config")."""
    conf, notes = translate(props(linger__msec="5", xxx="yyy"), "producer")
    assert conf == {}
    assert notes == [
        "A.linger.msec is ignored: not a client setting librdkafka or mirror_lib knows (MM2's "
        'Java clients ignore it too, logging "supplied but isn\'t a known config"); did you '
        "mean 'linger.ms'?",
        "A.xxx is ignored: not a client setting librdkafka or mirror_lib knows (MM2's Java "
        'clients ignore it too, logging "supplied but isn\'t a known config")',
    ]
    _, notes = translate(props(checkpoints__replication__factor="1"), "admin")
    assert notes[0].endswith(
        "did you mean 'checkpoints.topic.replication.factor'? (a flow setting: set it at the top "
        "level or as <source>-><target>.checkpoints.topic.replication.factor)"
    )


@pytest.mark.parametrize(
    ("key", "changes"),
    [
        ("ssl.trust.store", "TLS"),
        ("sasl.user", "how the client logs in"),
        ("security.protocl", "encrypted and authenticated"),
        ("securty.protocol", "encrypted and authenticated"),
        ("enable.idempotance", "duplicates after a retry"),
        ("ack", "acknowledged before every replica"),
        ("max.in.flight.request.per.connection", "order after a retry"),
        ("isolation.levl", "aborted"),
    ],
)
def test_unknown_key_that_would_change_security_or_delivery_is_refused(key, changes):
    with pytest.raises(ConfigError, match="refused, not ignored") as caught:
        translate({key: ("s3cret", f"A.{key}")}, "producer")
    assert caught.value.key == f"A.{key}"
    assert changes in caught.value.expected


def test_java_cipher_names_are_refused():
    with pytest.raises(ConfigError, match="openssl ciphers -stdname"):
        translate(props(ssl__cipher__suites="TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"), "producer")


def test_references_are_left_unchecked_in_validate_and_resolved_when_built(monkeypatch):
    config = cfg(**{"A.producer.linger.ms": "${env:LINGER}", "A.sasl.jaas.config": "${env:JAAS}"})
    assert check_clients(config) == []
    monkeypatch.setenv("LINGER", "7")
    monkeypatch.setenv("JAAS", f"{PLAIN} required username=u password=p;")
    conf = client_config(config.cluster("A"), "producer")
    assert (conf["linger.ms"], conf["sasl.username"], conf["sasl.password"]) == ("7", "u", "p")
    monkeypatch.setenv("JAAS", f"{PLAIN} required username=u;")
    with pytest.raises(ConfigError, match=r"A\.sasl\.jaas\.config"):
        client_config(config.cluster("A"), "producer")


def test_declared_providers_any_alias(monkeypatch, tmp_path):
    (tmp_path / "pw").write_text("dir-secret")
    (tmp_path / "s.properties").write_text("pw = file-secret\n")
    monkeypatch.setenv("MM2_PW", "env-secret")
    config = cfg(
        **{
            "config.providers": "vault, files, environment",
            "config.providers.vault.class": "org.apache.kafka.common.config.provider."
            "DirectoryConfigProvider",
            "config.providers.files.class": "FileConfigProvider",
            "config.providers.environment.class": "org.apache.kafka.common.config.provider."
            "EnvVarConfigProvider",
            "config.providers.environment.param.allowlist.pattern": "MM2_.*",
            "A.sasl.password": f"${{vault:{tmp_path}:pw}}",
            "A.sasl.username": f"${{files:{tmp_path}/s.properties:pw}}",
            "B.sasl.password": "${environment:MM2_PW}",
            "B.sasl.username": "${environment:HOME}",
        }
    )
    a = client_config(config.cluster("A"), "consumer")
    assert (a["sasl.password"], a["sasl.username"]) == ("dir-secret", "file-secret")
    with pytest.raises(ConfigError, match=r"allowlist\.pattern"):
        client_config(config.cluster("B"), "consumer")


def test_provider_allowed_paths_and_unknown_classes(tmp_path):
    (tmp_path / "pw").write_text("x")
    config = cfg(
        **{
            "config.providers": "d",
            "config.providers.d.class": "DirectoryConfigProvider",
            "config.providers.d.param.allowed.paths": "/opt/kafka",
            "A.sasl.password": f"${{d:{tmp_path}:pw}}",
        }
    )
    with pytest.raises(ConfigError, match=r"allowed\.paths"):
        client_config(config.cluster("A"), "consumer")
    with pytest.raises(ConfigError, match=r"config\.providers\.v\.class"):
        cfg(**{"config.providers": "v", "config.providers.v.class": "com.acme.VaultProvider"})
    with pytest.raises(ConfigError, match=r"\$\{d:/path/dir:file\}"):
        cfg(**{"config.providers": "d", "config.providers.d.class": "DirectoryConfigProvider",
               "A.sasl.password": "${undeclared:x:y}"})  # fmt: skip


def test_delivery_conflicts_and_per_flow_client_settings():
    with pytest.raises(ConfigError, match=r"B\.producer\.max\.in\.flight"):
        check_clients(cfg(**{"B.producer.max.in.flight.requests.per.connection": "10"}))
    with pytest.raises(ConfigError, match=r"A->B\.producer\.enable\.idempotence"):
        check_clients(
            cfg(**{"A->B.producer.enable.idempotence": "false", "mirror.delivery": "exactly_once"})
        )
    config = cfg(**{"A->B.consumer.fetch.min.bytes": "1000", "A->B.target.admin.retries": "3"})
    flow = config.flow("A->B")
    assert flow.overrides("source", "consumer") == {
        "fetch.min.bytes": ("1000", "A->B.consumer.fetch.min.bytes")
    }
    assert check_clients(config) == [
        "A->B.target.admin.retries is ignored: librdkafka's admin has no retries"
    ]
    # admin.timeout.ms is an MM2 setting, never a client one
    config = cfg(**{"admin.timeout.ms": "5000", "A->B.admin.timeout.ms": "6000"})
    assert config.flow("A->B").settings.admin_timeout_ms == 6000
    assert "timeout.ms" not in client_config(config.cluster("A"), "admin")


def test_a_target_without_idempotent_producers_is_served_at_least_once():
    """OCI Streaming and other services without idempotent producers: at least once, with
    neither transactions nor idempotence, as MM2 runs the file; exactly once set explicitly is
    refused, naming the way out."""
    off = {"B.producer.enable.idempotence": "false"}
    by_default = cfg(**off)
    assert by_default.flow("A->B").settings.delivery == "at_least_once"
    assert by_default.flow("A->B").settings.commit_interval_ms == 1000  # at least once's default
    (said,) = [w for w in by_default.warnings if isinstance(w, CopyWarning)]
    assert said.startswith(
        "B.producer.enable.idempotence = false: flow A->B runs at least once, as MirrorMaker 2 "
        "runs this file, not exactly once (the default)"
    )
    assert check_clients(by_default) == []  # said once, at the top
    with pytest.raises(ConfigError) as caught:
        check_clients(cfg(**off, **{"mirror.delivery": "exactly_once"}))
    assert caught.value.key == "B.producer.enable.idempotence"
    assert "A->B.mirror.delivery = at_least_once" in caught.value.expected
    assert "delete that line (the flow then runs at least once" in caught.value.expected
    config = cfg(**off, **{"mirror.delivery": "at_least_once"})
    assert check_clients(config) == [
        "B.producer.enable.idempotence = false: flow A->B writes at least once without "
        "idempotence: a produce request retried after its acknowledgement was lost writes its "
        "records twice, and the copy counts each such duplicate in a warning"
    ]
    specs = client_specs(config)
    producers = {s.alias: s.conf for s in specs if s.role == "producer"}
    assert producers["B"]["enable.idempotence"] == "false"
    assert producers["B"]["max.in.flight.requests.per.connection"] == 1  # no reordering
    assert "transactional.id" not in producers["B"]
    assert producers["A"]["enable.idempotence"] is True  # B->A's heartbeats: A has them
    ok = {"mirror.delivery": "at_least_once", "B.producer.max.in.flight": "1"}
    check_clients(cfg(**off, **ok))
    for key, value, expected in (
        ("B.producer.max.in.flight", "5", "reorder the partition"),
        ("A->B.producer.acks", "1", "only the leader acknowledged"),
    ):
        with pytest.raises(ConfigError, match=expected) as caught:
            check_clients(cfg(**off, **{"mirror.delivery": "at_least_once", key: value}))
        assert caught.value.key == key


def test_alias_keys_are_honoured_not_passed_to_clients():
    config = cfg(**{"source.cluster.alias": "A", "A->B.target.cluster.alias": "B"})
    assert "cluster.alias" not in str(client_config(config.cluster("A"), "consumer"))
    assert (config.flow("A->B").mm2_source, config.flow("A->B").mm2_target) == ("A", "B")
    assert not [w for w in config.warnings if "cluster.alias" in w]  # the aliases themselves
    # another name is the one MM2 gives the cluster: the flow's own over a top-level one
    renamed = cfg(**{"source.cluster.alias": "dc1", "A->B.source.cluster.alias": "primary"})
    flow = renamed.flow("A->B")
    assert (flow.source, flow.mm2_source, flow.mm2_target) == ("A", "primary", "B")
    assert flow.policy().format_remote_topic(flow.mm2_source, "orders") == "primary.orders"
    assert renamed.flow("B->A").mm2_source == "dc1"  # the top-level one: every other flow
    with pytest.raises(ConfigError, match=r"A->B\.source\.cluster\.alias = ''"):
        cfg(**{"A->B.source.cluster.alias": ""})  # empty: only the pre-3.0 idiom


def test_the_property_list_is_the_installed_librdkafkas():
    from tests.tools.librdkafka_dump import configuration_table, parse_table

    try:
        table = configuration_table()
    except (OSError, RuntimeError) as exc:  # not the manylinux wheel: no bundled library
        pytest.skip(f"no bundled librdkafka to compare with: {exc}")
    assert parse_table(table) == PROPERTIES


def test_an_empty_credential_is_never_sent(monkeypatch):
    monkeypatch.setenv("EMPTY_PW", "")
    config = cfg(
        **{
            "A.security.protocol": "SASL_SSL",
            "A.sasl.username": "u",
            "A.sasl.password": "${env:EMPTY_PW}",
        }
    )
    assert check_clients(config) == []  # unresolved: nothing to say yet
    with pytest.raises(ConfigError, match=r"A\.sasl\.password = .*non-empty credential"):
        client_config(config.cluster("A"), "consumer")


def test_cluster_level_mm2_keys_are_warned_not_sent_to_clients():
    config = cfg(
        **{
            "A.replication.factor": "3",
            "A.admin.timeout.ms": "5000",
            "A.consumer.poll.timeout.ms": "500",
            "B.offset.flush.timeout.ms": "1000",
        }
    )
    assert "A.replication.factor is ignored: replication.factor is a flow setting" in " ".join(
        config.warnings
    )
    assert any(w.startswith("B.offset.flush.timeout.ms is ignored") for w in config.warnings)
    assert any(w.startswith("A.consumer.poll.timeout.ms is ignored") for w in config.warnings)
    assert check_clients(config) == []
    assert "timeout.ms" not in client_config(config.cluster("A"), "admin")


def test_store_passwords_are_used_or_warned_never_dropped_silently():
    conf, notes = translate(
        props(
            ssl__keystore__location="/k.p12",
            ssl__keystore__type="PKCS12",
            ssl__keystore__password="store",
            ssl__key__password="other",
        ),
        "producer",
    )
    assert conf == {"ssl.keystore.location": "/k.p12", "ssl.keystore.password": "store"}
    assert notes == [
        "A.ssl.key.password is ignored: a PKCS12 keystore's key is opened with "
        "ssl.keystore.password"
    ]
    conf, notes = translate(
        props(
            ssl__keystore__location="/k.pem",
            ssl__keystore__password="store",
            ssl__key__password="kp",
        ),
        "producer",
    )
    assert conf == {
        "ssl.certificate.location": "/k.pem",
        "ssl.key.location": "/k.pem",
        "ssl.key.password": "kp",
    }
    assert notes[0].startswith("A.ssl.keystore.password is ignored: a PEM keystore")
