"""Write protection of remote topics: the planning, the guard over RecordingAdminOps, lifting."""

from __future__ import annotations

import logging

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError, ConfigError
from mirror_lib.kafka.admin_ops import AclBinding, broker_error
from mirror_lib.replication.companions.protection import (
    LIFTED_PRINCIPAL,
    Lift,
    RemoteTopicGuard,
    deny_write,
    flow_principal,
    flow_remote_topics,
    lift_flow_protection,
    lift_protection,
    lifted_marker,
    plan_lift,
    plan_protection,
)
from mirror_lib.replication.context import FlowContext
from tests.helpers.fake_admin import RecordingAdminOps

FLOW = "User:mirror"


def allow(name: str, principal: str, op: str = "WRITE", pattern: str = "LITERAL") -> AclBinding:
    return AclBinding(name, pattern, principal, "*", op, "ALLOW")


def guard(admin: RecordingAdminOps, principal: str | None = FLOW) -> RemoteTopicGuard:
    return RemoteTopicGuard(admin, principal, "the SASL SCRAM-SHA-512 username", "B", "A->B")


# --- planning -------------------------------------------------------------------------------


def test_every_grant_that_covers_a_remote_topic_is_denied_but_the_flow_s():
    bindings = [
        allow("A.orders", "User:lit"),
        allow("A.", "User:pre", pattern="PREFIXED"),
        allow("*", "User:any-topic", op="ALL"),
        allow("A.orders", "User:reader", op="READ"),  # no write
        allow("B.", "User:elsewhere", pattern="PREFIXED"),  # another prefix
        allow("A.", FLOW, op="ALL", pattern="PREFIXED"),  # the flow's own grant
        AclBinding("A.orders", "LITERAL", "User:denied", "*", "WRITE", "DENY"),
    ]
    plan = plan_protection(bindings, ["A.orders"], FLOW)
    assert plan.add == [
        deny_write("A.orders", p) for p in ("User:lit", "User:pre", "User:any-topic")
    ]
    assert plan.open_to_all == {} and plan.lifted == set()


def test_present_denies_lifted_topics_and_everyone_grants_are_not_added():
    everyone = allow("A.", "User:*", pattern="PREFIXED")
    bindings = [
        allow("A.", "User:bob", pattern="PREFIXED"),
        everyone,
        deny_write("A.kept", "User:bob"),
        lifted_marker("A.lifted"),
    ]
    plan = plan_protection(bindings, ["A.kept", "A.lifted", "A.new"], FLOW)
    assert plan.add == [deny_write("A.new", "User:bob")]
    assert plan.lifted == {"A.lifted"}
    # a DENY for User:* would deny the flow too: reported, never added
    assert plan.open_to_all == {"A.kept": everyone, "A.new": everyone}


def test_a_lift_removes_the_protection_s_denies_only():
    bindings = [
        allow("A.", "User:bob", pattern="PREFIXED"),
        allow("A.", FLOW, pattern="PREFIXED"),
        deny_write("A.t", "User:bob"),
        deny_write("A.t", FLOW),  # the user's own choice for the flow: not the protection's
        deny_write("A.t", "User:carol"),  # carol has no grant: not the protection's
        AclBinding("A.t", "LITERAL", "User:bob", "10.0.0.1", "WRITE", "DENY"),  # one host only
    ]
    assert plan_lift(bindings, ["A.t", "A.other"], FLOW) == [deny_write("A.t", "User:bob")]


# --- the guard ------------------------------------------------------------------------------


def test_the_guard_adds_denies_once():
    admin = RecordingAdminOps({"A.t": 1})
    admin.acls = [allow("A.", "User:bob", pattern="PREFIXED")]
    assert guard(admin).refresh(["A.t"]) == [deny_write("A.t", "User:bob")]
    assert deny_write("A.t", "User:bob") in admin.acls
    assert guard(admin).refresh(["A.t"]) == []
    assert len(admin.calls_of("create_acls")) == 1


def test_a_lift_that_lands_while_the_guard_adds_takes_the_deny_back():
    """The lift writes its marker before deleting; the guard looks again after adding."""

    class LiftedMeanwhile(RecordingAdminOps):
        def create_acls(self, bindings):
            out = super().create_acls(bindings)
            self.acls.append(lifted_marker("A.t"))  # a cutover, right then
            return out

    admin = LiftedMeanwhile({"A.t": 1})
    admin.acls = [allow("A.", "User:bob", pattern="PREFIXED")]
    assert guard(admin).refresh(["A.t"]) == []
    assert deny_write("A.t", "User:bob") not in admin.acls


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("no authorizer", "it has no authorizer"),
        ("refused", "needs DESCRIBE and ALTER on the cluster"),
        ("no principal", "set A->B.mirror.protect.remote.topics.principal"),
    ],
)
def test_what_stops_protection_is_warned_once(setup, expected, caplog):
    admin = RecordingAdminOps({"A.t": 1})
    admin.acls = [allow("A.", "User:bob", pattern="PREFIXED")]
    admin.security_disabled = setup == "no authorizer"
    g = guard(admin, None if setup == "no principal" else FLOW)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            if setup == "refused":
                admin.failures["describe_topic_acls"] = broker_error(
                    "describe ACLs: not allowed", "CLUSTER_AUTHORIZATION_FAILED"
                )
            assert g.refresh(["A.t"]) == []
    warned = [r.getMessage() for r in caplog.records if expected in r.getMessage()]
    assert len(warned) == 1, caplog.text
    assert admin.calls_of("create_acls") == []


def test_a_transient_failure_is_raised_for_the_next_refresh():
    admin = RecordingAdminOps({"A.t": 1})
    admin.failures["describe_topic_acls"] = broker_error("timed out", "_TIMED_OUT", transient=True)
    with pytest.raises(BrokerError):
        guard(admin).refresh(["A.t"])


# --- the flow's principal and topics ---------------------------------------------------------

PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
    "A->B.topics": "orders.*",
    "mirror.state.dir": "/tmp/state",
}


def test_the_flow_principal_comes_from_b_s_producer_login_or_the_setting():
    props = {**PROPS, "B.security.protocol": "SASL_SSL", "B.sasl.mechanism": "SCRAM-SHA-512",
             "B.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
             'required username="mm2" password="pw";',
             "B.producer.sasl.jaas.config": 'org.apache.kafka.common.security.scram.'
             'ScramLoginModule required username="writer" password="pw";'}  # fmt: skip
    ctx = FlowContext.create(parse_config(props), "A->B")
    assert flow_principal(ctx)[0] == "User:writer"  # the producer writes the remote topics
    named = {**props, "A->B.mirror.protect.remote.topics.principal": "User:CN=mm2,O=x"}
    assert flow_principal(FlowContext.create(parse_config(named), "A->B"))[0] == "User:CN=mm2,O=x"


@pytest.mark.parametrize("value", ["mm2", "User:", ":mm2", "User:*"])
def test_a_principal_setting_that_is_no_principal_is_refused(value):
    with pytest.raises(ConfigError, match=r"mirror\.protect\.remote\.topics\.principal"):
        parse_config({**PROPS, "mirror.protect.remote.topics.principal": value})


def test_the_flow_s_remote_topics_are_found_on_the_target_by_name():
    ctx = FlowContext.create(parse_config(PROPS), "A->B")
    topics = ["A.orders", "A.orders-eu", "A.payments", "orders", "C.orders", "A.heartbeats"]
    assert flow_remote_topics(ctx, topics) == ["A.heartbeats", "A.orders", "A.orders-eu"]


def test_the_lift_line_names_topics_and_bindings():
    removed = [deny_write("A.t", "User:bob"), deny_write("A.t", "User:carol")]
    assert Lift("B", ["A.t", "A.u"], removed, applied=True).describe() == (
        "write protection lifted on B for 2 remote topics (A.t, A.u): removed DENY WRITE for "
        "A.t: User:bob, User:carol; they may write these topics now"
    )
    assert Lift("B", ["A.u"], [], applied=False).describe() == (
        "write protection would lift on B for 1 remote topic (A.u): no DENY binding to remove"
    )
    assert lifted_marker("A.t").principal == LIFTED_PRINCIPAL
    # not on the topic: with allow.everyone.if.no.acl.found, any ACL there would shut others out
    assert lifted_marker("A.t").resource_name != "A.t"


def test_a_lift_marks_first_then_removes_what_protects_then(monkeypatch):
    """A DENY a running flow adds while the lift runs: before the marker, the lift's second look
    finds and removes it; after it, the flow takes it back (see the guard's test above)."""

    class FlowAddsMeanwhile(RecordingAdminOps):
        def create_acls(self, bindings):
            self.acls.append(deny_write("A.orders", "User:carol"))  # the flow, right before
            return super().create_acls(bindings)

    admin = FlowAddsMeanwhile({"A.orders": 1, "A.payments": 1, "orders": 1})
    admin.acls = [
        allow("A.", "User:bob", pattern="PREFIXED"),
        allow("A.", "User:carol", pattern="PREFIXED"),
        deny_write("A.orders", "User:bob"),
    ]
    monkeypatch.setattr(FlowContext, "admin_ops", lambda self, side, timeout_s=None: admin)
    ctx = FlowContext.create(parse_config({**PROPS, "A->B.topics": ".*"}), "A->B")
    dry = lift_protection(ctx, ["A.orders"], apply=False)
    assert dry is not None and dry.removed == [deny_write("A.orders", "User:bob")]
    assert admin.calls_of("create_acls") == admin.calls_of("delete_acls") == []
    lift = lift_protection(ctx, ["A.orders", "A.gone"], apply=True)
    assert lift is not None and lift.topics == ["A.orders"]
    assert lift.removed == [
        deny_write("A.orders", "User:bob"),
        deny_write("A.orders", "User:carol"),
    ]
    order = [m for m, _args in admin.calls if m in ("create_acls", "delete_acls")]
    assert order == ["create_acls", "delete_acls"]
    assert admin.acls == [
        allow("A.", "User:bob", pattern="PREFIXED"),
        allow("A.", "User:carol", pattern="PREFIXED"),
        lifted_marker("A.orders"),
    ]
    every = lift_flow_protection(ctx.config, "A->B", apply=True)  # failover: found on B by name
    assert every is not None and every.topics == ["A.orders", "A.payments"]
    assert lifted_marker("A.payments") in admin.acls


def test_no_lift_without_acls_or_with_the_setting_off(monkeypatch):
    admin = RecordingAdminOps({"A.orders": 1})
    admin.security_disabled = True
    monkeypatch.setattr(FlowContext, "admin_ops", lambda self, side, timeout_s=None: admin)
    assert lift_flow_protection(parse_config(PROPS), "A->B", apply=True) is None
    off = {**PROPS, "mirror.protect.remote.topics": "false"}
    assert lift_flow_protection(parse_config(off), "A->B", apply=True) is None
