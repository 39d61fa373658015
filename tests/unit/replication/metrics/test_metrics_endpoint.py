"""The metrics endpoint: its keys and flags, and a port in use refused before a run starts."""

from __future__ import annotations

import socket

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.replication.metrics.metrics_endpoint import metrics_endpoint


def config(**extra: str):
    props = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092"}
    return parse_config({**props, "A->B.enabled": "true", **extra})


def props(**extra: str):
    """The properties of a valid configuration with ``extra``."""
    return config(**extra).properties


@pytest.mark.parametrize("value", ["abc", "70000", "-1", "80.5"])
def test_bad_metrics_port_names_key_value_and_range(value):
    with pytest.raises(ConfigError) as err:
        config(**{"mirror.metrics.port": value})
    assert err.value.key == "mirror.metrics.port" and err.value.value == value
    assert "1..65535" in str(err.value) and "0" in err.value.expected


def test_metrics_endpoint_from_keys_flags_or_off():
    assert metrics_endpoint(props()) is None
    assert metrics_endpoint(props(**{"mirror.metrics.port": "0"})) is None
    on = metrics_endpoint(props(**{"mirror.metrics.port": "9464"}))
    assert (on.host, on.port, on.url) == ("127.0.0.1", 9464, "http://127.0.0.1:9464/metrics")
    flags = metrics_endpoint(props(**{"mirror.metrics.port": "9464"}), 9999, "::1")
    assert (flags.host, flags.port, flags.port_key) == ("::1", 9999, "--metrics-port")
    assert flags.url == "http://[::1]:9999/metrics"
    assert metrics_endpoint(props(**{"mirror.metrics.port": "9464"}), 0) is None
    with pytest.raises(ConfigError) as err:
        metrics_endpoint(props(), 65536)
    assert err.value.key == "--metrics-port"
    with pytest.raises(ConfigError) as err:
        config(**{"mirror.metrics.host": " "})
    assert err.value.key == "mirror.metrics.host"


def test_a_port_in_use_is_a_config_error_naming_it():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        endpoint = metrics_endpoint(props(**{"mirror.metrics.port": str(port)}))
        with pytest.raises(ConfigError) as err:
            endpoint.check_free()
    assert err.value.key == "mirror.metrics.port" and err.value.value == port
    assert "in use" in str(err.value)
    endpoint.check_free()  # free again once the other listener closed


def test_run_refuses_a_busy_port_before_it_contacts_a_cluster(tmp_path, capsys):
    from mirror_lib.app.cli import main
    from mirror_lib.spark.runner import run_flows

    unreachable = config(**{"mirror.state.dir": str(tmp_path)})  # a:9092 would fail after 10 s
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError) as err:
            run_flows(None, unreachable, metrics_port=port, report=lambda *_: None)
        assert err.value.key == "--metrics-port" and "in use" in err.value.expected
    props = tmp_path / "mm2.properties"
    props.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
    )
    props.write_text(props.read_text() + "A->B.enabled = true\n")
    assert main(["run", str(props), "--metrics-port", "70000"]) == 2
    assert "--metrics-port = '70000': expected a TCP port 1..65535" in capsys.readouterr().err
