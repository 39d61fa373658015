"""The version tier: replication between the Kafka releases people migrate from and the newest.

Three single-node clusters: Apache Kafka 2.8 in ZooKeeper mode (``AclAuthorizer``), 3.9 and 4.4
in KRaft mode (``StandardAuthorizer``). One ``mirror run --once`` on real Spark runs four flows,
as one mm2.properties of a migration with its fail-back would: the migrations k28->k44 and
k39->k44, and the fail-backs k44->k28 and k44->k39. Each pair is then checked for the copy
(exactly once, by the raw committed view and the broker's own ``read_committed``), checkpoints
and translated offsets (``mirror translate``), group offset sync, topic config sync, ACL sync
and ``mirror verify``.

A topic config that the target's release does not have (``message.format.version``, gone in
4.0; ``message.timestamp.after.max.ms``, new in 3.6) is set on three of the source topics: the
flow warns once per remote topic and goes on. k39->k44's remote topic exists before the run, so
config sync meets it there rather than topic creation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirror_lib.kafka.admin import KafkaAdminOps
from mirror_lib.testing import kafka_broker
from mirror_lib.testing.kafka_io import commit_group, create_topic, produce_exact
from tests.helpers.acls import grant
from tests.helpers.exactly_once import assert_exactly_once
from tests.helpers.mirror_cli import run_mirror
from tests.integration.conftest import write_properties

pytestmark = pytest.mark.real_kafka

#: alias -> Apache Kafka release
RELEASES = {"k28": "2.8", "k39": "3.9", "k44": "4.4"}
PARTITIONS = 2
RECORDS = 200
#: What each source group had consumed, per partition, when its consumers moved.
CONSUMED = {0: 40, 1: 7}
RETENTION_MS = "86400000"


@dataclass(frozen=True)
class Pair:
    """One flow of the run: its source and target aliases and the topic config that only the
    source's release has (None: none)."""

    source: str
    target: str
    source_only: tuple[str, str] | None = None
    remote_first: bool = False  # the remote topic exists before the run

    @property
    def flow(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def topic(self) -> str:
        return f"ver-{self.source}-to-{self.target}"

    @property
    def remote(self) -> str:
        return f"{self.source}.{self.topic}"

    @property
    def group(self) -> str:
        return f"{self.topic}-g"


PAIRS = (
    Pair("k28", "k44", ("message.format.version", "2.8")),
    Pair("k39", "k44", ("message.format.version", "3.0"), remote_first=True),
    Pair("k44", "k28", ("message.timestamp.after.max.ms", "86400000")),
    Pair("k44", "k39"),
)


@dataclass(frozen=True)
class Run:
    """The clusters' bootstraps, the run's mm2.properties and what it wrote to stderr."""

    boot: dict[str, str]
    config: Path
    stderr: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[kafka_broker.KafkaBroker]]:
    """The three releases; the tests' clients and the flow are ``User:ANONYMOUS``, a super
    user, so the ACLs put on the source topics restrict no one here."""
    options = {
        alias: kafka_broker.KafkaOptions(authorizer=True, version=version)
        for alias, version in RELEASES.items()
    }
    root = tmp_path_factory.mktemp("versions")
    started = kafka_broker.start_kafka(list(RELEASES), root, options)
    try:
        yield started
    finally:
        kafka_broker.stop_kafka(started)


@pytest.fixture(scope="module")
def clusters(brokers: list[kafka_broker.KafkaBroker]) -> dict[str, str]:
    return {b.alias: b.bootstrap_servers for b in brokers}


def test_each_cluster_runs_its_release(brokers: list[kafka_broker.KafkaBroker]) -> None:
    """From its own jars, as the broker's own log says; 2.8 beside its ZooKeeper."""
    for broker in brokers:
        release = broker.options.release
        assert f"Kafka version: {release.version}" in broker.log_path.read_text()
        assert (broker.zookeeper is not None) == release.zookeeper
        settings = (broker.workdir / "server.properties").read_text()
        assert ("process.roles=" in settings) != release.zookeeper


def _prepare(boot: dict[str, str], pair: Pair) -> None:
    """The source topic with its records, configs, ACLs and its group's committed offsets."""
    source = boot[pair.source]
    configs = {"retention.ms": RETENTION_MS}
    if pair.source_only:
        configs[pair.source_only[0]] = pair.source_only[1]
    create_topic(source, pair.topic, PARTITIONS, config=configs)
    rows = [
        {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % PARTITIONS}
        for i in range(RECORDS)
    ]
    produce_exact(source, pair.topic, rows)
    offsets = [TopicPartition(pair.topic, p, o) for p, o in CONSUMED.items()]
    commit_group(source, pair.group, offsets)
    grant(source, "User:bob", "TOPIC", "LITERAL", pair.topic, "READ,WRITE")
    grant(source, "User:carol", "TOPIC", "LITERAL", pair.topic, "ALL")
    grant(source, "User:dave", "TOPIC", "LITERAL", pair.topic, "WRITE", "DENY")
    if pair.remote_first:
        create_topic(boot[pair.target], pair.remote, PARTITIONS)


def _properties(boot: dict[str, str], state: Path) -> dict[str, str]:
    props = {
        "clusters": ", ".join(RELEASES),
        **{f"{alias}.bootstrap.servers": b for alias, b in boot.items()},
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "sync.group.offsets.enabled": "true",
        "mirror.state.dir": str(state),
        "mirror.trigger.interval.seconds": "0.5",
        "tasks.max": "1",
        "mirror.tables.enabled": "false",
    }
    for pair in PAIRS:
        props |= {
            f"{pair.flow}.enabled": "true",
            f"{pair.flow}.topics": pair.topic,
            f"{pair.flow}.groups": pair.group,
        }
    return props


@pytest.fixture(scope="module")
def run(clusters: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Every pair's source prepared, then one ``mirror run --once`` of the four flows."""
    for pair in PAIRS:
        _prepare(clusters, pair)
    folder = tmp_path_factory.mktemp("versions-run")
    path = write_properties(folder / "mm2.properties", _properties(clusters, folder / "state"))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = run_mirror(path, env, "--once", timeout_s=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return Run(clusters, path, done.stderr, env)


def _cli(run: Run, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", *args],
        capture_output=True,
        text=True,
        env=run.env,
        timeout=300,
    )


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.flow)
def test_each_pair_is_copied_exactly_once_with_offsets_configs_and_acls(
    run: Run, pair: Pair
) -> None:
    source, target = run.boot[pair.source], run.boot[pair.target]
    assert_exactly_once(source, pair.topic, target, pair.remote, PARTITIONS)

    translated = _cli(run, "translate", str(run.config), "--group", pair.group,
                      "--source", pair.source, "--target", pair.target, "--json")  # fmt: skip
    assert translated.returncode == 0, translated.stdout + translated.stderr
    rows = json.loads(translated.stdout)
    assert {(r["topic"], r["partition"]): r["offset"] for r in rows} == {
        (pair.remote, p): o for p, o in CONSUMED.items()
    }
    consumer = Consumer({"bootstrap.servers": target, "group.id": pair.group})
    tps = [TopicPartition(pair.remote, p) for p in range(PARTITIONS)]
    synced = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=30)}
    consumer.close()
    assert synced == CONSUMED, "the group's offsets were not synced to the target"

    ops = KafkaAdminOps({"bootstrap.servers": target}, timeout_s=30)
    configs = ops.describe_topic_configs([pair.remote])[pair.remote]
    assert configs["retention.ms"].value == RETENTION_MS
    acls = {
        (b.principal, b.operation, b.permission)
        for b in ops.describe_topic_acls()
        if b.resource_name == pair.remote
    }
    assert acls == {
        ("User:bob", "READ", "ALLOW"),
        ("User:carol", "READ", "ALLOW"),
        ("User:dave", "WRITE", "DENY"),
    }

    verify = _cli(run, "verify", str(run.config), "--flow", pair.flow, "--no-record")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"{PARTITIONS} partitions, 0 different, 0 behind" in verify.stdout


@pytest.mark.parametrize("pair", [p for p in PAIRS if p.source_only], ids=lambda p: p.flow)
def test_a_config_the_target_release_lacks_is_warned_about_once(run: Run, pair: Pair) -> None:
    assert pair.source_only is not None
    name = pair.source_only[0]
    warnings = [
        line
        for line in run.stderr.splitlines()
        if f"does not know topic config {name}" in line and f" {pair.remote} " in line
    ]
    assert len(warnings) == 1, run.stderr[-4000:]
