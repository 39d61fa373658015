"""The budgets of issue "Replication at Kafka speed", checked against one benchmark run.

Each budget compares a mirror row with the loop (a) of the same case, a steady-load run, or the
idle flow; a budget whose rows were not run (``--cases``, ``--quick`` sizes) is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import idle as idle_flow
from bench.cases import (
    MIRROR_TASKS1,
    MIRROR_TASKS4,
    MM2_DEFAULTS,
    MM2_EOS,
    MM2_TASKS4,
    STEADY_ALO,
    STEADY_ALO_TASKS1,
    STEADY_DEFAULT,
    STEADY_MM2,
    STEADY_MM2_EOS,
    STEADY_TASKS1,
)
from bench.runner import Row

BASELINE, MIRROR = "baseline loop (a)", "mirror EOS (b)"
DEFAULT_STEADY = STEADY_DEFAULT.label
# (ours, MM2's, what the pair compares): the same tasks.max; MM2 EOS against our EOS at 1 slot
MM2_PAIRS = (
    (MIRROR_TASKS1.label, MM2_DEFAULTS.label, "tasks.max=1"),
    (MIRROR_TASKS4.label, MM2_TASKS4.label, "tasks.max=4"),
    (MIRROR_TASKS1.label, MM2_EOS.label, "tasks.max=1, both exactly-once"),
)


@dataclass(frozen=True)
class Budget:
    """One budget: what it asks, what the run measured, whether that meets it."""

    name: str
    limit: str
    measured: str
    met: bool


def _ratio(
    rows: list[Row],
    case: str,
    name: str,
    limit: float,
    at_most: bool,
    of: Callable[[Row], float | None],
) -> Budget | None:
    """``of(mirror) / of(loop)`` for ``case`` against ``limit`` (an upper or a lower bound); None
    when either row or measure is missing (a run too short for a steady state has no rate)."""
    loop, mirror = _pair(rows, case)
    if loop is None or mirror is None:
        return None
    theirs, ours = of(loop), of(mirror)
    if not theirs or ours is None:
        return None
    ratio = ours / theirs
    met = mirror.ok and (ratio <= limit if at_most else ratio >= limit)
    sign = "<=" if at_most else ">="
    return Budget(name, f"{sign} {limit:g}x the loop", f"{ratio:.2f}x", met)


def _pair(rows: list[Row], case: str) -> tuple[Row | None, Row | None]:
    """The loop (a) and the mirror (b) rows of ``case``, each None when it was not run."""
    found = {r.method: r for r in rows if r.case == case}
    return found.get(BASELINE), found.get(MIRROR)


def _peak_rss(rows: list[Row]) -> Budget | None:
    """The 200 B mirror run's peak RSS against 1 GB (10^9 bytes)."""
    _loop, mirror = _pair(rows, "200B")
    if mirror is None:
        return None
    rss = mirror.m.peak_rss_mb
    return Budget(
        "200 B --once: peak RSS of the process tree",
        "<= 1,000 MB",
        f"{rss:,.0f} MB",
        mirror.ok and rss <= 1_000,
    )


def _steady_rate(row: Row, key: str) -> float | None:
    value = row.extra.get(key)
    return None if value is None else float(value)


def against_mm2(rows: list[Row]) -> list[Budget]:
    """Per case and pair of :data:`MM2_PAIRS`: our records/s of wall time >= 1.5x MM2's, at no
    more own CPU (process tree + brokers) per record; and our defaults (b), no tuning at all,
    >= MM2's defaults."""
    out = []
    for case in dict.fromkeys(r.case for r in rows):
        found = {r.method: r for r in rows if r.case == case}
        for ours_label, theirs_label, what in MM2_PAIRS:
            ours, theirs = found.get(ours_label), found.get(theirs_label)
            if ours is None or theirs is None or not theirs.rps or not theirs.m.own_cpu_s:
                continue
            speed = ours.rps / theirs.rps
            cpu = ours.m.own_cpu_s / theirs.m.own_cpu_s  # the same records: CPU per record
            ok = ours.ok and theirs.ok
            steady = _steady_rate(ours, "steady_rps"), _steady_rate(theirs, "steady_rps")
            aside = f"; steady {steady[0] / steady[1]:.2f}x" if steady[0] and steady[1] else ""
            out.append(
                Budget(
                    f"{case}: throughput against MM2, {what}",
                    ">= 1.5x MM2's rec/s, CPU per record <= MM2's",
                    f"{speed:.2f}x, CPU per record {cpu:.2f}x{aside}",
                    ok and speed >= 1.5 and cpu <= 1.0,
                )
            )
        ours, theirs = found.get(MIRROR), found.get(MM2_DEFAULTS.label)
        if ours is not None and theirs is not None and theirs.rps:
            speed = ours.rps / theirs.rps
            out.append(
                Budget(
                    f"{case}: untuned mirror against untuned MM2",
                    ">= 1x MM2's rec/s",
                    f"{speed:.2f}x",
                    ours.ok and theirs.ok and speed >= 1.0,
                )
            )
    return out


# (ours, MM2's, what the pair compares) at the steady rate: our default against MM2's default,
# then each delivery against its like, at our default tasks.max (2) and at MM2's (1), as the
# throughput pairs compare the same tasks.max
STEADY_PAIRS = (
    (DEFAULT_STEADY, STEADY_MM2.label, "both defaults (ours exactly-once, tasks.max=2)"),
    (STEADY_ALO.label, STEADY_MM2.label, "both at least once, ours tasks.max=2, MM2's 1"),
    (DEFAULT_STEADY, STEADY_MM2_EOS.label, "both exactly-once, ours tasks.max=2, MM2's 1"),
    (STEADY_ALO_TASKS1.label, STEADY_MM2.label, "both at least once, tasks.max=1"),
    (STEADY_TASKS1.label, STEADY_MM2_EOS.label, "both exactly-once, tasks.max=1"),
)


def steady_against_mm2(steady: list[dict[str, Any]]) -> list[Budget]:
    """Each :data:`STEADY_PAIRS` pair that ran: our p99 against MM2's, both end to end."""
    runs = {s["label"]: s for s in steady}
    out = []
    for mine, theirs_label, what in STEADY_PAIRS:
        ours, theirs = runs.get(mine), runs.get(theirs_label)
        if ours is None or theirs is None:
            continue
        p99, mm2_p99 = ours["e2e_p99_ms"], theirs["e2e_p99_ms"]
        met = ours["ok"] and p99 is not None and mm2_p99 is not None and p99 <= mm2_p99
        out.append(
            Budget(
                f"steady 5,000 rec/s: p99 against MM2's, {what}",
                "<= MM2's p99",
                f"{p99} ms against {mm2_p99} ms",
                met,
            )
        )
    return out


def failover(result: dict[str, Any] | None) -> Budget | None:
    """Ours after a failover of every group: nothing read again, nothing skipped."""
    if result is None or not result.get("ours"):
        return None
    ours, mm2 = result["ours"], result.get("mm2", {})
    return Budget(
        f"failover of {result['groups']} groups: records re-read / skipped at the translated"
        " offsets",
        "0 / 0 (every partition translated)",
        f"{ours['reread']} / {ours['skipped']} (MM2: {mm2.get('reread')} / {mm2.get('skipped')})",
        result["ok"] and ours["reread"] == 0 and ours["skipped"] == 0 and not ours["untranslated"],
    )


def evaluate(
    rows: list[Row],
    steady: list[dict[str, Any]],
    idle: dict[str, Any] | None,
    failover_result: dict[str, Any] | None = None,
) -> list[Budget]:
    """The budgets this run measured, in the issue's order."""
    out: list[Budget | None] = [
        _ratio(
            rows,
            "200B",
            "200 B --once: wall, Spark start and stop included",
            1.1,
            True,
            lambda r: r.m.wall_s,
        ),
        _ratio(
            rows,
            "200B",
            "200 B --once: steady-state rate",
            1.0,
            False,
            lambda r: _steady_rate(r, "steady_rps") if r.method == MIRROR else r.rps,
        ),
        _ratio(
            rows,
            "200B",
            "200 B --once: own CPU (process tree + brokers)",
            1.5,
            True,
            lambda r: r.m.own_cpu_s,
        ),
        _peak_rss(rows),
        _ratio(
            rows,
            "10KB",
            "10 KB --once: MB/s of the copy (steady state)",
            0.9,
            False,
            lambda r: _steady_rate(r, "steady_mbps") if r.method == MIRROR else r.mbps,
        ),
    ]
    run = next((s for s in steady if s["label"] == DEFAULT_STEADY), None)
    if run is not None:
        p50, p99 = run["e2e_p50_ms"], run["e2e_p99_ms"]
        out.append(
            Budget(
                "steady 5,000 rec/s, default queries: end-to-end latency, every record once",
                "p50 <= 200 ms, p99 <= 1,000 ms",
                f"p50 {p50} ms, p99 {p99} ms, {run['received']:,}/{run['sent']:,} received",
                run["ok"] and p50 is not None and p50 <= 200 and p99 <= 1_000,
            )
        )
    out += steady_against_mm2(steady)
    out += against_mm2(rows)
    out.append(failover(failover_result))
    if idle is not None:
        pct = idle["cpu_pct"]
        out.append(
            Budget(
                "idle flow, every part: CPU of the process tree",
                "< 5 % of a core",
                f"{pct:.1f} %" if idle_flow.sampled(idle) else "no samples",
                idle["rc"] == 0 and idle_flow.sampled(idle) and pct < 5,
            )
        )
    return [b for b in out if b is not None]


def whole_run_10kb(rows: list[Row]) -> str:
    """The 10 KB case's MB/s from process start to exit against the loop's, Spark's fixed start
    and stop included: shown beside the budget, which is the copy's rate (docs/performance.md)."""
    loop, mirror = _pair(rows, "10KB")
    if loop is None or mirror is None or not loop.mbps:
        return ""
    return (
        f"10 KB over the whole run, process start to exit: {mirror.mbps:.1f} MB/s against the"
        f" loop's {loop.mbps:.1f} ({mirror.mbps / loop.mbps:.2f}x); the difference is Spark's"
        " fixed start and stop (docs/performance.md#how-to-read-it)."
    )


def render(
    rows: list[Row],
    steady: list[dict[str, Any]],
    idle: dict[str, Any] | None,
    failover_result: dict[str, Any] | None = None,
) -> list[str]:
    """The budgets table of the results block (nothing when no budget was measured)."""
    budgets = evaluate(rows, steady, idle, failover_result)
    if not budgets:
        return []
    lines = [
        'Budgets (issue "Replication at Kafka speed"; the loop is (a) of the same case; rec/s'
        " of wall time, own CPU = process tree + brokers):",
        "",
        "| budget | limit | measured | met |",
        "| --- | --- | --- | --- |",
        *(f"| {b.name} | {b.limit} | {b.measured} | {'yes' if b.met else 'NO'} |" for b in budgets),
    ]
    whole = whole_run_10kb(rows)
    return [*lines, *(["", whole] if whole else []), ""]
