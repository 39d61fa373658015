"""JKS, JCEKS and PKCS12 stores that keytool wrote are read as Java reads them, into the PEM
settings librdkafka takes: truststores into ``ssl.ca.pem``, a JKS keystore into
``ssl.certificate.pem`` + ``ssl.key.pem``. Wrong passwords and stores librdkafka cannot be given
are refused on the key that is wrong, never showing a password."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, load_pem_private_key

from mirror_lib.config.java_clients import translate
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.client_check import check_client_builds
from tests.helpers import keytool
from tests.helpers.tls_material import Material, self_signed, write
from tests.unit.config.test_java_clients import props


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two CAs; truststores of both in each format; a client key in JKS and JCEKS keystores (key
    password != store password, and ==), and a JKS keystore with two keys."""
    d = tmp_path_factory.mktemp("stores")
    ca1, ca2, client, other = (self_signed(n) for n in ("ca-one", "ca-two", "client", "other"))
    cas = {"ca1": write(d / "ca1.pem", ca1.cert_pem), "ca2": write(d / "ca2.pem", ca2.cert_pem)}
    out: dict[str, Any] = {"cas": (ca1, ca2), "client": client, "dir": d}
    for kind in ("JKS", "JCEKS", "PKCS12"):
        out[f"trust.{kind}"] = keytool.truststore(d / f"trust.{kind}", kind, "changeit", cas)
    p12 = write(d / "client.p12", client.p12("p12pass"))
    out["key.JKS"] = keytool.keystore(d / "key.jks", "JKS", p12, "p12pass", "storepass", "keypass1")
    out["key.JCEKS"] = keytool.keystore(
        d / "key.jceks", "JCEKS", p12, "p12pass", "storepass", "keypass1"
    )
    out["same.JKS"] = keytool.keystore(
        d / "same.jks", "JKS", p12, "p12pass", "storepass", "storepass"
    )
    two = keytool.keystore(d / "two.jks", "JKS", p12, "p12pass", "storepass", "storepass")
    other_p12 = write(d / "other.p12", other.p12("p12pass", alias="other"))
    out["two.JKS"] = keytool.keystore(two, "JKS", other_p12, "p12pass", "storepass", "storepass")
    return out


def _certs(pem: str) -> list[bytes]:
    return [c.public_bytes(Encoding.DER) for c in x509.load_pem_x509_certificates(pem.encode())]


def _der(m: Material) -> bytes:
    return m.cert.public_bytes(Encoding.DER)


def _refused(given: dict[str, tuple[str, str]], match: str) -> ConfigError:
    """The ConfigError translating ``given`` raises (its message matching ``match``)."""
    with pytest.raises(ConfigError, match=match) as caught:
        translate(given, "producer")
    return caught.value


def _built(conf: dict[str, Any]) -> None:
    """librdkafka loads the settings (certificates and key), as a client of the run would."""
    Producer({**conf, "security.protocol": "SSL", "bootstrap.servers": "127.0.0.1:9"}).flush(0)


@pytest.mark.parametrize("kind", ["JKS", "JCEKS", "PKCS12"])
def test_a_truststore_becomes_the_pem_of_its_trusted_certificates(stores, kind):
    conf, notes = translate(
        props(ssl__truststore__location=str(stores[f"trust.{kind}"]),
              ssl__truststore__password="changeit"), "consumer")  # fmt: skip
    ca1, ca2 = stores["cas"]
    assert sorted(_certs(conf["ssl.ca.pem"])) == sorted([_der(ca1), _der(ca2)])
    assert "ssl.ca.location" not in conf and not notes
    _built(conf)


@pytest.mark.parametrize("kind", ["JKS", "JCEKS"])
def test_a_jks_truststore_opens_without_a_password_as_java_does(stores, kind):
    conf, _ = translate(props(ssl__truststore__location=str(stores[f"trust.{kind}"])), "consumer")
    assert len(_certs(conf["ssl.ca.pem"])) == 2


@pytest.mark.parametrize("kind", ["JKS", "JCEKS", "PKCS12"])
def test_a_wrong_truststore_password_is_refused_on_its_key_unshown(stores, kind):
    given = props(ssl__truststore__location=str(stores[f"trust.{kind}"]),
                  ssl__truststore__password="n0t-it")  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        translate(given, "consumer")
    assert caught.value.key == "A.ssl.truststore.password"
    assert "n0t-it" not in str(caught.value) and "does not open" in str(caught.value)


def test_a_pkcs12_truststore_needs_its_password(stores):
    with pytest.raises(ConfigError) as caught:
        translate(props(ssl__truststore__location=str(stores["trust.PKCS12"])), "consumer")
    assert caught.value.key == "A.ssl.truststore.password"
    assert "encrypted" in caught.value.expected


def test_a_keystore_used_as_truststore_trusts_its_key_entry_certificate(stores):
    conf, _ = translate(props(ssl__truststore__location=str(stores["key.JKS"])), "consumer")
    assert _certs(conf["ssl.ca.pem"]) == [_der(stores["client"])]


def test_a_jks_keystore_becomes_a_pem_key_and_chain_opened_with_the_key_password(stores):
    conf, notes = translate(
        props(ssl__keystore__location=str(stores["key.JKS"]), ssl__keystore__password="storepass",
              ssl__key__password="keypass1"), "producer")  # fmt: skip
    client = stores["client"]
    assert _certs(conf["ssl.certificate.pem"]) == [_der(client)]
    key = load_pem_private_key(conf["ssl.key.pem"].encode(), None)
    assert key.public_key().public_numbers() == client.key.public_key().public_numbers()
    assert not {"ssl.keystore.location", "ssl.keystore.password", "ssl.key.password"} & set(conf)
    assert not notes
    _built(conf)


def test_without_ssl_key_password_the_store_password_opens_the_key_as_in_kafka(stores):
    given = props(ssl__keystore__location=str(stores["same.JKS"]),
                  ssl__keystore__password="storepass")  # fmt: skip
    conf, _ = translate(given, "producer")
    assert load_pem_private_key(conf["ssl.key.pem"].encode(), None)
    given["ssl.keystore.location"] = (str(stores["key.JKS"]), "A.ssl.keystore.location")
    assert _refused(given, "Cannot recover key").key == "A.ssl.keystore.password"


def test_a_wrong_key_password_is_refused_on_ssl_key_password(stores):
    given = props(ssl__keystore__location=str(stores["key.JKS"]),
                  ssl__keystore__password="storepass", ssl__key__password="wrong-pw")  # fmt: skip
    error = _refused(given, "Cannot recover key")
    assert error.key == "A.ssl.key.password" and "wrong-pw" not in str(error)


def test_a_jks_keystore_without_any_password_is_refused():
    given = props(ssl__keystore__location=str(Path(__file__)), ssl__keystore__type="JKS")
    assert _refused(given, "always has one").key == "A.ssl.key.password"


def test_a_jceks_key_and_a_store_of_two_keys_get_the_conversion_command(stores):
    jceks = props(ssl__keystore__location=str(stores["key.JCEKS"]),
                  ssl__keystore__password="storepass", ssl__key__password="keypass1")  # fmt: skip
    _refused(jceks, r"PBEWithMD5AndTripleDES.*keytool -importkeystore")
    two = props(ssl__keystore__location=str(stores["two.JKS"]),
                ssl__keystore__password="storepass")  # fmt: skip
    _refused(two, r"one private key, and it holds 2 \('.*-srcalias <one key's alias>")


def test_pem_text_declared_jks_and_a_truncated_store_are_refused_with_the_way_out(stores, tmp_path):
    pem = write(tmp_path / "ca.jks", stores["client"].cert_pem)
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.type = PEM") as caught:
        translate(props(ssl__truststore__location=str(pem)), "consumer")
    assert caught.value.key == "A.ssl.truststore.location"
    cut = write(tmp_path / "cut.jks", stores["trust.JKS"].read_bytes()[:100])
    with pytest.raises(ConfigError, match=r"ends early.*keytool -exportcert -rfc"):
        translate(props(ssl__truststore__location=str(cut)), "consumer")


def _config(**settings: str) -> Any:
    base = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
            "A->B.enabled": "true", "A.security.protocol": "SSL"}  # fmt: skip
    return parse_config({**base, **settings})


def test_validate_reads_a_jks_truststore_whose_password_is_a_reference(stores, tmp_path):
    secret = write(tmp_path / "tls.properties", "trust = changeit\nkey = keypass1\n")
    config = _config(**{
        "A.ssl.truststore.location": str(stores["trust.JKS"]),
        "A.ssl.truststore.password": f"${{file:{secret}:trust}}",
        "B.security.protocol": "SSL",
        "B.ssl.truststore.location": str(stores["trust.PKCS12"]),
        "B.ssl.truststore.password": f"${{file:{secret}:trust}}",
        "B.ssl.keystore.location": str(stores["key.JKS"]),
        "B.ssl.keystore.password": "storepass",
        "B.ssl.key.password": f"${{file:{secret}:key}}",
    })  # fmt: skip
    report = check_client_builds(config)  # validate: A's CAs read, B's left for the run
    assert report.unresolved == ("ssl.ca.pem", "ssl.key.pem")
    assert check_client_builds(config, resolve=True).unresolved == ()  # a run opens them all


def test_a_store_not_on_this_machine_is_listed_by_validate_and_refused_by_a_run(tmp_path):
    gone = str(tmp_path / "gone.jks")
    config = _config(**{"A.ssl.truststore.location": gone, "A.ssl.keystore.location": gone,
                        "A.ssl.keystore.password": "storepass"})  # fmt: skip
    assert check_client_builds(config).absent == (
        f"ssl.ca.location ({gone})",
        f"ssl.keystore.location ({gone})",
    )
    with pytest.raises(ConfigError, match="no such file") as caught:
        check_client_builds(config, resolve=True)
    assert caught.value.key in ("A.ssl.truststore.location", "A.ssl.keystore.location")


def test_a_certificate_openssl_refuses_is_named_by_the_store_location(stores, tmp_path):
    data = bytearray(stores["trust.JKS"].read_bytes())
    at = data.index(b"X.509") + 5 + 4  # the first certificate's DER, after its type and length
    data[at : at + 4] = b"\x04\x00\x00\x00"  # no longer a SEQUENCE; unchecked without a password
    broken = write(tmp_path / "broken.jks", bytes(data))
    config = _config(**{"A.ssl.truststore.location": str(broken)})
    with pytest.raises(ConfigError, match="librdkafka refused") as caught:
        check_client_builds(config, resolve=True)
    assert caught.value.key == "A.ssl.truststore.location"
