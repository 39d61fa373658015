"""The runbooks (docs/operations: failover, migration, outages): numbered steps and a section on
failures, and the outputs they show still what the code prints for the same offsets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mirror_lib.replication.migration.failover import TranslatedOffset, format_failover

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations"
KEPT = "kept (the target is at or past it)"


@pytest.mark.parametrize("page", ["failover.md", "migration.md", "outages.md"])
def test_each_runbook_has_numbered_steps_and_says_what_to_do_when_they_fail(page):
    text = (DOCS / page).read_text()
    runbook = text[text.index("## Runbook") :]
    steps = [int(n) for n in re.findall(r"^(\d+)\. \*\*", runbook, re.M)]
    assert steps[:4] == [1, 2, 3, 4], steps
    assert re.search(r"^### When ", runbook, re.M), page  # what to do when a step fails
    assert runbook.count("```\n") >= 4, page  # outputs shown, not only commands


def rows(action: str, current: int | None) -> list[TranslatedOffset]:
    return [
        TranslatedOffset("A.orders", p, o, current if current is None else o, action=action)
        for p, o in enumerate((120, 130, 140))
    ]


def test_the_failover_runbook_shows_what_failover_prints():
    text = (DOCS / "failover.md").read_text()
    for shown in (
        format_failover(rows("would commit", None), "orders-app", "B", applied=False),
        format_failover(rows("committed", None), "orders-app", "B", applied=True),
        format_failover(rows(KEPT, 0), "orders-app", "B", applied=False),
    ):
        assert f"    {shown}\n" in text, shown
