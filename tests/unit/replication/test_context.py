"""FlowContext: where a new flow starts (its source consumer's reset policy, from wherever MM2
would take it: a per-flow A->B.consumer.* override used to be missed) and admin.timeout.ms."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.replication.context import FlowContext, stable_slot

BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:1",
    "B.bootstrap.servers": "b:1",
    "A->B.enabled": "true",
}


@pytest.mark.parametrize(
    ("extra", "start"),
    [
        ({}, "earliest"),
        ({"A->B.consumer.auto.offset.reset": "latest"}, "latest"),
        ({"A->B.source.consumer.auto.offset.reset": "latest"}, "latest"),
        ({"A.consumer.auto.offset.reset": "latest"}, "latest"),
        ({"consumer.auto.offset.reset": "latest"}, "latest"),
        ({"A.auto.offset.reset": "latest"}, "latest"),
        (
            {
                "A.consumer.auto.offset.reset": "latest",
                "A->B.consumer.auto.offset.reset": "earliest",
            },
            "earliest",
        ),
        ({"B.consumer.auto.offset.reset": "latest"}, "earliest"),  # the target's: not the source
        (
            {
                "A->B.consumer.auto.offset.reset": "latest",
                "A->B.mirror.starting.offsets": "earliest",
            },
            "earliest",
        ),
        ({"mirror.starting.offsets": "latest"}, "latest"),
    ],
)
def test_a_new_flow_starts_where_its_source_consumer_would(extra: dict, start: str) -> None:
    ctx = FlowContext.create(parse_config({**BASE, **extra}), "A->B")
    assert ctx.starting_offsets == start


def test_admin_calls_take_admin_timeout_ms() -> None:
    ctx = FlowContext.create(parse_config({**BASE, "A->B.admin.timeout.ms": "1500"}), "A->B")
    assert ctx.admin_ops("source").timeout_s == 1.5
    assert ctx.admin_ops("target", 5).timeout_s == 5
    default = FlowContext.create(parse_config(BASE), "A->B")
    assert default.admin_ops("target").timeout_s == 60


@pytest.mark.parametrize(
    ("extra", "loops"),
    [
        ({}, []),  # prefixes: B->A never copies A.orders back (cycle detection)
        ({"replication.policy.class": "IdentityReplicationPolicy"}, ["orders", "payments"]),
        (
            {
                "replication.policy.class": "IdentityReplicationPolicy",
                "A->B.topics": "orders",
                "B->A.topics": "payments",
            },
            [],
        ),
        ({"replication.policy.class": "IdentityReplicationPolicy", "B->A.enabled": "false"}, []),
    ],
)
def test_a_topic_that_would_come_back_is_refused(extra: dict, loops: list) -> None:
    """Both ways enabled with names kept: a topic both flows copy would loop forever."""
    config = parse_config({**BASE, "B->A.enabled": "true", **extra})
    ctx = FlowContext.create(config, "A->B")
    topics = [t for t in ("orders", "payments", "heartbeats") if ctx.should_replicate(t)]
    assert [t for t in topics if ctx.comes_back(t)] == loops  # heartbeats are prefixed
    if loops:
        with pytest.raises(ConfigError, match=r"A->B\.topics = 'orders, payments'.*forever"):
            ctx.refuse_loops(topics)
        assert any("back and forth forever" in w for w in config.warnings)
    else:
        ctx.refuse_loops(topics)


def test_flow_setting_references_are_resolved_on_the_driver_for_the_executors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An executor may lack the driver's variable: the options carry the resolved flow
    settings, while client settings keep their references (secrets resolve where clients are)."""
    monkeypatch.setenv("MIRROR_TEST_TOPICS", "orders.*")
    props = {**BASE, "A->B.topics": "${env:MIRROR_TEST_TOPICS}", "B.sasl.password": "${env:PW}"}
    options = FlowContext.create(parse_config(props), "A->B").to_options()
    monkeypatch.delenv("MIRROR_TEST_TOPICS")
    executor = FlowContext.from_options(options)
    assert executor.settings.topics == ("orders.*",)
    assert executor.config.properties["B.sasl.password"] == "${env:PW}"


@given(st.text(max_size=20), st.integers(0, 1000), st.integers(1, 64))
def test_slots_are_stable_and_in_range(topic, partition, slots):
    slot = stable_slot(topic, partition, slots)
    assert 0 <= slot < slots
    assert slot == stable_slot(topic, partition, slots)


@given(st.text(min_size=1, max_size=30), st.integers(1, 8))
def test_a_topics_partitions_spread_over_all_slots(topic, slots):
    assert {stable_slot(topic, p, slots) for p in range(slots)} == set(range(slots))
