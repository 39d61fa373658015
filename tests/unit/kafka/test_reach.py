"""A role's own bootstrap.servers is found offline and shown by `mirror validate`; the run's
cluster-id check itself is in tests/integration/test_client_addresses.py, a refused login on a
real broker in tests/integration/test_security_kafka.py."""

from __future__ import annotations

import json

import pytest

from mirror_lib.app.cli import main
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError, ConfigError
from mirror_lib.kafka import reach
from mirror_lib.kafka.reach import LoginRefused, credentials_key, diverted_clients
from tests.helpers.tls_material import write

BASE = "clusters = A, B\nA.bootstrap.servers = a:9093\nB.bootstrap.servers = b1:9092,b2:9092\n"
FLOW = "A->B.enabled = true\n"


def config(text: str):
    props = dict(line.split(" = ", 1) for line in (BASE + FLOW + text).splitlines() if line.strip())
    return parse_config(props)


def found(text: str) -> dict[tuple[str, str, str], tuple[str, str]]:
    return {
        (d.spec.side, d.spec.alias, d.spec.role): (d.key, d.value)
        for d in diverted_clients(config(text))
    }


def test_no_role_bootstrap_means_no_client_is_diverted():
    assert found("") == {}
    # the cluster's own servers in another order and case are the same address
    assert found("B.producer.bootstrap.servers = B2:9092, b1:9092\n") == {}


def test_each_way_of_writing_a_role_bootstrap_is_found_with_the_key_as_written():
    assert found("A->B.producer.override.bootstrap.servers = b-tls:9094\n") == {
        ("target", "B", "producer"): ("A->B.producer.override.bootstrap.servers", "b-tls:9094")
    }
    assert found("A->B.producer.bootstrap.servers = b-tls:9094\n") == {
        ("target", "B", "producer"): ("A->B.producer.bootstrap.servers", "b-tls:9094")
    }
    assert found("B.consumer.bootstrap.servers = b-tls:9094\n") == {
        ("target", "B", "consumer"): ("B.consumer.bootstrap.servers", "b-tls:9094")
    }
    assert found("A.admin.bootstrap.servers = a-tls:9094\n") == {
        ("source", "A", "admin"): ("A.admin.bootstrap.servers", "a-tls:9094")
    }


def test_validate_notes_each_diverted_client_and_that_the_run_checks_it(tmp_path, capsys):
    path = write(
        tmp_path / "mm2.properties",
        BASE + FLOW + "A->B.producer.override.bootstrap.servers = b-tls:9094\n",
    )
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    note = (
        "note: A->B.producer.override.bootstrap.servers = b-tls:9094: the producer of cluster B "
        "(target of A->B) connects there instead of B.bootstrap.servers = b1:9092,b2:9092; "
        "mirror run checks before it starts that both reach the same cluster (its cluster id)"
    )
    assert note in out.splitlines()
    assert main(["validate", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["clients"]["own_bootstrap"]
    assert shown == [note.removeprefix("note: ")]


def test_the_heartbeat_flows_clients_are_left_out_for_one_flow_s_commands():
    text = "A->B.offset-syncs.topic.location = target\nA.producer.bootstrap.servers = a-tls:9094\n"
    with_heartbeats = diverted_clients(config(text), ["A->B"])
    assert [(d.spec.flow, d.spec.alias, d.spec.role) for d in with_heartbeats] == [
        ("B->A", "A", "producer")  # the heartbeats B->A that a run of A->B emits
    ]
    assert diverted_clients(config(text), ["A->B"], heartbeats=False) == []


def test_the_key_that_holds_a_login_is_named_as_written():
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=p;"
    cfg = config(
        f"B.sasl.jaas.config = {jaas}\nB.admin.sasl.jaas.config = {jaas}\n"
        "A.sasl.username = u\nA.sasl.password = p\n"
    )
    assert credentials_key(cfg.cluster("B"), "producer") == "B.sasl.jaas.config"
    assert credentials_key(cfg.cluster("B"), "admin") == "B.admin.sasl.jaas.config"
    assert credentials_key(cfg.cluster("A"), "admin") == "A.sasl.password"


def test_a_refused_login_is_invalid_input_naming_the_key_and_no_secret(monkeypatch):
    def refuse(role, conf, timeout_s):
        raise LoginRefused("SASL authentication error: invalid credentials")

    monkeypatch.setattr(reach, "_cluster_id", refuse)
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
    cfg = config(f'B.sasl.jaas.config = {jaas}password="s3cret";\n')
    with pytest.raises(ConfigError) as refused:
        reach.check_clusters(cfg, ["B"])
    text = str(refused.value)
    assert text.startswith("B.sasl.jaas.config = '<redacted>': expected a login that cluster B")
    assert "invalid credentials" in text and "s3cret" not in text and "ScramLogin" not in text


def test_what_each_broker_did_is_said_once_without_librdkafkas_timings():
    errors = [
        "127.0.0.1:2/bootstrap: Connect to ipv4#127.0.0.1:2 failed: Connection refused (after 0ms "
        "in state CONNECT)",
        "1/1 brokers are down",
        "127.0.0.1:2/bootstrap: Connect to ipv4#127.0.0.1:2 failed: Connection refused (after 1ms "
        "in state CONNECT, 1 identical error(s) suppressed)",
        "kafka.invalid:9092/bootstrap: Failed to resolve 'kafka.invalid:9092': Name or service not "
        "known (after 4ms in state CONNECT)",
    ]
    assert reach.tried_text(errors, "timed out") == (
        "127.0.0.1:2: Connect to ipv4#127.0.0.1:2 failed: Connection refused, "
        "kafka.invalid:9092: Failed to resolve 'kafka.invalid:9092': Name or service not known"
    )
    assert reach.tried_text(["1/1 brokers are down"], "timed out") == "timed out"


def test_every_unreachable_cluster_is_named_with_its_role_in_one_line(monkeypatch):
    asked: list[str] = []

    def down(role, conf, timeout_s):
        asked.append(conf["bootstrap.servers"])
        raise reach.Unreachable(f"{conf['bootstrap.servers']}: Connection refused")

    monkeypatch.setattr(reach, "_cluster_id", down)
    cfg = config("B->A.enabled = true\n")
    with pytest.raises(BrokerError) as failed:
        reach.check_flow_clusters(cfg, ["A->B", "B->A"], kept="nothing was changed")
    assert sorted(asked) == ["a:9093", "b1:9092,b2:9092"]  # each cluster asked once
    assert str(failed.value) == (
        "cannot reach cluster A (source of A->B, target of B->A) at A.bootstrap.servers = "
        "a:9093: no broker answered a metadata request within 10s (tried a:9093: Connection "
        "refused); cannot reach cluster B (target of A->B, source of B->A) at "
        "B.bootstrap.servers = b1:9092,b2:9092: no broker answered a metadata request within "
        "10s (tried b1:9092,b2:9092: Connection refused); nothing was changed"
    )
    assert failed.value.transient and "\n" not in str(failed.value)


def test_a_command_asks_only_the_side_it_reads(monkeypatch):
    asked: list[str] = []
    monkeypatch.setattr(reach, "_cluster_id", lambda r, c, t: asked.append(c["bootstrap.servers"]))
    reach.check_flow_clusters(config(""), ["A->B"], ("target",))
    assert asked == ["b1:9092,b2:9092"]


def test_librdkafkas_lines_go_to_the_python_logger_while_routed(capsys):
    from mirror_lib.kafka import clients

    cluster = config("A.debug = broker\n").cluster
    assert "logger" not in clients.client_config(cluster("B"), "consumer")
    logger = clients.librdkafka_logger()
    for verbose in (False, True):
        with clients.routed_librdkafka_logs(verbose):
            routed = clients.client_config(cluster("B"), "consumer")
            assert routed["logger"] is logger
            # a client that asks for librdkafka's debug output keeps writing it itself
            assert "logger" not in clients.client_config(cluster("A"), "consumer")
            logger.error("FAIL [rdkafka#consumer-1] down")
        assert capsys.readouterr().err == (
            "librdkafka: FAIL [rdkafka#consumer-1] down\n" if verbose else ""
        )
    assert "logger" not in clients.client_config(cluster("B"), "consumer")  # as it was
    assert logger.propagate
