"""The budgets table of the benchmark (bench/budgets.py), from rows made here, without brokers."""

from __future__ import annotations

from typing import Any

from bench import budgets
from bench.measure import Measure
from bench.runner import Row

LOOP, MIRROR = budgets.BASELINE, budgets.MIRROR


def row(case: str, method: str, wall: float, nbytes: int, ok: bool = True, **extra: Any) -> Row:
    m = Measure(wall_s=wall, tree_cpu_s=wall, broker_cpu_s=2, peak_rss_mb=extra.pop("rss", 150))
    return Row(case, method, 4_000_000, nbytes, m, ok, extra)


def steady(p50: float, p99: float, received: int = 300_000) -> dict[str, Any]:
    return {
        "label": budgets.DEFAULT_STEADY,
        "e2e_p50_ms": p50,
        "e2e_p99_ms": p99,
        "received": received,
        "sent": 300_000,
        "ok": received == 300_000,
    }


def both_cases(wall: float, rss: int, steady_rps: int, steady_mbps: float) -> list[Row]:
    """The loop (30 s for 200 B, 100 MB/s for 10 KB) and a mirror with these measures."""
    return [
        row("200B", LOOP, 30, 800_000_000),
        row("200B", MIRROR, wall, 800_000_000, rss=rss, steady_rps=steady_rps),
        row("10KB", LOOP, 15, 1_500_000_000),
        row("10KB", MIRROR, 27, 1_500_000_000, steady_mbps=steady_mbps),
    ]


def test_a_run_within_every_budget_meets_each() -> None:
    rows = both_cases(26, rss=841, steady_rps=280_000, steady_mbps=100.0)
    found = budgets.evaluate(rows, [steady(170, 500)], {"rc": 0, "cpu_pct": 3.0})
    assert [b.met for b in found] == [True] * 7
    assert found[0].measured == "0.87x" and found[1].measured == "2.10x"
    assert found[4].name.startswith("10 KB") and found[4].measured == "1.00x"
    text = "\n".join(budgets.render(rows, [steady(170, 500)], {"rc": 0, "cpu_pct": 3.0}))
    assert (
        "| idle flow, every part: CPU of the process tree | < 5 % of a core | 3.0 % | yes |" in text
    )
    assert "(1.80x)" not in text and "(0.56x)" in text  # the 10 KB whole run, shown beside


def test_each_budget_fails_on_its_own_measure() -> None:
    rows = both_cases(34, rss=1_001, steady_rps=100_000, steady_mbps=80.0)
    rows[1].m.tree_cpu_s = 50  # own CPU 52 / 32
    found = budgets.evaluate(rows, [steady(250, 500)], {"rc": 0, "cpu_pct": 5.0})
    assert [b.met for b in found] == [False] * 7
    assert "NO |" in "\n".join(budgets.render(rows, [], None))


def test_an_unverified_copy_or_a_lost_record_meets_nothing() -> None:
    rows = [row("200B", LOOP, 30, 800_000_000), row("200B", MIRROR, 20, 800_000_000, ok=False)]
    assert not any(b.met for b in budgets.evaluate(rows, [steady(100, 200, 299_999)], None))
    (no_samples,) = budgets.evaluate([], [], {"rc": 1, "cpu_pct": None})
    assert (no_samples.measured, no_samples.met) == ("no samples", False)


def test_budgets_not_run_are_left_out() -> None:
    assert budgets.evaluate([], [], None) == [] and budgets.render([], [], None) == []
    only_loop = [row("10KB", LOOP, 15, 1_500_000_000)]
    assert budgets.evaluate(only_loop, [], None) == []


def test_a_mirror_run_without_a_steady_state_has_no_rate_budget() -> None:
    rows = [row("200B", LOOP, 30, 800_000_000), row("200B", MIRROR, 26, 800_000_000)]
    names = [b.name for b in budgets.evaluate(rows, [], None)]
    assert not any("rate" in n for n in names) and any("wall" in n for n in names)


def against_mm2(rows: list) -> list:
    """The budgets that compare with MM2 (the run's other budgets left out)."""
    return [b for b in budgets.evaluate(rows, [], None) if "MM2" in b.name]


OURS, MM2 = budgets.MIRROR_TASKS1.label, budgets.MM2_DEFAULTS.label


def test_against_mm2_the_rate_must_be_1_5x_at_no_more_cpu_per_record() -> None:
    rows = [
        row("200B", OURS, 10, 800_000_000),
        row("200B", MM2, 20, 800_000_000),
        row("200B", MIRROR, 10, 800_000_000),
    ]
    rate, untuned = against_mm2(rows)
    assert rate.name == "200B: throughput against MM2, tasks.max=1"
    assert untuned.name == "200B: untuned mirror against untuned MM2"
    assert (rate.measured, rate.met) == ("2.00x, CPU per record 0.55x", True)
    assert (untuned.measured, untuned.met) == ("2.00x", True)
    rows[1].m.wall_s = 14  # 1.43x: not 1.5x, but still ahead of untuned MM2
    rate, untuned = against_mm2(rows)
    assert (rate.met, untuned.met) == (False, True)
    rows[1].m.wall_s, rows[0].m.tree_cpu_s = 20, 30  # fast, but more CPU per record
    rate, _ = against_mm2(rows)
    assert not rate.met and "CPU per record 1.45x" in rate.measured
    rows[0].ok = rows[2].ok = False  # a copy that did not verify meets no budget
    assert not any(b.met for b in against_mm2(rows))


def test_tasks4_and_exactly_once_pairs_compare_the_same_settings() -> None:
    rows = [
        row("10KB", budgets.MIRROR_TASKS4.label, 10, 1_500_000_000),
        row("10KB", budgets.MM2_TASKS4.label, 16, 1_500_000_000),
        row("10KB", OURS, 10, 1_500_000_000),
        row("10KB", budgets.MM2_EOS.label, 30, 1_500_000_000),
    ]
    names = [(b.name, b.met) for b in budgets.evaluate(rows, [], None)]
    assert names == [
        ("10KB: throughput against MM2, tasks.max=4", True),
        ("10KB: throughput against MM2, tasks.max=1, both exactly-once", True),
    ]


def test_steady_p99_against_mm2_and_the_failover_counts() -> None:
    mm2_steady = {**steady(90, 400), "label": budgets.STEADY_MM2.label}
    (p99,) = [
        b for b in budgets.evaluate([], [steady(150, 450), mm2_steady], None) if "MM2" in b.name
    ]
    assert (p99.measured, p99.met) == ("450 ms against 400 ms", False)
    # at least once against MM2's default, exactly once against MM2's exactly once
    alo = {**steady(20, 40), "label": budgets.STEADY_ALO.label}
    mm2_eos = {**steady(30, 500), "label": budgets.STEADY_MM2_EOS.label}
    runs = [steady(150, 450), alo, mm2_steady, mm2_eos]
    pairs = [(b.measured, b.met) for b in budgets.evaluate([], runs, None) if "MM2" in b.name]
    assert pairs == [
        ("450 ms against 400 ms", False),
        ("40 ms against 400 ms", True),
        ("450 ms against 500 ms", True),
    ]
    # and at MM2's tasks.max, each delivery against its like
    alo1 = {**steady(20, 410), "label": budgets.STEADY_ALO_TASKS1.label}
    eos1 = {**steady(30, 490), "label": budgets.STEADY_TASKS1.label}
    found = budgets.evaluate([], [*runs, alo1, eos1], None)
    at_1 = [(b.name, b.measured, b.met) for b in found if b.name.endswith(", tasks.max=1")]
    assert at_1 == [
        (
            "steady 5,000 rec/s: p99 against MM2's, both at least once, tasks.max=1",
            "410 ms against 400 ms",
            False,
        ),
        (
            "steady 5,000 rec/s: p99 against MM2's, both exactly-once, tasks.max=1",
            "490 ms against 500 ms",
            True,
        ),
    ]
    counts = {"reread": 0, "skipped": 0, "untranslated": 0, "partitions": 48}
    result = {"ok": True, "groups": 16, "ours": counts, "mm2": {**counts, "reread": 31}}
    (fo,) = budgets.evaluate([], [], None, result)
    assert (fo.measured, fo.met) == ("0 / 0 (MM2: 31 / 0)", True)
    result["ours"] = {**counts, "skipped": 2}
    assert not budgets.evaluate([], [], None, result)[0].met
