"""The performance page's charts, drawn from the results the benchmark recorded.

A whole ``make bench`` run writes its results block into ``bench/results.md``
(:func:`bench.report.render`); this reads that block's throughput and steady-load tables back
and draws two charts with plotly, exported as SVG by kaleido (which drives the machine's
Chromium, ``make chromium``): ``docs/images/bench-throughput.svg`` and
``docs/images/bench-latency.svg``. Static images, because the site opens from disk and GitHub
shows ``docs/performance.md`` with them. Each chart names the run it shows.

    .venv/bin/python -m bench.plots     # redraw from bench/results.md (bench/cli.py runs it too)
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cases import (
    BASELINE,
    MIRROR_ALO,
    MIRROR_EOS,
    MIRROR_TASKS1,
    MM2_DEFAULTS,
    MM2_EOS,
    MM2_TASKS4,
    SPARK_KAFKA,
    STEADY_ALO,
    STEADY_ALO_TASKS1,
    STEADY_DEFAULT,
    STEADY_MM2,
    STEADY_MM2_EOS,
    STEADY_SPARK_KAFKA,
    STEADY_TASKS1,
)
from bench.report import MARK_BEGIN, MARK_END, RESULTS

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
CHARTS = ("bench-throughput", "bench-latency")

#: The throughput chart's bars, top to bottom: the row's method in the results, its name on
#: the chart, the tool (its colour).
THROUGHPUT_ROWS = (
    (MIRROR_EOS.label, "mirror run, defaults (exactly once, 2 slots)", "mirror run"),
    (MIRROR_TASKS1.label, "mirror run, tasks.max = 1", "mirror run"),
    (MIRROR_ALO.label, "mirror run, at least once", "mirror run"),
    (MM2_DEFAULTS.label, "MM2, defaults (at least once, tasks.max = 1)", "MirrorMaker 2"),
    (MM2_TASKS4.label, "MM2, tasks.max = 4", "MirrorMaker 2"),
    (MM2_EOS.label, "MM2, exactly once", "MirrorMaker 2"),
    (SPARK_KAFKA.label, "Spark's Kafka connector", "Spark's Kafka connector"),
    (BASELINE.label, "copy loop (a), for scale", "copy loop"),
)
#: The latency chart's bars, top to bottom: the steady run's label in the results, its name.
LATENCY_ROWS = (
    (STEADY_DEFAULT.label, "mirror run, defaults (exactly once, 2 slots)"),
    (STEADY_TASKS1.label, "mirror run, exactly once, tasks.max = 1"),
    (STEADY_ALO.label, "mirror run, at least once"),
    (STEADY_ALO_TASKS1.label, "mirror run, at least once, tasks.max = 1"),
    (STEADY_MM2.label, "MM2, defaults (at least once)"),
    (STEADY_MM2_EOS.label, "MM2, exactly once"),
    (STEADY_SPARK_KAFKA.label, "Spark's Kafka connector (0.5 s trigger)"),
)
COLOURS = {
    "mirror run": "#1f77b4",
    "MirrorMaker 2": "#ff7f0e",
    "Spark's Kafka connector": "#2ca02c",
    "copy loop": "#9e9e9e",
}
WIDTH = 1000


@dataclass
class Results:
    """What the charts need from one results block."""

    run: str  # "2026-11-28 01:32 UTC, engine 8524a44": names the run on each chart
    throughput: dict[str, dict[str, float]] = field(default_factory=dict)  # case -> method -> rec/s
    latency: dict[str, tuple[float, float]] = field(default_factory=dict)  # run -> (p50, p99) ms


def _table(lines: list[str], first_header: str) -> list[dict[str, str]]:
    """The rows of the Markdown table whose header row starts with ``| first_header |``."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def read_results(text: str) -> Results:
    """The results block of ``bench/results.md`` (the text between its markers), read back."""
    block = text.split(MARK_BEGIN, 1)[1].split(MARK_END, 1)[0]
    started = re.search(r"^Run (\d{4}-\d\d-\d\d \d\d:\d\d):\d\d UTC", block, re.M)
    engine = re.search(r"mirror_lib git (\w+)", block)
    if not started or not engine:
        raise ValueError("bench/results.md's results block names no run (its 'Run ...' line)")
    results = Results(run=f"{started[1]} UTC, engine {engine[1]}")
    lines = block.splitlines()
    for row in _table(lines, "case"):
        if row.get("verified") == "yes":  # a copy that was not verified is no result
            results.throughput.setdefault(row["case"], {})[row["method"]] = _number(row["rec/s"])
    for row in _table(lines, "run"):
        results.latency[row["run"]] = (_number(row["(i) p50 ms"]), _number(row["(i) p99 ms"]))
    return results


def figures(results: Results) -> dict[str, Any]:
    """The two charts (plotly figures), keyed by their file names."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    cases = [c for c in ("200B", "10KB") if c in results.throughput]
    names = {"200B": "4,000,000 records of 200 B", "10KB": "150,000 records of 10 KB"}
    through = make_subplots(
        rows=len(cases), cols=1, subplot_titles=[names[c] for c in cases], vertical_spacing=0.16
    )
    for row, case in enumerate(cases, start=1):
        rows = [(name, tool, results.throughput[case][m]) for m, name, tool in THROUGHPUT_ROWS
                if m in results.throughput[case]]  # fmt: skip
        through.add_trace(
            go.Bar(
                x=[v for _n, _t, v in rows],
                y=[n for n, _t, _v in rows],
                orientation="h",
                marker_color=[COLOURS[t] for _n, t, _v in rows],
                text=[f"{v:,.0f}" for _n, _t, v in rows],
                textposition="outside",
                cliponaxis=False,
                showlegend=False,
            ),
            row=row,
            col=1,
        )
        through.update_xaxes(title_text="records/s", row=row, col=1, rangemode="tozero")
    through.update_yaxes(autorange="reversed")
    _style(
        through,
        "Throughput: records/s over the whole run, start-up included (more is better)",
        results.run,
        height=140 + 290 * len(cases),
    )
    runs = [(name, *results.latency[r]) for r, name in LATENCY_ROWS if r in results.latency]
    latency = go.Figure()
    for i, (what, colour) in enumerate((("p50", "#9ecae1"), ("p99", "#1f4e79"))):
        latency.add_trace(
            go.Bar(
                name=what,
                x=[r[1 + i] for r in runs],
                y=[r[0] for r in runs],
                orientation="h",
                marker_color=colour,
                text=[f"{r[1 + i]:,.1f} ms" for r in runs],
                textposition="outside",
                cliponaxis=False,
            )
        )
    latency.update_layout(barmode="group", legend={"traceorder": "normal"})
    latency.update_xaxes(title_text="ms from the record's CreateTime to a reader of the copy")
    latency.update_yaxes(autorange="reversed")
    _style(
        latency,
        "End-to-end latency at 5,000 records/s, every record timed (less is better)",
        results.run,
        height=130 + 58 * len(runs),
    )
    return {"bench-throughput": through, "bench-latency": latency}


def _style(fig: Any, title: str, run: str, height: int) -> None:
    fig.update_layout(
        title={"text": f"{title}<br><sup>bench run {run}; 2 cores, Apache Kafka brokers on the "
               "same machine; every copy verified</sup>", "x": 0.01},
        template="plotly_white",
        width=WIDTH,
        height=height,
        margin={"l": 20, "r": 90, "t": 80, "b": 60},
        font={"size": 13},
    )  # fmt: skip
    fig.update_yaxes(automargin=True)


def write_charts(results: Path = RESULTS, out: Path = IMAGES) -> list[Path]:
    """Draw the charts of ``results``' block into ``out`` (SVG); their paths."""
    figs = figures(read_results(results.read_text(encoding="utf-8")))
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figs.items():
        path = out / f"{name}.svg"
        fig.write_image(path, format="svg")  # kaleido, through the machine's Chromium
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_charts(*map(Path, sys.argv[1:3])):
        print(written)
