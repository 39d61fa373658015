"""Every client a run builds is constructed offline by `mirror validate`: librdkafka's own
refusals (PEM, keystore passwords, SASL mechanisms) come before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from mirror_lib.app.cli import main
from mirror_lib.config.parse import load_config, parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.kafka import client_check
from mirror_lib.kafka.client_check import check_client_builds, client_specs
from tests.helpers.tls_material import properties_lines, self_signed, write

BASE = "clusters = A, B\nA.bootstrap.servers = a:9093\nB.bootstrap.servers = b:9092\n"
FLOW = "A->B.enabled = true\n"


def config_file(tmp_path: Path, text: str) -> Path:
    return write(tmp_path / "mm2.properties", BASE + text + FLOW)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("tls")
    material = self_signed()
    return {
        "material": material,
        "ca": write(folder / "ca.pem", material.cert_pem),
        "p12": write(folder / "client.p12", material.p12("changeit")),
    }


def test_validate_builds_the_clients_and_says_how_long_it_took(tmp_path, capsys):
    path = config_file(tmp_path, "")
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "clients: 6 built offline in " in out and " ms (nothing connected;" in out
    assert main(["validate", str(path), "--json"]) == 0
    assert '"built": 6' in capsys.readouterr().out


def test_nothing_connects_and_each_configuration_is_built_once(monkeypatch):
    built: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(client_check, "_construct", lambda role, conf: built.append((role, conf)))
    config = parse_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:1",
            "B.bootstrap.servers": "b:1",
            "A->B.enabled": "true",
            "A->B.offset-syncs.topic.location": "source",
        }
    )
    report = check_client_builds(config)
    assert not any("bootstrap.servers" in conf for _, conf in built)
    # A's idempotent producer (A->B's offset syncs, heartbeats B->A) is one configuration
    assert report.built == len(built) == 6
    specs = {(s.flow, s.alias, s.role) for s in client_specs(config)}
    assert ("A->B", "A", "producer") in specs  # offset syncs written on the source
    producer = next(s for s in client_specs(config) if s.alias == "B" and s.role == "producer")
    assert producer.conf["transactional.id"] == "mirror-A->B-0"  # exactly_once, as the run
    assert report.elapsed_ms > 0


def test_trailing_blanks_after_a_keystore_password_and_path_still_build(tmp_path, tls):
    path = config_file(
        tmp_path,
        f"A.security.protocol = SSL\nA.ssl.truststore.type = PEM\n"
        f"A.ssl.truststore.location = {tls['ca']} \nA.ssl.keystore.type = PKCS12\n"
        f"A.ssl.keystore.location = {tls['p12']}\nA.ssl.keystore.password = changeit \n",
    )
    assert check_client_builds(load_config(path)).built == 6


def test_inline_pem_written_with_line_continuations_builds(tmp_path, tls):
    material = tls["material"]
    path = config_file(
        tmp_path,
        "A.security.protocol = SSL\nA.ssl.truststore.type = PEM\nA.ssl.keystore.type = PEM\n"
        + properties_lines("A.ssl.truststore.certificates", material.cert_pem)
        + properties_lines("A.ssl.keystore.certificate.chain", material.cert_pem)
        + properties_lines("A.ssl.keystore.key", material.key_pem),
    )
    assert check_client_builds(load_config(path)).built == 6


def test_a_wrong_keystore_password_names_the_keystore_and_its_password(tmp_path, tls):
    path = config_file(
        tmp_path,
        f"A.security.protocol = SSL\nA.ssl.keystore.type = PKCS12\n"
        f"A.ssl.keystore.location = {tls['p12']}\nA.ssl.keystore.password = wrong\n",
    )
    with pytest.raises(ConfigError) as err:
        check_client_builds(load_config(path))
    text = str(err.value)
    assert text.startswith(f"A.ssl.keystore.location = '{tls['p12']}': expected a keystore")
    assert "A.ssl.keystore.password opens" in text
    assert "the consumer of cluster A (source of A->B)" in text
    assert "mac verify failure" in text  # librdkafka's own words
    assert "wrong" not in text.replace("wrong'", "")


def test_a_file_missing_here_is_named(tmp_path):
    path = config_file(
        tmp_path,
        "B.security.protocol = SSL\nB.ssl.truststore.type = PEM\n"
        f"B.producer.ssl.truststore.location = {tmp_path}/nope.pem\n",
    )
    config = load_config(path)
    with pytest.raises(ConfigError, match=r"B\.producer\.ssl\.truststore\.location = .*no such"):
        check_client_builds(config, resolve=True)  # mirror run: fails before anything starts
    report = check_client_builds(config)  # mirror validate may run on another machine: noted
    assert report.absent == (f"ssl.ca.location ({tmp_path}/nope.pem)",)
    assert "files not on this machine" in report.summary()


def _has_gssapi() -> bool:
    try:
        Producer({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}).close()
    except KafkaException:
        return False
    return True


@pytest.mark.skipif(_has_gssapi(), reason="this librdkafka has GSSAPI")
def test_kerberos_without_gssapi_in_this_build_is_refused_with_the_way_out(tmp_path):
    path = config_file(
        tmp_path,
        "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = GSSAPI\n"
        "A.sasl.jaas.config = com.sun.security.auth.module.Krb5LoginModule required "
        'useKeyTab=true keyTab="/k.keytab" principal="mm2@EX" serviceName="kafka-prod";\n',
    )
    with pytest.raises(ConfigError, match=r"^A\.sasl\.mechanism = 'GSSAPI'.*--no-binary"):
        check_client_builds(load_config(path))


def test_references_are_left_out_in_validate_and_loaded_when_resolved(tmp_path, tls, monkeypatch):
    path = config_file(
        tmp_path,
        "A.security.protocol = SASL_SSL\nA.sasl.mechanism = PLAIN\nA.ssl.truststore.type = PEM\n"
        "A.ssl.truststore.location = ${env:MIRROR_TEST_CA}\n"
        "A.sasl.jaas.config = ${env:MIRROR_TEST_JAAS}\n",
    )
    config = load_config(path)
    report = check_client_builds(config)
    assert report.unresolved == ("ssl.ca.location",)
    assert "still ${...} references: ssl.ca.location" in report.summary()
    monkeypatch.setenv(
        "MIRROR_TEST_JAAS",
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=p;",
    )
    monkeypatch.setenv("MIRROR_TEST_CA", str(tls["ca"]))
    assert check_client_builds(config, resolve=True).unresolved == ()
    monkeypatch.setenv("MIRROR_TEST_CA", str(tmp_path / "gone.pem"))
    with pytest.raises(ConfigError, match=r"A\.ssl\.truststore\.location = .*no such"):
        check_client_builds(config, ["A->B"], resolve=True)


def test_a_transactional_producer_delivery_timeout_is_lowered_to_its_transaction_timeout():
    """Java takes delivery.timeout.ms = 300000 with transactions; librdkafka refuses a message
    timeout above transaction.timeout.ms, so the run's producer gets the transaction's."""
    from mirror_lib.config.parse import parse_config
    from mirror_lib.kafka.clients import client_config

    base = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1"}
    config = parse_config({**base, "A->B.enabled": "true", "B.delivery.timeout.ms": "300000"})
    notes: list[str] = []
    txn = client_config(config.cluster("B"), "producer", extra={"transactional.id": "t"},
                        notes=notes)  # fmt: skip
    assert txn["delivery.timeout.ms"] == 60000
    assert notes and "B.delivery.timeout.ms = 300000 is lowered to 60000" in notes[0]
    plain = client_config(config.cluster("B"), "producer", notes=[])
    assert plain["delivery.timeout.ms"] == "300000"
    longer = parse_config({**base, "B.delivery.timeout.ms": "300000",
                           "B.transaction.timeout.ms": "400000"})  # fmt: skip
    kept = client_config(longer.cluster("B"), "producer", extra={"transactional.id": "t"})
    assert kept["delivery.timeout.ms"] == "300000"
    report = check_client_builds(config)  # builds: librdkafka would refuse 300000 > 60000
    assert any("lowered" in n for n in report.notes)


def test_a_short_transaction_timeout_lowers_our_socket_timeout_not_the_users():
    """librdkafka refuses a transactional producer whose socket.timeout.ms exceeds its
    transaction.timeout.ms + 100: our default yields; a user's own value is theirs to fix."""
    from mirror_lib.config.parse import parse_config
    from mirror_lib.kafka.clients import client_config

    base = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1"}
    short = parse_config({**base, "A->B.enabled": "true", "B.transaction.timeout.ms": "5000"})
    txn = client_config(short.cluster("B"), "producer", extra={"transactional.id": "t"})
    assert txn["socket.timeout.ms"] == 5100
    assert check_client_builds(short).notes == ()  # builds, and nothing to tell the user
    assert client_config(short.cluster("B"), "producer")["socket.timeout.ms"] == 30000
    theirs = parse_config({**base, "A->B.enabled": "true", "B.transaction.timeout.ms": "5000",
                           "B.socket.timeout.ms": "30000"})  # fmt: skip
    with pytest.raises(ConfigError, match=r"B\.socket\.timeout\.ms = '30000'"):
        check_client_builds(theirs)


def test_a_referenced_mechanism_or_cipher_list_is_left_out_not_given_a_stand_in(tmp_path):
    """librdkafka parses these when the client is made: a stand-in text would be refused."""
    path = config_file(
        tmp_path,
        "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = ${env:MIRROR_TEST_MECH}\n"
        "A.sasl.username = ${env:MIRROR_TEST_USER}\nA.sasl.password = ${env:MIRROR_TEST_PW}\n"
        "B.security.protocol = SSL\nB.ssl.cipher.suites = ${env:MIRROR_TEST_CIPHERS}\n",
    )
    report = check_client_builds(load_config(path))
    assert report.unresolved == ("sasl.mechanism", "ssl.cipher.suites")


def test_no_source_producer_is_built_without_offset_syncs():
    base = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1"}
    config = parse_config(
        {
            **base,
            "A->B.enabled": "true",
            "A->B.offset-syncs.topic.location": "source",
            "A->B.emit.offset-syncs.enabled": "false",
            "A->B.emit.checkpoints.enabled": "false",
            "A->B.sync.group.offsets.enabled": "false",
            "B->A.emit.heartbeats.enabled": "false",
        }
    )
    specs = {(s.flow, s.alias, s.role) for s in client_specs(config)}
    assert ("A->B", "A", "producer") not in specs
