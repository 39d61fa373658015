"""``bootstrap.servers`` is checked offline: a bad port is refused by `mirror validate`, naming
the key, the value and the valid form; what Kafka's Java clients accept still passes."""

from __future__ import annotations

import pytest

from mirror_lib.app.cli import main
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError

BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
}


@pytest.mark.parametrize(
    "servers",
    [
        "kafka-1.example.com:9092",
        "kafka-1:9092, kafka-2:9092,kafka_3:9092,",  # spaces, an underscore, a trailing comma
        "10.0.0.7:9092",
        "[::1]:9092,[fe80::1%eth0]:9093",
        "SASL_SSL://b-1.msk.example.com:9096,PLAINTEXT://10.0.0.8:9092",
        "${env:KAFKA_BOOTSTRAP}",  # checked where it resolves
    ],
)
def test_what_kafkas_clients_accept_passes(servers):
    parse_config({**BASE, "A.bootstrap.servers": servers})


@pytest.mark.parametrize(
    ("servers", "problem"),
    [
        ("kafka:abc", "'kafka:abc' has port 'abc', not a number (librdkafka would read it as 0)"),
        ("kafka:9092,kafka-2", "'kafka-2' has no port"),
        ("kafka:99999", "'kafka:99999' has port 99999, outside 1..65535"),
        ("kafka:0", "'kafka:0' has port 0, outside 1..65535"),
        ("::1:9092", "'::1:9092' is an IPv6 address without brackets"),
        (":9092", "':9092' has no host"),
        ("kaf ka:9092", "'kaf ka:9092' has no valid host name"),
        ("SASL_SSL://kafka", "'SASL_SSL://kafka' has no port"),
        (" , ", "no server is listed"),
    ],
)
def test_a_bad_address_is_refused_naming_key_value_and_form(servers, problem):
    with pytest.raises(ConfigError) as refused:
        parse_config({**BASE, "A.bootstrap.servers": servers})
    assert refused.value.key == "A.bootstrap.servers"
    assert refused.value.value == servers
    assert refused.value.expected.startswith("host:port[,host:port...] with ports from 1 to 65535")
    assert problem in refused.value.expected


@pytest.mark.parametrize(
    "key",
    [
        "bootstrap.servers",  # the default of every cluster
        "B.producer.bootstrap.servers",
        "A->B.producer.override.bootstrap.servers",
        "A->B.target.admin.bootstrap.servers",
    ],
)
def test_every_key_that_sets_an_address_is_checked_as_written(key):
    props = {**BASE, key: "b:abc"}
    if key == "bootstrap.servers":
        del props["A.bootstrap.servers"]
    with pytest.raises(ConfigError) as refused:
        parse_config(props)
    assert refused.value.key == key


def test_validate_exits_2_on_a_bad_port(tmp_path, capsys):
    path = tmp_path / "mm2.properties"
    path.write_text(
        "".join(f"{k} = {v}\n" for k, v in {**BASE, "A.bootstrap.servers": "kafka:abc"}.items())
    )
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "mirror: invalid input: A.bootstrap.servers = 'kafka:abc': expected host:port"
    )
