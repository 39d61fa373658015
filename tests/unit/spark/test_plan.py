"""A run's plan: what it decides once, from the configuration, before anything starts."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.spark.plan import RunPlan
from tests.helpers.fake_spark_conf import FakeSpark

BASE = {
    "clusters": "A, B, C",
    "A.bootstrap.servers": "a:1",
    "B.bootstrap.servers": "b:1",
    "C.bootstrap.servers": "c:1",
    "A->B.enabled": "true",
    "A->C.enabled": "true",
    "mirror.state.dir": "/tmp/plan-state",
}
FANOUT = {**BASE, "mirror.fanout.enabled": "true"}


def test_fan_out_flows_share_one_read_group_of_the_plans_own_contexts() -> None:
    plan = RunPlan.resolve(parse_config(FANOUT))
    assert [g.name for g in plan.groups] == ["A->B,C"]
    (group,) = plan.groups
    assert group.contexts == plan.contexts  # the same objects: nothing is built twice
    alone = RunPlan.resolve(parse_config(BASE))
    assert [g.name for g in alone.groups] == ["A->B", "A->C"]


def test_companions_run_heartbeats_for_every_pair_and_checkpoints_for_the_run_flows() -> None:
    plan = RunPlan.resolve(parse_config(BASE), ["A->B"])
    jobs = {(ctx.flow.name, job) for ctx, job in plan.companions}
    assert ("A->B", "checkpoints") in jobs and ("A->C", "checkpoints") not in jobs
    assert {("A->B", "heartbeats"), ("A->C", "heartbeats"), ("B->A", "heartbeats")} <= jobs
    (mine,) = [c for c, job in plan.companions if job == "checkpoints"]
    assert mine is plan.contexts[0]
    assert RunPlan.resolve(parse_config(BASE), once=True).companions == ()  # one round at the end
    parts = RunPlan.resolve(parse_config(BASE), parts=["heartbeats"])
    assert parts.groups == () and {job for _c, job in parts.companions} == {"heartbeats"}


def test_tables_of_every_target_only_when_enabled_and_asked_for() -> None:
    config = parse_config({**BASE, "mirror.tables.enabled": "true"})
    plan = RunPlan.resolve(config, ["A->B"])
    assert {c: ctx.flow.name for c, ctx in plan.tables.items()} == {"B": "A->B", "C": "A->C"}
    assert RunPlan.resolve(config, parts=["replication"]).tables == {}
    assert RunPlan.resolve(parse_config({**BASE, "mirror.tables.enabled": "false"})).tables == {}


def test_the_tables_writer_is_chosen_from_the_plan_and_a_bad_one_fails_before_anything() -> None:
    config = parse_config({**BASE, "mirror.tables.enabled": "true"})
    assert RunPlan.resolve(config).tables_writer(FakeSpark()) == "delta-rs"
    forced = parse_config({**BASE, "mirror.tables.writer": "spark"})
    assert RunPlan.resolve(forced).settings.session_delta
    assert RunPlan.resolve(forced, parts=["replication"]).tables_writer(FakeSpark()) == "delta-rs"
    with pytest.raises(ConfigError, match=r"mirror\.tables\.writer"):
        RunPlan.resolve(parse_config({**BASE, "mirror.tables.writer": "hive"}))


def test_outage_limits_bound_once_runs_and_follow_the_setting() -> None:
    plan = RunPlan.resolve(parse_config(BASE)).settings
    assert plan.outage_limit_s is None and plan.stall_limit_s == 120  # continuous: forever
    assert RunPlan.resolve(parse_config(BASE), once=True).settings.outage_limit_s == 120
    limited = RunPlan.resolve(parse_config({**BASE, "mirror.outage.max.seconds": "30"})).settings
    assert limited.outage_limit_s == limited.stall_limit_s == 30


def test_bad_input_fails_in_the_plan() -> None:
    with pytest.raises(ConfigError, match="parts"):
        RunPlan.resolve(parse_config(BASE), parts=["replication", "backups"])
    with pytest.raises(ConfigError, match="--flow"):
        RunPlan.resolve(parse_config(BASE), ["A->D"])
    with pytest.raises(ConfigError, match=r"B->A\.enabled"):  # a flow that copies nothing
        RunPlan.resolve(parse_config(BASE), ["B->A"])
    assert RunPlan.resolve(parse_config(BASE), ["B->A"], parts=["heartbeats"]).names == ["B->A"]


def test_mode_and_flow_names_for_the_runs_events() -> None:
    assert RunPlan.resolve(parse_config(BASE), [" A -> B "]).names == ["A->B"]
    assert RunPlan.resolve(parse_config(BASE)).mode == "continuous"
    assert RunPlan.resolve(parse_config(BASE), duration_s=90).mode == "for 90s"
    assert RunPlan.resolve(parse_config(BASE), once=True).mode == "once"
