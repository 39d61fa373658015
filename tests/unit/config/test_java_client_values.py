"""Java client values read as Java reads them: trimmed, inline PEM with line continuations, key
stores by content, JAAS options never dropped silently, empty values of unused settings."""

from __future__ import annotations

import pytest

from mirror_lib.config.jaas import translate_jaas
from mirror_lib.config.java_clients import java_names, java_trim, translate
from mirror_lib.config.tls_stores import normalize_pem
from mirror_lib.errors import ConfigError
from tests.helpers.tls_material import JKS_MAGIC, continued, self_signed, write
from tests.unit.config.test_java_clients import props

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


# 1. trailing whitespace


def test_values_are_trimmed_as_java_configdef_trims_them():
    conf, _ = translate(
        props(
            security__protocol="SSL ",
            ssl__keystore__location="/k.p12\t",
            ssl__keystore__type="PKCS12",
            ssl__keystore__password="changeit ",
            ssl__truststore__type="PEM",
            ssl__truststore__location="/ca.pem ",
            linger__ms=" 5 ",
        ),
        "producer",
    )
    assert conf["ssl.keystore.password"] == "changeit"
    assert conf["ssl.keystore.location"] == "/k.p12"
    assert conf["ssl.ca.location"] == "/ca.pem"
    assert conf["linger.ms"] == "5"
    assert java_trim("\u00a0x \r\n") == "\u00a0x"  # String.trim() removes only <= U+0020


def test_a_blank_endpoint_algorithm_still_disables_hostname_checks():
    conf, _ = translate(
        props(security__protocol="SSL", ssl__endpoint__identification__algorithm="  "), "admin"
    )
    assert conf["ssl.endpoint.identification.algorithm"] == "none"


# 2. inline PEM written with line continuations


@pytest.mark.parametrize("separator", [" ", ""])
def test_inline_pem_joined_by_continuations_is_rewrapped(separator):
    tls = self_signed()
    two = tls.cert_pem + self_signed("other").cert_pem
    assert normalize_pem(continued(tls.cert_pem, separator)) == tls.cert_pem
    assert normalize_pem(continued(two, separator)) == two
    conf, _ = translate(
        props(
            security__protocol="SSL",
            ssl__truststore__type="PEM",
            ssl__truststore__certificates=continued(tls.cert_pem, separator),
            ssl__keystore__type="PEM",
            ssl__keystore__certificate__chain=continued(tls.cert_pem, separator),
            ssl__keystore__key=continued(tls.key_pem, separator),
        ),
        "consumer",
    )
    assert conf["ssl.ca.pem"] == tls.cert_pem
    assert conf["ssl.certificate.pem"] == tls.cert_pem
    assert conf["ssl.key.pem"] == tls.key_pem


def test_librdkafka_pem_settings_are_rewrapped_and_other_text_is_left_alone():
    tls = self_signed()
    conf, _ = translate(props(ssl__ca__pem=continued(tls.cert_pem)), "consumer")
    assert conf["ssl.ca.pem"] == tls.cert_pem
    legacy = (
        "-----BEGIN RSA PRIVATE KEY----- Proc-Type: 4,ENCRYPTED abc -----END RSA PRIVATE KEY-----"
    )
    assert normalize_pem(legacy) == legacy
    assert normalize_pem("${dir:/certs:ca.pem}") == "${dir:/certs:ca.pem}"


# 3. JAAS options: translated, refused or warned


def test_kerberos_service_name_is_translated_and_other_options_warned():
    notes: list[str] = []
    conf = translate_jaas(
        f'{KRB5} required useKeyTab=true storeKey=true keyTab="/k.keytab" principal="mm2@EX" '
        'serviceName="kafka-prod" useTicketCache=true;',
        "A.sasl.jaas.config",
        notes,
    )
    assert conf["sasl.kerberos.service.name"] == "kafka-prod"
    assert notes == [
        "A.sasl.jaas.config: Krb5LoginModule option(s) useTicketCache ignored: librdkafka logs "
        "in with `kinit` and the keytab (sasl.kerberos.kinit.cmd) and re-logins by itself "
        "(sasl.kerberos.min.time.before.relogin)"
    ]


def test_conflicting_kerberos_service_names_are_refused_as_kafka_does():
    jaas = f'{KRB5} required useKeyTab=true keyTab="/k" principal="p" serviceName="kafka-prod";'
    conf, _ = translate(
        props(sasl__jaas__config=jaas, sasl__kerberos__service__name="kafka-prod"), "admin"
    )
    assert conf["sasl.kerberos.service.name"] == "kafka-prod"
    with pytest.raises(
        ConfigError, match=r"A\.sasl\.kerberos\.service\.name = 'kafka'.*serviceName"
    ):
        translate(props(sasl__jaas__config=jaas, sasl__kerberos__service__name="kafka"), "admin")


def test_scram_delegation_tokens_are_refused_never_dropped():
    with pytest.raises(ConfigError, match="delegation token") as err:
        translate_jaas(f'{SCRAM} required username="id" password="hmac" tokenauth=true;')
    assert "hmac" not in str(err.value)
    notes: list[str] = []
    conf = translate_jaas(f'{SCRAM} required username=u password=p tokenauth="false";', "k", notes)
    assert conf == {"sasl.username": "u", "sasl.password": "p"} and notes == []


def test_unknown_options_are_named_in_one_warning_without_values():
    notes: list[str] = []
    translate_jaas(f'{SCRAM} required username=u password=p debug=true color="s3cret";', "k", notes)
    assert notes == [
        "k: ScramLoginModule option(s) debug, color ignored: librdkafka has no equivalent"
    ]
    _, found = translate(
        props(sasl__jaas__config=f"{SCRAM} required username=u password=p x=y;"), "admin"
    )
    assert any("option(s) x ignored" in n for n in found)


def test_oidc_extensions_become_librdkafka_extensions():
    conf = translate_jaas(
        f"{OAUTH} required clientId=c clientSecret=s extension_logicalCluster=lkc-1 "
        "extension_identityPoolId=pool-2;"
    )
    assert conf["sasl.oauthbearer.extensions"] == "logicalCluster=lkc-1,identityPoolId=pool-2"


# 5. key stores: the content decides between JKS and PKCS12


@pytest.mark.parametrize("declared", [None, "JKS"])
def test_a_pkcs12_file_named_jks_is_read_as_pkcs12(tmp_path, declared):
    path = write(tmp_path / "keystore.jks", self_signed().p12("changeit"))
    given = {"ssl.keystore.location": str(path), "ssl.keystore.password": "changeit"}
    if declared:
        given["ssl.keystore.type"] = declared
    conf, _ = translate({k: (v, f"A.{k}") for k, v in given.items()}, "producer")
    assert conf == {"ssl.keystore.location": str(path), "ssl.keystore.password": "changeit"}


def test_a_real_jks_is_read_as_jks_whatever_its_declared_type(tmp_path):
    path = write(tmp_path / "keystore.p12", JKS_MAGIC + b"\x00\x00\x00\x02")
    with pytest.raises(ConfigError, match=r"a keystore Java .*ends early.*-srcstoretype JKS"):
        translate(
            props(ssl__keystore__location=str(path), ssl__keystore__type="PKCS12",
                  ssl__keystore__password="changeit"), "producer")  # fmt: skip
    trust = write(tmp_path / "truststore.jks", self_signed().p12("changeit"))
    with pytest.raises(ConfigError, match=r"encrypted") as caught:
        translate(props(ssl__truststore__location=str(trust)), "producer")
    assert caught.value.key == "A.ssl.truststore.password"  # read as PKCS12: needs the password


# 6. empty values of settings the security protocol does not use


def test_empty_unused_sasl_and_ssl_values_are_not_set_with_one_warning():
    conf, notes = translate(
        props(
            security__protocol="PLAINTEXT",
            sasl__mechanism="",
            sasl__jaas__config=" ",
            ssl__truststore__location="",
            ssl__keystore__password="",
        ),
        "consumer",
    )
    assert conf == {"security.protocol": "PLAINTEXT"}
    assert notes == [
        "A.sasl.mechanism, A.sasl.jaas.config, A.ssl.truststore.location, "
        "A.ssl.keystore.password: empty and unused with A.security.protocol = PLAINTEXT; "
        "treated as not set"
    ]


def test_empty_values_the_protocol_uses_are_still_refused():
    with pytest.raises(ConfigError, match=r"A\.sasl\.mechanism = ''"):
        translate(props(security__protocol="SASL_SSL", sasl__mechanism=""), "consumer")
    conf, notes = translate(
        props(security__protocol="SASL_PLAINTEXT", sasl__mechanism="PLAIN", ssl__key__password=""),
        "consumer",
    )
    assert "ssl.key.password" not in conf
    assert notes and "A.ssl.key.password: empty and unused" in notes[0]


def test_errors_of_built_clients_find_the_java_name():
    assert java_names("ssl.ca.pem") == (
        "ssl.ca.pem",
        "ssl.truststore.certificates",
        "ssl.truststore.location",
    )
    assert "max.request.size" in java_names("message.max.bytes")
    assert "sasl.jaas.config" in java_names("sasl.kerberos.service.name")
