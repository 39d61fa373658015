"""The cutover report: refusals fail the command, a dry run says so, the rule is printed."""

from __future__ import annotations

import pytest

from mirror_lib.errors import ConfigError
from mirror_lib.replication.migration import cutover
from mirror_lib.replication.migration.cutover import (
    RULE,
    CutoverOptions,
    CutoverResult,
    PartitionCutover,
    Step,
    format_cutover,
)
from mirror_lib.replication.migration.cutover_groups import GroupMove
from mirror_lib.replication.migration.verify import PartitionVerification, VerifyReport


def result(*steps: Step, dry_run: bool = True) -> CutoverResult:
    return CutoverResult("A->B", "run1", dry_run, list(steps))


def test_a_refused_step_fails_and_a_waiting_one_does_not():
    assert result(Step("readiness", "ok", ""), Step("producers", "waiting", "")).ok
    assert not result(Step("readiness", "refused", "not ready: lag 12 > 10")).ok


def test_report_shows_partitions_groups_and_the_rule():
    r = result(Step("readiness", "ok", "lag 0 records"), Step("report", "would", RULE))
    r.partitions = [PartitionCutover("orders", "A.orders", 0, 120, 118, "migrated")]
    r.groups = [GroupMove("app", "orders", "A.orders", 0, 100, 98, None, "would commit")]
    text = format_cutover(r)
    assert text.startswith("cutover A->B: dry run (add --apply to change anything)")
    assert "[      ok] readiness: lag 0 records" in text
    assert "orders" in text and "120" in text and "118" in text and "migrated" in text
    assert "app" in text and "would commit" in text
    assert text.endswith(f"rule for {RULE}")


def test_bad_options_are_refused_before_anything_starts():
    with pytest.raises(ConfigError, match="max_lag = -1: expected a number >= 0"):
        CutoverOptions(max_lag=-1)
    with pytest.raises(ConfigError, match="retire alone"):
        CutoverOptions(retire=True, producers_stopped=True)


def test_a_stray_record_on_the_target_refuses_the_cutover(monkeypatch):
    stray = PartitionVerification(
        flow="A->B", topic="t", remote_topic="A.t", partition=1, status="stray", behind=0,
        upstream_from=0, upstream_to=5, downstream_from=0, downstream_to=5, records=5,
        total_records=5, checksum="c", source_end_offset=5, stray=1, stray_offsets="7",
    )  # fmt: skip
    report = VerifyReport("A->B", "r1", [stray])
    monkeypatch.setattr(cutover, "verify_flow", lambda *_a, **_k: report)

    class Ctx:
        class flow:
            name = "A->B"

    step, _ = cutover._wait_verified(None, Ctx(), ["t"], CutoverOptions(apply=True), None)
    assert (step.status, step.detail) == ("refused", f"t[1] {stray.describe()}")
