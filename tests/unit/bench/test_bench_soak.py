"""The soak's reading of RSS: growth from the first window to the last, per process role."""

from __future__ import annotations

import os

from bench import soak, state


def samples(minutes: int, rss, anon=None) -> list[dict]:
    return [
        {
            "t_s": m * 60,
            "processes": {"driver": {"rss_mb": rss(m), **({"anon_mb": anon(m)} if anon else {})}},
        }
        for m in range(minutes + 1)
    ]


def test_a_two_hour_soak_compares_its_first_hour_with_its_last() -> None:
    # 100 MB, then 110 from minute 20, then 120 for the second hour: hours and thirds differ
    run = samples(120, lambda m: 100 if m <= 20 else (110 if m <= 60 else 120))
    assert soak.rss_growth(run)["driver"] == 12.5
    assert soak.rss_growth(run, window_s=40 * 60)["driver"] == 14.3


def test_a_shorter_soak_compares_its_thirds_and_skips_the_first_sample() -> None:
    run = samples(60, lambda m: 10 if m == 0 else (100 if m <= 20 else (105 if m < 40 else 120)))
    assert soak.rss_growth(run)["driver"] == 20.0


def test_growth_reads_the_anonymous_part_apart() -> None:
    run = samples(120, lambda m: 100 if m <= 60 else 120, anon=lambda m: 50)
    assert soak.rss_growth(run)["driver"] == 20.0
    assert soak.rss_growth(run, "anon_mb")["driver"] == 0.0
    assert soak.rss_growth(run)["jvm"] is None


def test_this_process_has_an_anonymous_part_below_its_rss() -> None:
    st = state._status(os.getpid())
    assert 0 < st["RssAnon"] < st["VmRSS"]


def test_a_tables_files_on_disk_reach_30_days_as_live_plus_replaced() -> None:
    """Replaced files stay for the history's hours, live ones for the retention's days: the
    files on disk take each part on its own line, not their sum on the retention's."""
    hours = 4

    def table(m: int) -> dict:
        live, replaced = 100, min(m, 120) // 2  # replaced files level off after the 2 h history
        return {"files": live, "replaced_files": replaced, "disk_files": live + replaced}

    run = [{"t_s": m * 60, "state": {"tables": {"t": table(m)}}} for m in range(hours * 60 + 1)]
    fits = soak.summarize(run, soak.parse_args(["--history-hours", "2"]))
    disk, live = fits["state.tables.t.disk_files"], fits["state.tables.t.files"]
    replaced = fits["state.tables.t.replaced_files"]
    assert disk["at_30_days"] == live["at_30_days"] + replaced["at_30_days"]
    assert disk["at_30_days"] < 300 and disk["bounded_by"] == "its live and replaced files' lines"
