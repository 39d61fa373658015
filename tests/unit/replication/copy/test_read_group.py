"""The flows one replication query serves (ReadGroup): a fan-out group's name, its members'
union of topics, and its trip to Spark's processes as data source options."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.replication.copy.read_group import ReadGroup, split_group_name

PROPS = {"clusters": "A, B, C", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "C.bootstrap.servers": "c:1", "A->B.enabled": "true", "A->B.topics": "orders.*",
         "A->C.enabled": "true", "A->C.topics": "payments"}  # fmt: skip


def test_a_group_name_lists_its_flows_and_a_flow_is_a_group_of_one():
    assert split_group_name("A->B, C") == ["A->B", "A->C"]
    assert split_group_name("A->B") == ["A->B"]
    for bad in ("A", "A->"):
        with pytest.raises(ConfigError, match="a flow A->B or a fan-out group A->B,C"):
            split_group_name(bad)


def test_a_group_reads_the_union_of_its_members_topics_and_is_led_by_its_first():
    group = ReadGroup.create(parse_config(PROPS), "A->B,C")
    assert group.name == "A->B,C" and group.fanout and group.lead.flow.name == "A->B"
    assert group.flow_names == ["A->B", "A->C"] and [c.target for c in group] == ["B", "C"]
    assert group.should_replicate("orders.eu") and group.should_replicate("payments")
    assert not group.should_replicate("audit")
    assert group.context("A->C").target == "C"
    with pytest.raises(ConfigError, match="one of A->B, A->C"):
        group.context("A->D")
    assert not ReadGroup.create(parse_config(PROPS), "A->B").fanout


def test_a_group_comes_back_whole_from_its_data_source_options():
    options = ReadGroup.create(parse_config(PROPS), "A->B,C").to_options()
    again = ReadGroup.from_options(options)
    assert again.name == "A->B,C" and again.flow_names == ["A->B", "A->C"]
    assert again.should_replicate("payments") and not again.should_replicate("audit")
