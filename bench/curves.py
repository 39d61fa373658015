"""Curves for the scale and soak benches: a straight-line fit and its 30-day value, and plots
(plotly; a PNG through kaleido where it is installed, else the HTML alone)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

DAY_S = 86_400.0


def fit(ts: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope per second) of ``ys`` over ``ts``; a flat line at the one
    value when there are fewer than two points."""
    n = len(ts)
    if n < 2:
        return (ys[0] if ys else 0.0), 0.0
    mt, my = sum(ts) / n, sum(ys) / n
    var = sum((t - mt) ** 2 for t in ts)
    if var == 0:
        return my, 0.0
    slope = sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / var
    return my - slope * mt, slope


def at_30_days(
    ts: Sequence[float], ys: Sequence[float], skip: float = 0.25, window_s: float | None = None
) -> dict[str, float]:
    """The series' growth after its first ``skip`` of the run (start-up left out): the last
    value, the slope per day, the peak, and the value 30 days after the start on that line
    (never below the peak: a bounded series keeps its peak).

    ``window_s``: how long the series keeps what it gains (rows deleted after a retention, a
    log cut after its history, Spark's last batches): the line grows for that long, then stays
    flat, as old data leaves as fast as new data comes.
    """
    if not ts:
        return {"last": 0.0, "peak": 0.0, "per_day": 0.0, "at_30_days": 0.0}
    start = ts[0] + (ts[-1] - ts[0]) * skip
    kept = [(t, y) for t, y in zip(ts, ys, strict=True) if t >= start]
    a, b = fit([t for t, _y in kept], [y for _t, y in kept])
    peak = max(ys)
    span = 30 * DAY_S if window_s is None else min(30 * DAY_S, window_s)
    at30 = max(a + b * (ts[0] + span), peak)
    return {"last": ys[-1], "peak": peak, "per_day": b * DAY_S, "at_30_days": at30}


def plot(
    path: Path,
    title: str,
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    x_title: str,
    y_title: str,
    log_x: bool = False,
    lines: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None,
) -> list[Path]:
    """One chart of ``series`` (name -> (x, y)) as ``<path>.html``, and ``<path>.png`` when
    kaleido can export it; ``lines``: dashed series (extrapolations, budgets). Returns the
    files written."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, (xs, ys) in series.items():
        fig.add_trace(go.Scatter(x=list(xs), y=list(ys), name=name, mode="lines+markers"))
    for name, (xs, ys) in (lines or {}).items():
        fig.add_trace(go.Scatter(x=list(xs), y=list(ys), name=name, line={"dash": "dash"}))
    fig.update_layout(
        title=title, xaxis_title=x_title, yaxis_title=y_title, template="plotly_white"
    )
    if log_x:
        fig.update_xaxes(type="log")
    path.parent.mkdir(parents=True, exist_ok=True)
    html = path.with_suffix(".html")
    fig.write_html(html, include_plotlyjs="cdn")
    written = [html]
    try:
        fig.write_image(path.with_suffix(".png"), width=900, height=500)
        written.append(path.with_suffix(".png"))
    except Exception:  # no kaleido (or no browser for it): the HTML is the chart
        pass
    return written


def table(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    """A Markdown table of ``rows``."""
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = "".join("| " + " | ".join(str(r.get(c, "")) for c in columns) + " |\n" for r in rows)
    return head + body
