"""Apache Kafka's MirrorMakerConfigTest (connect/mirror), ported: the cases about which client
settings reach the clients, unknown keys and ``security.protocol``.

Where the port differs from the Java test, the comment says why: ``FakeConfigProvider`` is a Java
test class, so the file provider stands in for it; MM2 builds no client in ``testWorkerConfigs``,
so its ``producer.security.protocol = SASL`` (no protocol) is never checked there, while we check
every ``security.protocol`` when the configuration is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror_lib.config.describe import describe_config
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.clients import check_clients, client_config

FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
FAKE_METRICS_REPORTER = "org.apache.kafka.common.metrics.FakeMetricsReporter"


@pytest.fixture
def secrets(tmp_path: Path) -> str:
    """What FakeConfigProvider answers, as a file: password = secret2."""
    path = tmp_path / "secrets.properties"
    path.write_text("password = secret2\n")
    return str(path)


def _warnings(props: dict[str, str]) -> list[str]:
    config = parse_config(props)
    return describe_config(config, check_clients(config))["warnings"]


def test_client_config_properties(secrets):
    """testClientConfigProperties"""
    props = {
        "clusters": "a, b",
        "config.providers": "fake",
        "config.providers.fake.class": FILE_PROVIDER,  # FakeConfigProvider in Java
        "replication.policy.separator": "__",
        "ssl.truststore.password": "secret1",
        "ssl.key.password": f"${{fake:{secrets}:password}}",  # resolves to "secret2"
        "security.protocol": "SSL",
        "a.security.protocol": "PLAINTEXT",
        "a.producer.security.protocol": "SSL",
        "a.bootstrap.servers": "one:9092, two:9092",
        "b.bootstrap.servers": "three:9092",  # MM2 builds no client of b in this test
        "metrics.reporter": FAKE_METRICS_REPORTER,
        "a.metrics.reporter": FAKE_METRICS_REPORTER,
        "b->a.metrics.reporter": FAKE_METRICS_REPORTER,
        "a.xxx": "yyy",
        "xxx": "zzz",
    }
    config = parse_config(props)
    a, b = config.cluster("a"), config.cluster("b")
    assert config.flow("a->b").policy().format_remote_topic("b", "topic1") == "b__topic1"
    admin = client_config(a, "admin", notes=[])
    producer = client_config(a, "producer", notes=[])
    assert admin["bootstrap.servers"] == "one:9092, two:9092"
    assert admin["security.protocol"] == "PLAINTEXT"
    assert producer["security.protocol"] == "SSL"
    assert "xxx" not in admin, "unknown properties aren't included in client configs"
    assert not any("metric" in key for key in admin), "nor are metrics reporters"
    assert admin["ssl.key.password"] == "secret2", "translated from external sources"
    assert not any("metric" in key for key in {**producer, **client_config(b, "admin")})
    # Java keeps ssl.truststore.password without a truststore; librdkafka has no such setting
    assert "ssl.truststore.password is ignored: no ssl.truststore.location is set" in (
        _warnings(props)
    )
    # MM2 runs this file: a.xxx is dropped with a warning naming it, not refused
    assert any(w.startswith("a.xxx is ignored: not a client setting") for w in _warnings(props))


def test_worker_configs(secrets):
    """testWorkerConfigs: the client settings a worker's clients get (Connect's own settings,
    such as b.status.storage.replication.factor, have no meaning here: a warning)."""
    props = {
        "clusters": "a, b",
        "a.bootstrap.servers": "one:9092",
        "b.bootstrap.servers": "two:9092",
        "config.providers": "fake",
        "config.providers.fake.class": FILE_PROVIDER,
        "replication.policy.separator": "__",
        "offset.storage.replication.factor": "123",
        "b.status.storage.replication.factor": "456",
        "b.producer.client.id": "client-one",
        "b.security.protocol": "PLAINTEXT",
        "b.producer.security.protocol": "SASL_PLAINTEXT",  # "SASL" in Java: see the docstring
        "ssl.truststore.password": "secret1",
        "ssl.key.password": f"${{fake:{secrets}:password}}",
        "b.xxx": "yyy",
    }
    b = parse_config(props).cluster("b")
    producer = client_config(b, "producer", notes=[])
    assert producer["client.id"] == "client-one"
    assert producer["security.protocol"] == "SASL_PLAINTEXT"
    assert client_config(b, "consumer", notes=[])["security.protocol"] == "PLAINTEXT"
    assert producer["ssl.key.password"] == "secret2"
    warnings = _warnings(props)
    assert any(w.startswith("b.status.storage.replication.factor is ignored") for w in warnings)
    assert any(w.startswith("b.xxx is ignored: not a client setting") for w in warnings)
    with pytest.raises(ConfigError, match=r"b\.producer\.security\.protocol = 'SASL'"):
        parse_config({**props, "b.producer.security.protocol": "SASL"})


def test_invalid_security_protocol():
    """testInvalidSecurityProtocol: refused when the configuration is read."""
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {
                "clusters": "a, b, c",
                "a.bootstrap.servers": "one:9092",
                "b.bootstrap.servers": "two:9092",
                "c.bootstrap.servers": "three:9092",
                "a->b.emit.heartbeats.enabled": "false",
                "a->c.emit.heartbeats.enabled": "false",
                "security.protocol": "abc",
            }
        )
    assert "security.protocol" in str(caught.value)


def test_client_invalid_security_protocol():
    """testClientInvalidSecurityProtocol: one cluster's clients (MirrorClientConfig)."""
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {"clusters": "a, b", "bootstrap.servers": "one:9092", "a.security.protocol": "abc"}
        )
    assert "security.protocol" in str(caught.value)


def test_case_insensitive_security_protocol():
    """testCaseInsensitiveSecurityProtocol: kept as written; the client gets librdkafka's name."""
    config = parse_config(
        {"clusters": "a, b", "bootstrap.servers": "one:9092", "a.security.protocol": "sasl_ssl"}
    )
    assert config.cluster("a").client["security.protocol"] == "sasl_ssl"
    assert client_config(config.cluster("a"), "admin")["security.protocol"] == "SASL_SSL"
