"""Real MirrorMaker 2 configuration files (tests/configs/) work unchanged.

For each file: `mirror validate`'s exit code and message, and the librdkafka configuration each
client gets, built for real with confluent-kafka (Producer, Consumer and AdminClient objects need no
reachable broker to be constructed, but they do load certificates, keystores and check every key).
Certificates and keystores are generated at test time. ``@CERTS@``-style tokens in the files stand
for the folders the test creates.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from mirror_lib.app.cli import main
from mirror_lib.config.describe import internal_topics
from mirror_lib.config.model import ROLES, MirrorConfig
from mirror_lib.config.parse import load_config
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.client_check import check_client_builds
from mirror_lib.kafka.clients import check_clients, client_config
from tests.helpers import keytool
from tests.helpers.aws_env import offline_aws, token_url
from tests.helpers.fake_idp import b64url_json, fake_idp
from tests.helpers.gcp_env import EMAIL, offline_gcp, service_account_key

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
KEYPASS = "k3y-pass"


def _cert(subject: str, key: Any, issuer: str, issuer_key: Any, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(issuer_key, hashes.SHA256())
    )


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a client certificate and key as PEM (Java PEM keystore: key + chain) and PKCS12."""
    folder = tmp_path_factory.mktemp("certs")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test-ca", ca_key, "test-ca", ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _cert("mirror-client", key, "test-ca", ca_key, ca=False)
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    encrypted = key.private_bytes(
        pem,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEYPASS.encode()),
    )
    chain = cert.public_bytes(pem) + ca.public_bytes(pem)
    (folder / "client-keystore.pem").write_bytes(encrypted + chain)
    (folder / "client.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"mirror", key, cert, [ca], serialization.BestAvailableEncryption(b"changeit")
        )
    )
    cas = {"test-ca": folder / "ca.pem"}
    keytool.truststore(folder / "kafka.client.truststore.jks", "JKS", "changeit", cas)
    keytool.truststore(folder / "truststore.p12", "PKCS12", "changeit", cas)
    keytool.keystore(folder / "kafka.client.keystore.jks", "JKS", folder / "client.p12",
                     "changeit", "changeit", KEYPASS)  # fmt: skip
    (folder / "stackable").mkdir()  # as Stackable's secret-operator mounts them: empty passwords
    keytool.empty_password_pkcs12(folder / "client.p12", "changeit",
                                  folder / "stackable" / "keystore.p12")  # fmt: skip
    keytool.empty_password_pkcs12(folder / "truststore.p12", "changeit",
                                  folder / "stackable" / "truststore.p12")  # fmt: skip
    return folder


@pytest.fixture
def files(certs: Path, tmp_path: Path) -> dict[str, Path]:
    """The config files with their tokens replaced, plus the secret files they read."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "ccloud.properties").write_text(
        "api.key = CCLOUDKEY\napi.secret = cc/s3cr3t+x\nsr.user.info = SRKEY:sr/s3cr3t\n"
    )
    (secrets / "eventhubs.properties").write_text(
        "jaas = org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="$ConnectionString" password="Endpoint=sb://my-namespace.servicebus.windows.net/'
        ';SharedAccessKeyName=mirror;SharedAccessKey=eh-k3y=";\n'
    )
    strimzi = tmp_path / "strimzi"
    for cluster in ("my-source-cluster", "my-target-cluster"):
        folder = strimzi / "cluster-ca-certs" / f"{cluster}-cluster-ca-cert"
        folder.mkdir(parents=True)
        (folder / "ca.crt").write_text((certs / "ca.pem").read_text())
    (strimzi / "passwords" / "my-mirror-user").mkdir(parents=True)
    (strimzi / "passwords" / "my-mirror-user" / "password").write_text("strimzi-pw")
    tokens = {
        "@CERTS@": str(certs),
        "@KEYPASS@": KEYPASS,
        "@SECRETS@": str(secrets),
        "@STRIMZI@": str(strimzi),
        "@CA_PEM_INLINE@": (certs / "ca.pem").read_text().replace("\n", "\\n\\\n    "),
    }
    out = {}
    for path in CONFIGS.glob("*.properties"):
        text = path.read_text()
        for token, value in tokens.items():
            text = text.replace(token, value)
        out[path.stem] = tmp_path / path.name
        out[path.stem].write_text(text)
    return out


def validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["validate", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def build_all(config: MirrorConfig) -> dict[tuple[str, str], dict[str, Any]]:
    """Every cluster x role configuration, each constructed as a real confluent-kafka client."""
    built = {}
    for alias, cluster in config.clusters.items():
        for role in ROLES:
            conf = client_config(cluster, role, client_id=f"test|{alias}|{role}")
            real = {**conf, "bootstrap.servers": "127.0.0.1:9", "logger": _Quiet()}
            if role == "consumer":
                Consumer({**real, "group.id": "test"}).close()
            elif role == "producer":
                Producer(real).flush(0)
            else:
                AdminClient(real)
            built[alias, role] = conf
    return built


class _Quiet:
    def log(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return self.log


def test_tls_pem(files, capsys, certs):
    code, out, _ = validate(files["tls_pem"], capsys)
    assert code == 0
    assert "ssl.protocol is ignored" in out
    assert "ssl.enabled.protocols is ignored" in out
    assert KEYPASS not in out
    built = build_all(load_config(files["tls_pem"]))
    onprem = built["onprem", "producer"]
    assert onprem["ssl.ca.location"] == f"{certs}/ca.pem"
    assert onprem["ssl.certificate.location"] == f"{certs}/client-keystore.pem"
    assert onprem["ssl.key.location"] == f"{certs}/client-keystore.pem"
    assert onprem["ssl.key.password"] == KEYPASS
    assert onprem["security.protocol"] == "SSL"
    assert "ssl.endpoint.identification.algorithm" not in onprem
    assert built["cloud", "admin"]["ssl.endpoint.identification.algorithm"] == "none"
    assert not any(k.startswith("ssl.truststore") or k == "ssl.protocol" for k in onprem)


def test_tls_pkcs12(files, capsys, certs):
    code, _out, _ = validate(files["tls_pkcs12"], capsys)
    assert code == 0
    built = build_all(load_config(files["tls_pkcs12"]))
    primary = built["primary", "consumer"]
    assert primary["ssl.keystore.location"] == f"{certs}/client.p12"
    assert primary["ssl.keystore.password"] == "changeit"
    assert primary["ssl.ca.location"] == f"{certs}/ca.pem"
    assert built["dr", "producer"]["ssl.ca.pem"] == (certs / "ca.pem").read_text()


def test_a_wrong_keystore_password_fails_when_built(files, certs):
    config = load_config(files["tls_pkcs12"], **{"primary.ssl.keystore.password": "wrong"})
    conf = client_config(config.cluster("primary"), "producer")
    with pytest.raises(Exception, match=r"(?i)keystore|pkcs12|mac"):
        Producer({**conf, "bootstrap.servers": "127.0.0.1:9", "logger": _Quiet()})


def test_jks_truststore_and_keystore_are_read_as_java_reads_them(files, capsys, certs):
    code, out, err = validate(files["tls_jks_truststore"], capsys)
    assert code == 0, err
    assert "not loaded" not in out
    built = build_all(load_config(files["tls_jks_truststore"]))
    ca = (certs / "ca.pem").read_text()
    for alias in ("A", "B"):
        conf = built[alias, "producer"]
        assert conf["ssl.ca.pem"] == ca
        assert conf["ssl.certificate.pem"].count("BEGIN CERTIFICATE") == 2  # client + CA
        assert "PRIVATE KEY" in conf["ssl.key.pem"]
        assert not any(k.startswith(("ssl.keystore", "ssl.truststore")) for k in conf)


def test_a_pkcs12_truststore_is_read_with_its_password(files, capsys, certs):
    code, _out, err = validate(files["tls_pkcs12_truststore"], capsys)
    assert code == 0, err
    built = build_all(load_config(files["tls_pkcs12_truststore"]))
    assert built["B", "consumer"]["ssl.ca.pem"] == (certs / "ca.pem").read_text()


def test_pkcs12_stores_with_an_empty_password_are_read_as_java_reads_them(files, capsys, certs):
    """Stackable's default: librdkafka takes an empty ssl.keystore.password as none and refuses
    the keystore, so the store is read here into PEM, as JKS keystores are."""
    code, out, err = validate(files["stackable_pkcs12"], capsys)
    assert code == 0, err
    assert "not loaded" not in out
    config = load_config(files["stackable_pkcs12"])
    built = build_all(config)
    for alias in ("primary", "dr"):
        conf = built[alias, "producer"]
        assert conf["ssl.ca.pem"] == (certs / "ca.pem").read_text()
        assert conf["ssl.certificate.pem"].count("BEGIN CERTIFICATE") == 2  # client + CA
        assert "BEGIN PRIVATE KEY" in conf["ssl.key.pem"]
        assert not any(k.startswith(("ssl.keystore", "ssl.truststore")) for k in conf)
    assert check_client_builds(config, resolve=True).built == 6  # as mirror run builds them


def test_a_pkcs12_keystore_is_checked_by_validate_as_a_run_checks_it(files, capsys, tmp_path):
    """validate refuses what run refuses: a keystore without a password (Java refuses it, and
    librdkafka when the client is made) even when the store is not on the validating machine;
    a store that the empty password does not open, on the password's key."""
    text = files["stackable_pkcs12"].read_text()
    absent = tmp_path / "absent.properties"
    absent.write_text(text.replace("stackable/keystore.p12", "elsewhere/keystore.p12"))
    code, out, err = validate(absent, capsys)
    assert code == 0, err
    assert "files not on this machine" in out and "elsewhere/keystore.p12" in out
    unset = tmp_path / "unset.properties"
    unset.write_text(absent.read_text().replace("ssl.keystore.password =\n", ""))
    code, _out, err = validate(unset, capsys)
    assert code == 2
    assert "ssl.keystore.password = <missing>" in err
    assert "key store password is not specified" in err
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(text.replace("stackable/keystore.p12", "client.p12"))  # password changeit
    code, _out, err = validate(wrong, capsys)
    assert code == 2
    assert "ssl.keystore.password = '<redacted>'" in err and "does not open it" in err


def test_sasl_plain_and_scram_quoted_single_quoted_and_unquoted(files, capsys):
    code, out, _ = validate(files["sasl_plain_scram"], capsys)
    assert code == 0, out
    for secret in ("pl41n-s3cret", "Adm1nPass", "sc#ram;pass"):
        assert secret not in out
    built = build_all(load_config(files["sasl_plain_scram"]))
    legacy = built["legacy", "consumer"]
    assert (legacy["sasl.username"], legacy["sasl.password"]) == ("mirror", "pl41n-s3cret")
    admin = built["legacy", "admin"]
    assert (admin["sasl.username"], admin["sasl.password"]) == ("mm2admin", "Adm1nPass")
    central = built["central", "producer"]
    assert (central["sasl.username"], central["sasl.password"]) == ("mm2-central", "sc#ram;pass")
    assert central["sasl.mechanism"] == "SCRAM-SHA-512"
    assert "sasl.jaas.config" not in central


@pytest.mark.parametrize(
    ("jaas", "problem"),
    [
        ("org.x.PlainLoginModule required username=alice password=s3cret", "not ended by ';'"),
        ("org.x.PlainLoginModule required username=alice;", "non-empty password"),
        ('org.x.PlainLoginModule required username="" password="p";', "non-empty username"),
        ("org.x.PlainLoginModule required username='alice password=p;", "not closed"),
        ("org.x.PlainLoginModule username=a password=b;", "control flag"),
        ("com.acme.VaultLoginModule required token=t;", "PlainLoginModule, ScramLoginModule"),
    ],
)
def test_unparseable_jaas_is_refused_naming_the_key_never_an_empty_credential(
    files, capsys, tmp_path, jaas, problem
):
    path = tmp_path / "bad_jaas.properties"
    text = files["sasl_plain_scram"].read_text()
    path.write_text(text + f"\nlegacy.producer.sasl.jaas.config = {jaas}\n")
    code, _out, err = validate(path, capsys)
    assert code == 2
    assert "legacy.producer.sasl.jaas.config" in err
    assert problem in err
    assert "s3cret" not in err


def test_cloud_service_with_file_provider_secrets(files, capsys):
    code, out, _ = validate(files["cloud_secrets"], capsys)
    assert code == 0, out
    assert "CCLOUDKEY" not in out and "cc/s3cr3t" not in out and "SRKEY" not in out
    ignored = [line for line in out.splitlines() if "Schema Registry" in line]
    assert [line.split()[1] for line in ignored] == [
        "ccloud.schema.registry.url",
        "ccloud.basic.auth.credentials.source",
        "ccloud.basic.auth.user.info",
    ]
    built = build_all(load_config(files["cloud_secrets"]))
    ccloud = built["ccloud", "consumer"]
    assert not [k for k in ccloud if "schema" in k or "basic.auth" in k]
    assert (ccloud["sasl.username"], ccloud["sasl.password"]) == ("CCLOUDKEY", "cc/s3cr3t+x")
    assert ccloud["client.dns.lookup"] == "use_all_dns_ips"
    hubs = built["eventhubs", "producer"]
    assert hubs["sasl.username"] == "$ConnectionString"
    assert hubs["sasl.password"].endswith("SharedAccessKey=eh-k3y=")
    assert hubs["message.max.bytes"] == "1046528"
    assert hubs["request.timeout.ms"] == "60000"
    assert "request.timeout.ms" not in built["eventhubs", "consumer"]


def test_strimzi_generated_file(files, capsys, certs):
    code, out, err = validate(files["strimzi"], capsys)
    assert code == 0, err
    # Connect's override of the records' producer (MM2 applies it since Kafka 3.0): taken
    assert (
        "target producer: batch.size = 327680 (from my-source-cluster->my-target-cluster"
        ".producer.override.batch.size)" in out
    )
    assert "override" not in out.split("warning:", 1)[-1]
    assert "my-target-cluster.key.converter is ignored" in out
    config = load_config(files["strimzi"])
    flow = config.flow("my-source-cluster->my-target-cluster")
    assert flow.overrides("source", "consumer")["fetch.max.bytes"][0] == "52428800"
    built = build_all(config)
    source = built["my-source-cluster", "consumer"]
    assert source["ssl.ca.pem"] == (certs / "ca.pem").read_text()
    assert (source["sasl.username"], source["sasl.password"]) == ("my-mirror-user", "strimzi-pw")
    assert built["my-target-cluster", "admin"]["ssl.endpoint.identification.algorithm"] == "https"
    per_flow = client_config(
        config.cluster("my-source-cluster"),
        "consumer",
        overrides=flow.overrides("source", "consumer"),
    )
    assert per_flow["fetch.max.bytes"] == "52428800"
    producer = client_config(
        config.cluster("my-target-cluster"),
        "producer",
        overrides=flow.overrides("target", "producer"),
    )
    assert producer["batch.size"] == "327680"
    Consumer({**per_flow, "bootstrap.servers": "127.0.0.1:9", "group.id": "g"}).close()


def test_docker_demo_with_java_tuning_and_the_old_identity_idiom(files, capsys):
    code, out, _ = validate(files["docker_demo"], capsys)
    assert code == 0, out
    assert "would replicate" not in out or "-> orders" in out
    assert "IdentityReplicationPolicy" in out
    assert "source.consumer.max.poll.records is ignored" in out
    assert "source.consumer.key.deserializer is ignored" in out
    config = load_config(files["docker_demo"])
    flow = config.flow("source->target")
    assert flow.policy().format_remote_topic("source", "orders") == "orders"
    built = build_all(config)
    producer = built["target", "producer"]
    assert producer["queue.buffering.max.kbytes"] == "65536"
    assert producer["message.max.bytes"] == "5242880"
    assert producer["socket.send.buffer.bytes"] == "0"
    assert producer["compression.type"] == "lz4"
    assert producer["linger.ms"] == "20"
    consumer = built["source", "consumer"]
    assert consumer["fetch.wait.max.ms"] == "200"
    assert consumer["socket.receive.buffer.bytes"] == "1048576"
    assert "max.poll.records" not in consumer
    assert "cluster.alias" not in consumer


def test_keys_mm2s_clients_do_not_know_are_warned_once_with_the_key_we_use(files, capsys):
    """MM2 runs this file: its clients drop what they do not know. Each key is named once,
    with the closest key mirror_lib uses, and the file runs."""
    code, out, err = validate(files["operator_unknown_keys"], capsys)
    assert code == 0, err
    warnings = [line for line in out.splitlines() if line.startswith("warning: ")]
    for key, closest in (
        ("primary.xxx", None),
        ("consumer.group.prefix", "group.id"),
        ("primary.offsets.replication.factor", "offset-syncs.topic.replication.factor"),
        ("backup.checkpoints.replication.factor", "checkpoints.topic.replication.factor"),
        ("backup.heartbeats.replication.factor", "heartbeats.topic.replication.factor"),
    ):
        named = [w for w in warnings if w.startswith(f"warning: {key} is ignored: not a client")]
        assert len(named) == 1, (key, warnings)
        assert closest is None or f"did you mean {closest!r}?" in named[0]
    assert "warning: unknown key 'source.alias' is ignored" in warnings
    built = build_all(load_config(files["operator_unknown_keys"]))
    assert not any(
        "replication" in k or "xxx" in k or "prefix" in k for c in built.values() for k in c
    )


def test_oci_streaming_target_without_idempotent_producers(files, capsys, monkeypatch):
    """At least once, with neither transactions nor idempotence on the target's producers."""
    code, out, err = validate(files["oci_streaming"], capsys)
    assert code == 0, err
    assert "oci.producer.enable.idempotence = false: flow onprem->oci writes at least once" in out
    monkeypatch.setenv("OCI_AUTH_TOKEN", "t0ken")
    config = load_config(files["oci_streaming"])
    built = build_all(config)
    producer = built["oci", "producer"]
    assert (producer["enable.idempotence"], producer["message.max.bytes"]) == ("false", "1048576")
    assert producer["sasl.username"].endswith(
        "/ocid1.streampool.oc1.eu-frankfurt-1.amaaaaaaexample"
    )
    assert producer["sasl.password"] == "t0ken"
    assert check_client_builds(config, resolve=True).built == 6  # as mirror run builds them
    exactly_once = load_config(files["oci_streaming"], **{"mirror.delivery": "exactly_once"})
    with pytest.raises(ConfigError, match=r"onprem->oci\.mirror\.delivery = at_least_once"):
        check_clients(exactly_once)


def test_empty_separator_with_identity_naming_runs_under_mm2s_names(files, capsys):
    """MirrorMaker 2 runs this file: the internal topics and remote heartbeats lose their dots,
    and a take-over from it must find them under those names (MM2 4.3.1's own, read from its
    MirrorMakerConfig)."""
    code, out, err = validate(files["identity_empty_separator"], capsys)
    assert code == 0, err
    assert (
        "warning: replication.policy.separator is empty with IdentityReplicationPolicy: topics "
        "keep their names, and the names that join an alias with the separator have none, as "
        "MirrorMaker 2 names them (a take-over from it finds them): dc1heartbeats, "
        "mm2-offset-syncsdc1internal, dc1checkpointsinternal (with MM2's default '.': "
        "dc1.heartbeats, mm2-offset-syncs.dc1.internal, dc1.checkpoints.internal)"
    ) in out.splitlines()
    config = load_config(files["identity_empty_separator"])
    flow = config.flow("dc1->dc2")
    assert flow.policy().format_remote_topic("dc1", "orders") == "orders"
    assert internal_topics(flow)["checkpoints"]["topic"] == "dc1checkpointsinternal"
    mm2_location = load_config(
        files["identity_empty_separator"], **{"offset-syncs.topic.location": "source"}
    )
    assert internal_topics(mm2_location.flow("dc1->dc2"))["offset_syncs"] == {
        "topic": "mm2-offset-syncsdc2internal",  # MM2's default location: named by the target
        "cluster": "dc1",
    }
    build_all(config)


def test_a_top_level_source_alias_names_the_source_as_mm2_does(files, capsys):
    """MM2's dedicated mode puts a top-level source.cluster.alias into every flow's connectors
    (MM2 4.3.1's MirrorMakerConfig, tests/integration/test_mm2_names.py): its internal topics
    and heartbeats carry that name, and a take-over must find them."""
    code, out, err = validate(files["top_level_source_alias"], capsys)
    assert code == 0, err
    assert (
        "warning: source.cluster.alias = primary: as in MirrorMaker 2, flow dc-east->dc-west "
        "names its source 'primary', not 'dc-east'"
    ) in out
    assert "  checkpoints: primary:checkpoints:internal on dc-west" in out
    config = load_config(files["top_level_source_alias"])
    flow = config.flow("dc-east->dc-west")
    assert flow.mm2_source == "primary"
    assert flow.policy().format_remote_topic(flow.mm2_source, "heartbeats") == "primary:heartbeats"
    assert flow.policy().topic_source("orders") == "primary"  # identity: the configured alias
    build_all(config)


def test_old_idiom_needs_the_empty_source_alias(tmp_path, capsys):
    path = tmp_path / "sep.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "A->B.enabled = true\nreplication.policy.separator =\n"
    )
    code, _out, err = validate(path, capsys)
    assert code == 2
    assert "replication.policy.separator" in err
    assert "IdentityReplicationPolicy" in err


@pytest.mark.parametrize(
    ("extra", "names"),
    [
        ("", "Aheartbeats, mm2-offset-syncsAinternal, Acheckpointsinternal"),
        (
            "replication.policy.internal.topic.separator.enabled = false\n",
            "Aheartbeats, mm2-offset-syncs.A.internal, A.checkpoints.internal",
        ),
    ],
)
def test_an_empty_separator_with_identity_policy_says_the_names_it_gives(
    tmp_path, capsys, extra, names
):
    path = tmp_path / "sep.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "A->B.enabled = true\nreplication.policy.separator =\n"
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
        + extra
    )
    code, out, err = validate(path, capsys)
    assert code == 0, err
    assert f"(a take-over from it finds them): {names} (with MM2's default" in out
    assert "policy: IdentityReplicationPolicy (separator '')" in out


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("clusters = A, B  # the two data centres", "clusters"),
        ("A->B.enabled = false # passive for now", "A->B.enabled"),
    ],
)
def test_comment_after_a_value_is_explained(tmp_path, capsys, line, key):
    path = tmp_path / "c.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n" + line + "\n"
    )
    code, _out, err = validate(path, capsys)
    assert code == 2
    assert key in err
    assert "move the comment to its own line" in err


def test_comment_after_a_valid_value_is_warned(tmp_path, capsys):
    path = tmp_path / "c.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "A->B.enabled = true\nA->B.topics = orders # main topic\n"
    )
    code, out, _ = validate(path, capsys)
    assert code == 0
    assert "A->B.topics: the value contains ' #'" in out


def test_flow_keys_naming_unknown_clusters_are_warned(files, capsys, tmp_path):
    path = tmp_path / "extra_flow.properties"
    path.write_text(files["docker_demo"].read_text() + "\nsource->backup.enabled = true\n")
    code, out, _ = validate(path, capsys)
    assert code == 0
    assert "source->backup.enabled is ignored: backup is not in clusters" in out


@pytest.mark.parametrize(
    ("extra", "key", "expected"),
    [
        (
            "target.producer.enable.idempotence = false\nmirror.delivery = exactly_once",
            "producer.enable.idempotence",
            "delete that line",
        ),
        ("target.producer.acks = 1", "target.producer.acks", "all or unset"),
        ("source.consumer.isolation.level = read_uncommitted", "isolation.level", "aborted"),
        ("target.producer.batch.size = 0", "target.producer.batch.size", "1 .. 2147483647"),
        ("source.consumer.ssl.no.such = 1", "source.consumer.ssl.no.such", "refused, not"),
        ("source.security.protocol = TLS", "source.security.protocol", "SASL_SSL"),
        ("source.sasl.mechanism = AWS_MSK_IAM", "source.sasl.jaas.config", "IAMLoginModule"),
        ("source.sasl.mechanism = KERBEROS", "source.sasl.mechanism", "SCRAM-SHA-512"),
        ("mirror.tables.enabled = maybe", "mirror.tables.enabled", "true or false"),
        ("mirror.tables.writer = parquet", "mirror.tables.writer", "delta-rs"),
        ("source->target.consumer.fetch.min.bytes = x", "fetch.min.bytes", "a number"),
        ("config.providers = vault", "config.providers.vault.class", "FileConfigProvider"),
        ("target.producer.compression.type = brotli", "compression.type", "zstd"),
    ],
)
def test_validate_refuses_what_run_would_refuse(files, capsys, tmp_path, extra, key, expected):
    path = tmp_path / "bad.properties"
    path.write_text(files["docker_demo"].read_text() + "\n" + extra + "\n")
    code, _out, err = validate(path, capsys)
    assert code == 2, err
    assert key in err
    assert expected in err


def test_a_target_without_idempotence_runs_at_least_once_as_mm2_runs_it(files, capsys, tmp_path):
    """The OCI file without its `mirror.delivery` line: MM2 runs it, and so do we, at least once,
    saying so first."""
    path = tmp_path / "oci.properties"
    path.write_text(
        files["oci_streaming"].read_text().replace("mirror.delivery = at_least_once\n", "")
    )
    code, out, err = validate(path, capsys)
    assert code == 0, err
    assert out.splitlines()[0].startswith(
        "warning, changes what is copied: oci.producer.enable.idempotence = false: flow "
        "onprem->oci runs at least once, as MirrorMaker 2 runs this file"
    )
    assert "  delivery: at_least_once;" in out
    assert load_config(path).flow("onprem->oci").settings.delivery == "at_least_once"


def test_at_least_once_warns_for_settings_it_overrides(files):
    config = load_config(
        files["cloud_secrets"],
        **{
            "ccloud.consumer.isolation.level": "read_uncommitted",
            "ccloud.consumer.group.id": "mm2",
        },
    )
    warnings = check_clients(config)
    assert any(w.startswith("ccloud.consumer.isolation.level is ignored") for w in warnings)
    assert any(w.startswith("ccloud.consumer.group.id is ignored") for w in warnings)


@pytest.mark.parametrize(
    "prefix",
    [b"# caf\xe9 (ISO-8859-1, as Java writes it)\n", b"\xef\xbb\xbf"],  # BOM: UTF-8
)
def test_validate_reads_latin_1_and_bom_files(tmp_path, capsys, prefix):
    path = tmp_path / "enc.properties"
    body = b"clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
    path.write_bytes(prefix + body + b"A->B.enabled = true\n")
    code, out, err = validate(path, capsys)
    assert code == 0, err
    assert "flow A->B" in out


def test_msk_iam_file_on_both_java_forms(files, capsys, monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    code, out, err = validate(files["msk_iam"], capsys)
    assert code == 0, err
    assert "warning" not in out
    built = build_all(load_config(files["msk_iam"]))
    for (alias, _role), conf in built.items():
        assert conf["sasl.mechanism"] == "OAUTHBEARER"
        assert "sasl.jaas.config" not in conf
        region = "us-east-1" if alias == "source" else "eu-west-1"
        token, _ = conf["oauth_cb"]("")
        assert token_url(token)[0] == f"kafka.{region}.amazonaws.com"


def test_google_managed_kafka_file_logs_in_as_googles_java_handler(
    files, capsys, monkeypatch, tmp_path
):
    offline_gcp(monkeypatch, tmp_path)
    code, out, err = validate(files["google_managed_kafka"], capsys)
    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("warning")] == [
        "warning: unknown key 'offset.syncs.topic.replication.factor' is ignored "
        "(did you mean 'offset-syncs.topic.replication.factor'?)"
    ]
    with fake_idp() as idp:
        service_account_key(monkeypatch, tmp_path, idp.url)
        built = build_all(load_config(files["google_managed_kafka"]))
        token, _ = built["target", "producer"]["oauth_cb"]("")
    assert built["target", "consumer"]["sasl.mechanism"] == "OAUTHBEARER"
    assert "oauth_cb" not in built["source", "consumer"]
    assert b64url_json(token.split(".")[1])["sub"] == EMAIL
