"""Fan-out grouping without Kafka: which flows share one read, and what the group must agree on."""

from __future__ import annotations

import pytest

from mirror_lib.config.fanout import ENABLED_KEY, check_group, group_name, read_groups
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError

THREE = {
    "clusters": "A, B, C",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "C.bootstrap.servers": "c:9092",
}


def config(**props: str):
    return parse_config({**THREE, **props})


def names(groups) -> list[list[str]]:
    return [[f.name for f in group] for group in groups]


def enabled_groups(**props: str) -> list[list[str]]:
    return names(read_groups(config(**props).enabled_flows()))


def test_off_by_default_every_flow_reads_alone():
    cfg = config(**{"A->B.enabled": "true", "A->C.enabled": "true"})
    assert not cfg.flow("A->B").settings.fanout
    assert cfg.flow("A->B").settings.fanout_max_lag_records == 100_000
    assert names(read_groups(cfg.enabled_flows())) == [["A->B"], ["A->C"]]


def test_enabled_flows_of_one_source_share_one_read_named_after_all_targets():
    groups = read_groups(
        config(**{"A->B.enabled": "true", "A->C.enabled": "true", ENABLED_KEY: "true"}).flows
    )
    assert names(groups)[0] == ["A->B", "A->C"]
    assert group_name(groups[0]) == "A->B,C"
    # every other flow (disabled here) is a group of its own, in the configuration's order
    assert names(groups)[1:] == [["B->A"], ["B->C"], ["C->A"], ["C->B"]]


def test_group_order_follows_the_flows_and_stands_where_its_first_flow_stands():
    props = {
        "clusters": "C, A, B",  # flows: C->A, C->B, A->C, A->B, B->C, B->A
        "C->A.enabled": "true",
        "A->C.enabled": "true",
        "A->B.enabled": "true",
        "B->C.enabled": "true",
        "A->C.mirror.fanout.enabled": "true",
        "A->B.mirror.fanout.enabled": "true",
    }
    groups = read_groups(config(**props).enabled_flows())
    assert names(groups) == [["C->A"], ["A->C", "A->B"], ["B->C"]]
    assert [group_name(g) for g in groups] == ["C->A", "A->C,B", "B->C"]


def test_groups_never_mix_sources():
    groups = enabled_groups(**{
        ENABLED_KEY: "true",
        "A->B.enabled": "true",
        "A->C.enabled": "true",
        "B->A.enabled": "true",
        "B->C.enabled": "true",
    })  # fmt: skip
    assert groups == [["A->B", "A->C"], ["B->A", "B->C"]]


def test_a_single_fanout_flow_stays_alone():
    groups = read_groups(config(**{"A->B.enabled": "true", ENABLED_KEY: "true"}).enabled_flows())
    assert names(groups) == [["A->B"]]
    assert group_name(groups[0]) == "A->B"


def test_per_flow_setting_groups_only_the_flows_that_set_it():
    both = enabled_groups(**{
        "A->B.enabled": "true",
        "A->C.enabled": "true",
        "A->B.mirror.fanout.enabled": "true",
        "A->C.mirror.fanout.enabled": "true",
    })  # fmt: skip
    assert both == [["A->B", "A->C"]]
    one = enabled_groups(**{
        "A->B.enabled": "true",
        "A->C.enabled": "true",
        "A->B.mirror.fanout.enabled": "true",
    })  # fmt: skip
    assert one == [["A->B"], ["A->C"]]


def test_a_flow_can_opt_out_of_a_top_level_fanout():
    groups = enabled_groups(**{
        ENABLED_KEY: "true",
        "A->B.enabled": "true",
        "A->C.enabled": "true",
        "A->C.mirror.fanout.enabled": "false",
    })  # fmt: skip
    assert groups == [["A->B"], ["A->C"]]


def test_disabled_flows_are_never_grouped():
    cfg = config(**{ENABLED_KEY: "true", "A->B.enabled": "true", "A->C.enabled": "false"})
    assert cfg.flow("A->C").settings.fanout  # the setting is on, the flow is not
    groups = names(read_groups(cfg.flows))
    assert ["A->B"] in groups and ["A->C"] in groups
    assert all(len(g) == 1 for g in groups)


@pytest.mark.parametrize(
    ("key", "mine", "shown"),
    [
        ("tasks.max", "4", "4"),
        ("mirror.batch.duration.seconds", "60", "60"),
        ("mirror.trigger.interval.seconds", "0.5", "0.5"),
        ("refresh.topics.enabled", "false", "False"),
    ],
)
def test_a_group_that_disagrees_on_the_shared_read_is_refused_naming_the_flow_key(
    key: str, mine: str, shown: str
):
    props = {ENABLED_KEY: "true", "A->B.enabled": "true", "A->C.enabled": "true"}
    with pytest.raises(ConfigError) as caught:
        config(**props, **{f"A->C.{key}": mine})
    err = caught.value
    assert err.key == f"A->C.{key}"
    assert shown in str(err.value)
    assert "A->B" in err.expected and ENABLED_KEY in err.expected
    assert f"A->C.{key}" in str(err) and "A->B" in str(err)


def test_disagreement_is_fine_when_the_flows_do_not_share_a_read():
    # fan-out off for one of them, or the other flow disabled: each reads alone, anything goes
    config(**{
        "A->B.enabled": "true",
        "A->C.enabled": "true",
        "A->B.mirror.fanout.enabled": "true",
        "A->C.tasks.max": "4",
    })  # fmt: skip
    config(**{
        ENABLED_KEY: "true",
        "A->B.enabled": "true",
        "A->C.enabled": "false",
        "A->C.mirror.batch.duration.seconds": "60",
    })  # fmt: skip
    # flows of another source are another group: B's settings need not match A's
    config(**{
        ENABLED_KEY: "true",
        "A->B.enabled": "true",
        "A->C.enabled": "true",
        "B->C.enabled": "true",
        "B->A.enabled": "true",
        "B->C.tasks.max": "3",
        "B->A.tasks.max": "3",
    })  # fmt: skip


def test_the_same_values_set_per_flow_agree():
    groups = enabled_groups(**{
        ENABLED_KEY: "true",
        "A->B.enabled": "true",
        "A->C.enabled": "true",
        "A->B.tasks.max": "3",
        "A->C.tasks.max": "3",
        "mirror.batch.duration.seconds": "30",
    })  # fmt: skip
    assert groups == [["A->B", "A->C"]]


def test_check_group_names_the_file_it_looked_in():
    # fan-out off, so parsing accepts it; check_group is what the runner calls on a group
    cfg = config(**{"A->B.enabled": "true", "A->C.enabled": "true", "A->C.tasks.max": "3"})
    with pytest.raises(ConfigError) as caught:
        check_group([cfg.flow("A->B"), cfg.flow("A->C")], origin="mm2.properties")
    assert caught.value.key == "A->C.tasks.max"
    assert "(looked in mm2.properties)" in str(caught.value)


def test_max_lag_records_per_flow_and_refused_below_one():
    cfg = config(**{
        ENABLED_KEY: "true",
        "A->B.enabled": "true",
        "A->C.enabled": "true",
        "A->C.mirror.fanout.max.lag.records": "500",
    })  # fmt: skip
    # a per-target bound: the flows of a group need not agree on it
    assert cfg.flow("A->B").settings.fanout_max_lag_records == 100_000
    assert cfg.flow("A->C").settings.fanout_max_lag_records == 500
    with pytest.raises(ConfigError) as caught:
        config(**{"A->B.enabled": "true", "mirror.fanout.max.lag.records": "0"})
    assert caught.value.key.endswith("mirror.fanout.max.lag.records")
    assert ">= 1" in caught.value.expected


def test_fanout_enabled_must_be_a_boolean():
    with pytest.raises(ConfigError) as caught:
        config(**{"A->B.enabled": "true", "A->B.mirror.fanout.enabled": "yes"})
    assert caught.value.key.endswith("mirror.fanout.enabled")
    assert caught.value.value == "yes"
