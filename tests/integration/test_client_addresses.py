"""A client's own bootstrap.servers must reach its cluster: `mirror run` compares cluster ids
before anything starts (mirror_lib.kafka.reach)."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError, ConfigError
from mirror_lib.kafka.admin import admin_client
from mirror_lib.kafka.reach import check_client_addresses
from mirror_lib.replication.migration.cutover import CutoverOptions, run_cutover
from mirror_lib.replication.migration.verify import verify_flow
from mirror_lib.testing.kafka_io import produce_exact
from tests.helpers.mirror_cli import run_mirror
from tests.integration.conftest import flow_properties, write_properties


def config_with(brokers, tmp_path, key: str, value: str):
    """A->B over the session brokers with one client setting of a role's own."""
    return parse_config(
        flow_properties(brokers.source, brokers.target, tmp_path / "state", **{key: value})
    )


def test_a_target_producer_that_reaches_the_source_cluster_is_refused_before_anything_starts(
    brokers, tmp_path, unique_name, subprocess_env
):
    produce_exact(brokers.source, unique_name, [{"value": b"x", "partition": 0}] * 2)
    props = flow_properties(
        brokers.source,
        brokers.target,
        tmp_path / "state",
        **{
            "A->B.topics": unique_name,
            # AWS's MSK samples set this to the target's address; here it is the source's
            "A->B.producer.override.bootstrap.servers": brokers.source,
        },
    )
    out = run_mirror(
        write_properties(tmp_path / "mm2.properties", props),
        subprocess_env,
        "--once",
        timeout_s=120,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert f"A->B.producer.override.bootstrap.servers = '{brokers.source}'" in out.stderr
    assert "an address of target cluster B, or no such key: it reaches the cluster with id" in (
        out.stderr
    )
    assert "the replicated records would be written to another cluster" in out.stderr
    assert "started replication" not in out.stdout
    on_target = admin_client({"bootstrap.servers": brokers.target}).list_topics(timeout=10)
    assert f"A.{unique_name}" not in on_target.topics


def test_another_address_of_the_same_cluster_passes(brokers, tmp_path):
    host, port = brokers.target.split(",")[0].rsplit(":", 1)
    if host != "127.0.0.1":
        pytest.skip("needs the embedded brokers on 127.0.0.1 (localhost is the same listener)")
    config = config_with(brokers, tmp_path, "A->B.producer.bootstrap.servers", f"localhost:{port}")
    check_client_addresses(config)  # raises if the cluster ids differ


def test_an_unreachable_role_bootstrap_names_its_key(brokers, tmp_path):
    config = config_with(brokers, tmp_path, "B.consumer.bootstrap.servers", "127.0.0.1:1")
    with pytest.raises(BrokerError, match=r"cannot reach cluster B at B\.consumer\.bootstrap"):
        check_client_addresses(config, timeout_s=2)


def test_a_source_admin_that_reaches_the_target_names_what_would_go_wrong(brokers, tmp_path):
    config = config_with(brokers, tmp_path, "A.admin.bootstrap.servers", brokers.target)
    with pytest.raises(ConfigError) as caught:
        check_client_addresses(config)
    assert caught.value.key == "A.admin.bootstrap.servers"
    assert "topics and offsets would be listed on another cluster" in str(caught.value)


@pytest.mark.parametrize("command", ["verify", "cutover"])
def test_verify_and_cutover_refuse_a_target_admin_that_reaches_the_source(
    brokers, tmp_path, command
):
    config = config_with(brokers, tmp_path, "B.admin.bootstrap.servers", brokers.source)
    with pytest.raises(ConfigError, match=r"remote topics would be created on another cluster"):
        if command == "verify":
            verify_flow(config, "A->B", record=False)
        else:
            run_cutover(config, "A->B", CutoverOptions(apply=True))
