"""The performance page's charts (bench/plots.py): read back from the results block the bench
recorded, drawn with the numbers in their order, and the committed SVGs drawn from that block."""

from __future__ import annotations

from bench import plots
from bench.cases import MIRROR_EOS, MM2_DEFAULTS, SPARK_KAFKA, STEADY_DEFAULT, STEADY_MM2
from bench.report import MARK_BEGIN, MARK_END, RESULTS

BLOCK = f"""<!-- a head -->

{MARK_BEGIN}
Run 2026-11-28 01:32:13 UTC, took 46.8 min. Command (from the repository root):

Machine and software: nproc 2; mirror_lib git 8524a44 (HEAD, exported with git archive)

| case | method | records | wall s | rec/s | verified |
| --- | --- | ---: | ---: | ---: | --- |
| 200B | {MIRROR_EOS.label} | 4,000,000 | 21.2 | 188,347 | yes |
| 200B | {MM2_DEFAULTS.label} | 4,000,000 | 33.6 | 118,875 | yes |
| 200B | {SPARK_KAFKA.label} | 4,000,000 | 39.1 | 102,324 | NO |
| 10KB | {MIRROR_EOS.label} | 150,000 | 19.1 | 7,866 | yes |

| run | queries | (i) p50 ms | (i) p99 ms |
| --- | ---: | ---: | ---: |
| {STEADY_DEFAULT.label} | 5 | 33.4 | 84.6 |
| {STEADY_MM2.label} |  | 10.9 | 16.6 |
{MARK_END}
"""


def test_the_results_block_is_read_back():
    results = plots.read_results(BLOCK)
    assert results.run == "2026-11-28 01:32 UTC, engine 8524a44"
    # a copy that was not verified is no result
    assert results.throughput == {
        "200B": {MIRROR_EOS.label: 188_347, MM2_DEFAULTS.label: 118_875},
        "10KB": {MIRROR_EOS.label: 7_866},
    }
    assert results.latency == {STEADY_DEFAULT.label: (33.4, 84.6), STEADY_MM2.label: (10.9, 16.6)}


def test_the_charts_carry_the_numbers_in_order_and_name_the_run():
    figs = plots.figures(plots.read_results(BLOCK))
    assert list(figs) == list(plots.CHARTS)
    small, big = figs["bench-throughput"].data
    assert list(small.x) == [188_347, 118_875] and list(big.x) == [7_866]
    assert small.y[0].startswith("mirror run, defaults") and small.y[1].startswith("MM2")
    assert small.marker.color == (plots.COLOURS["mirror run"], plots.COLOURS["MirrorMaker 2"])
    p50, p99 = figs["bench-latency"].data
    assert (list(p50.x), list(p99.x)) == ([33.4, 10.9], [84.6, 16.6])
    for fig in figs.values():
        assert "bench run 2026-11-28 01:32 UTC, engine 8524a44" in fig.layout.title.text


def test_the_recorded_run_has_every_tool():
    results = plots.read_results(RESULTS.read_text())
    for case in ("200B", "10KB"):
        tools = {tool for m, _n, tool in plots.THROUGHPUT_ROWS if m in results.throughput[case]}
        assert tools == set(plots.COLOURS), case
    assert {STEADY_DEFAULT.label, STEADY_MM2.label} <= set(results.latency)


def test_the_committed_charts_show_the_recorded_run():
    """`make bench` redraws them after a whole run (bench/cli.py); else `python -m bench.plots`."""
    run = plots.read_results(RESULTS.read_text()).run
    for name in plots.CHARTS:
        svg = (plots.IMAGES / f"{name}.svg").read_text()
        assert svg.startswith("<svg") and f"bench run {run}" in svg, name
