"""Security on real Apache Kafka: SASL_SSL with SCRAM-SHA-512 users and certificates made at test
time, Kafka's StandardAuthorizer, and a flow whose user is not a super user but holds the ACLs
of the README's table (FLOW_ACLS below), so each of them is needed by something a test runs.

Covers ACL sync (MM2's rules against a real authorizer), the write protection of remote topics
and its lifting by `mirror cutover` and `mirror failover`, `mirror run --once`, `verify` and
`cutover` over SASL_SSL, and a wrong password. The clusters' PLAINTEXT listener is the tests'
administrator (User:ANONYMOUS, a super user).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from mirror_lib.errors import BrokerError
from mirror_lib.kafka.admin import KafkaAdminOps
from mirror_lib.kafka.admin_ops import AclBinding
from mirror_lib.replication.companions.protection import LIFTED_PRINCIPAL, MARKER_PREFIX
from mirror_lib.testing.kafka_broker import KafkaOptions, SecureListener, start_kafka, stop_kafka
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.helpers.acls import grant
from tests.helpers.mirror_cli import kill_group, run_mirror, start_mirror
from tests.helpers.tls_material import issued, self_signed, write
from tests.helpers.waiting import process_alive, wait_for
from tests.integration.conftest import flow_properties, write_properties
from tests.integration.test_checkpoints import consume_group

pytestmark = pytest.mark.real_kafka

USERS = {"mirror": "m1rror-s3cret", "bob": "b0b-s3cret"}
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"

#: What the flow's user (User:mirror) is granted: (cluster, resource, pattern, name, operations).
#: The README's table of the ACLs a flow needs says the same.
FLOW_ACLS = (
    ("A", "TOPIC", "PREFIXED", "sec-", "DESCRIBE,READ,DESCRIBE_CONFIGS"),
    ("A", "GROUP", "PREFIXED", "__mirror", "READ"),
    ("A", "GROUP", "PREFIXED", "sec-", "DESCRIBE"),
    ("A", "BROKER", "LITERAL", "kafka-cluster", "DESCRIBE"),
    ("A", "TOPIC", "LITERAL", "heartbeats", "CREATE,WRITE,READ,DESCRIBE,DESCRIBE_CONFIGS"),
    ("B", "TOPIC", "PREFIXED", "A.", "CREATE,WRITE,READ,DESCRIBE,ALTER_CONFIGS,ALTER"),
    ("B", "TOPIC", "PREFIXED", "mm2-", "CREATE,WRITE,READ,DESCRIBE"),
    ("B", "TOPIC", "LITERAL", "heartbeats", "CREATE,WRITE,READ,DESCRIBE"),
    ("B", "TRANSACTIONAL_ID", "PREFIXED", "mirror-", "WRITE,DESCRIBE"),
    ("B", "GROUP", "PREFIXED", "__mirror", "READ"),
    ("B", "GROUP", "PREFIXED", "sec-", "READ"),
    ("B", "BROKER", "LITERAL", "kafka-cluster", "DESCRIBE,ALTER"),
)


@dataclass(frozen=True)
class Secured:
    """Two clusters with SASL_SSL listeners and an authorizer."""

    admin: dict[str, str]  # alias -> PLAINTEXT bootstrap (super user)
    secure: dict[str, str]  # alias -> SASL_SSL bootstrap
    ca: Path

    def login(self, user: str, password: str | None = None) -> dict[str, str]:
        """librdkafka settings of a test client logged in as ``user``."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": password or USERS[user],
                "ssl.ca.location": str(self.ca)}  # fmt: skip

    def ops(self, alias: str) -> KafkaAdminOps:
        return KafkaAdminOps({"bootstrap.servers": self.admin[alias]}, timeout_s=30)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("secured")
    ca = self_signed("mirror-test-ca")
    broker = issued(ca, "broker", ip="127.0.0.1")
    pem = write(root / "broker.pem", broker.key_pem + broker.cert_pem)
    options = KafkaOptions(secure=SecureListener(USERS, pem), authorizer=True)
    brokers = start_kafka(["A", "B"], root, options)
    try:
        sec = Secured(
            {b.alias: b.bootstrap_servers for b in brokers},
            {b.alias: b.secure_bootstrap_servers for b in brokers},
            write(root / "ca.pem", ca.cert_pem),
        )
        for alias, resource, pattern, name, ops in FLOW_ACLS:
            grant(sec.admin[alias], "User:mirror", resource, pattern, name, ops)
        yield sec
    finally:
        stop_kafka(brokers)


def secure_props(sec: Secured, state: Path, topics: str, **extra: str) -> dict[str, str]:
    """A->B over SASL_SSL as User:mirror; ``extra`` adds or overrides keys."""
    props = flow_properties(sec.secure["A"], sec.secure["B"], state, **{"A->B.topics": topics})
    for alias in ("A", "B"):
        props |= {
            f"{alias}.security.protocol": "SASL_SSL",
            f"{alias}.sasl.mechanism": "SCRAM-SHA-512",
            f"{alias}.sasl.jaas.config": f'{SCRAM_LOGIN} required username="mirror" '
            f'password="{USERS["mirror"]}";',
            f"{alias}.ssl.truststore.location": str(sec.ca),
            f"{alias}.ssl.truststore.type": "PEM",
        }
    return props | extra


def name(prefix: str) -> str:
    """Names under the flow user's grants (``sec-``)."""
    return f"sec-{prefix}-{uuid.uuid4().hex[:6]}"


def cli(env: dict[str, str], *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirror_lib.app.cli", *args],
                          capture_output=True, text=True, env=env, timeout=timeout_s)  # fmt: skip


def produce_as(sec: Secured, user: str, topic: str) -> str | None:
    """Produce one record to ``topic`` on B as ``user``: the error's name, or None."""
    producer = Producer({"bootstrap.servers": sec.secure["B"], "message.timeout.ms": 15000,
                         **sec.login(user)})  # fmt: skip
    errors: list[Any] = []
    producer.produce(topic, b"stray", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    return errors[0].name() if errors and errors[0] is not None else None


def deny_of(topic: str, principal: str) -> AclBinding:
    return AclBinding(topic, "LITERAL", principal, "*", "WRITE", "DENY")


def wait_until(condition: Any, what: str, timeout_s: float = 120, proc: Any = None) -> None:
    """:func:`tests.helpers.waiting.wait_for`, while ``proc`` (if given) runs."""
    alive = None if proc is None else process_alive(proc)
    wait_for(condition, timeout_s, what, alive, poll_s=0.5)


# --- the admin port against an authorizer ---------------------------------------------------


def test_acls_round_trip(secured: Secured) -> None:
    ops, t = secured.ops("B"), name("acl")
    binding = AclBinding(t, "LITERAL", "User:mirror-test", "*", "DESCRIBE", "ALLOW")
    assert ops.create_acls([binding]) == {binding: None}
    wait_until(lambda: binding in ops.describe_topic_acls(), "the binding listed", 30)
    assert ops.delete_acls([binding]) == {binding: None}
    wait_until(lambda: binding not in ops.describe_topic_acls(), "the binding gone", 30)
    assert ops.delete_acls([binding]) == {binding: None}  # not there: nothing to do, no error


# --- ACL sync, and run --once / verify over SASL_SSL ------------------------------------------


def test_acl_sync_over_sasl_ssl_keeps_read_and_never_write(secured, tmp_path, subprocess_env):
    """MM2's rules (LITERAL topic bindings of replicated topics; ALLOW WRITE dropped, ALLOW ALL
    becomes READ; DENY kept) against a real authorizer, by a flow user that is no super user. A
    principal B does not know (no SCRAM user there) is copied as written, as MM2 does: Kafka's
    ACLs name principals, they do not look them up."""
    topic = name("sync")
    create_topic(secured.admin["A"], topic, 2)
    produce_exact(secured.admin["A"], topic, [{"value": f"v{i}", "partition": i % 2}
                                               for i in range(20)])  # fmt: skip
    for principal, pattern, res, ops, permission in (
        ("User:bob", "LITERAL", topic, "READ,WRITE", "ALLOW"),
        ("User:carol", "LITERAL", topic, "ALL", "ALLOW"),
        ("User:ghost", "LITERAL", topic, "DESCRIBE", "ALLOW"),
        ("User:dave", "LITERAL", topic, "WRITE", "DENY"),
        ("User:erin", "PREFIXED", topic[:8], "READ", "ALLOW"),
    ):
        grant(secured.admin["A"], principal, "TOPIC", pattern, res, ops, permission)
    props = secure_props(secured, tmp_path / "state", topic)
    path = write_properties(tmp_path / "mm2.properties", props)
    out = run_mirror(path, subprocess_env, "--once", timeout_s=300)
    assert out.returncode == 0, out.stderr[-3000:]

    remote = f"A.{topic}"
    bindings = secured.ops("B").describe_topic_acls()
    synced = {(b.principal, b.operation, b.permission) for b in bindings
              if b.resource_name == remote}  # fmt: skip
    assert synced == {
        ("User:bob", "READ", "ALLOW"),
        ("User:carol", "READ", "ALLOW"),
        ("User:ghost", "DESCRIBE", "ALLOW"),
        ("User:dave", "WRITE", "DENY"),
    }
    got = consume_all(secured.admin["B"], remote)
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(20))

    verify = cli(subprocess_env, "verify", str(path), "--flow", "A->B", "--no-record")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "2 partitions, 0 different, 0 behind" in verify.stdout


# --- remote topics protected until cutover / failover -----------------------------------------


def test_remote_topics_are_protected_until_cutover_and_failover(secured, tmp_path, subprocess_env):
    """Bob holds ALLOW WRITE on every topic named A.sec-p-* on B. While `mirror run` owns A.<t>,
    he is denied; the flow itself goes on copying. `mirror cutover` lifts it for its topics, `mirror
    failover --apply` for every remote topic of the flow, each saying so; a later run does not
    protect them again."""
    cut, fail = name("p-cut"), name("p-fail")
    group = name("app")
    for topic in (cut, fail):
        create_topic(secured.admin["A"], topic, 1)
        produce_exact(secured.admin["A"], topic, [{"value": f"v{i}"} for i in range(10)])
    consume_group(secured.admin["A"], group, fail, 1, 4)  # checkpoints for the failover
    grant(secured.admin["B"], "User:bob", "TOPIC", "PREFIXED", "A.sec-p-", "WRITE,DESCRIBE")
    props = secure_props(
        secured, tmp_path / "state", f"{cut}, {fail}",
        **{"emit.checkpoints.interval.seconds": "1", "emit.heartbeats.interval.seconds": "1",
           "sync.topic.acls.interval.seconds": "2", "A->B.groups": group},
    )  # fmt: skip
    path = write_properties(tmp_path / "mm2.properties", props)
    ops = secured.ops("B")

    proc = start_mirror(path, subprocess_env, log=tmp_path / "run.out", err=tmp_path / "run.err")
    try:
        for topic in (cut, fail):
            denied = deny_of(f"A.{topic}", "User:bob")
            wait_until(lambda d=denied: d in ops.describe_topic_acls(), f"{denied}", proc=proc)
        assert produce_as(secured, "bob", f"A.{cut}") == "TOPIC_AUTHORIZATION_FAILED"
        assert deny_of(f"A.{cut}", "User:mirror") not in ops.describe_topic_acls()
        produce_exact(secured.admin["A"], cut, [{"value": "after"}])  # the flow still writes
        wait_until(lambda: len(consume_all(secured.admin["B"], f"A.{cut}")) == 11,
                   "the record written after the protection on B", proc=proc)  # fmt: skip
        wait_until(lambda: checkpointed(secured, group), "a checkpoint of the group", proc=proc)
    finally:
        kill_group(proc)

    done = cli(subprocess_env, "cutover", str(path), "--flow", "A->B", "--topics", cut,
               "--producers-stopped", "--apply")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"write protection lifted on B for 1 remote topic (A.{cut})" in done.stdout
    assert f"removed DENY WRITE for A.{cut}: User:bob" in done.stdout
    wait_until(lambda: produce_as(secured, "bob", f"A.{cut}") is None, "bob's write to A.cut")
    assert produce_as(secured, "bob", f"A.{fail}") == "TOPIC_AUTHORIZATION_FAILED"

    over = cli(subprocess_env, "failover", str(path), "--group", group, "--source", "A",
               "--target", "B", "--apply")  # fmt: skip
    assert over.returncode == 0, over.stdout + over.stderr
    lifted = next(x for x in over.stdout.splitlines() if x.startswith("write protection"))
    assert "lifted on B for" in lifted and f"A.{cut}" in lifted and f"A.{fail}" in lifted
    assert f"removed DENY WRITE for A.{fail}: User:bob" in lifted
    wait_until(lambda: produce_as(secured, "bob", f"A.{fail}") is None, "bob's write to A.fail")

    for topic in (cut, fail):  # a later run sees the markers and leaves both topics open
        produce_exact(secured.admin["A"], topic, [{"value": "later"}])
    again = run_mirror(path, subprocess_env, "--once", timeout_s=300)
    assert again.returncode == 0, again.stderr[-3000:]
    bindings = ops.describe_topic_acls()
    for topic in (cut, fail):
        assert deny_of(f"A.{topic}", "User:bob") not in bindings
        assert deny_of(f"{MARKER_PREFIX}A.{topic}", LIFTED_PRINCIPAL) in bindings
    assert produce_as(secured, "bob", f"A.{cut}") is None


def checkpointed(sec: Secured, group: str) -> bool:
    try:
        records = consume_all(sec.admin["B"], "A.checkpoints.internal")
    except BrokerError:  # not created yet
        return False
    return any(group.encode() in (r.key or b"") for r in records)


# --- a wrong password ---------------------------------------------------------------------------


def test_a_wrong_password_exits_2_naming_the_key_and_no_secret(secured, tmp_path, subprocess_env):
    wrong = "n0t-the-s3cret"
    jaas = f'{SCRAM_LOGIN} required username="mirror" password="{wrong}";'
    props = secure_props(secured, tmp_path / "state", name("pw"), **{"B.sasl.jaas.config": jaas})
    path = write_properties(tmp_path / "mm2.properties", props)
    for args in (("run", str(path), "--once"), ("verify", str(path), "--flow", "A->B"),
                 ("cutover", str(path), "--flow", "A->B")):  # fmt: skip
        out = cli(subprocess_env, *args, timeout_s=120)
        text = out.stdout + out.stderr
        assert out.returncode == 2, text
        assert "B.sasl.jaas.config = '<redacted>'" in text, text
        assert "refused" in text and "invalid credentials" in text, text
        assert wrong not in text and SCRAM_LOGIN not in text and USERS["mirror"] not in text
