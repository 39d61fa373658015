"""Static plotly dashboard (``mirror dashboard``): the Lakeview SQL on Spark, one offline HTML file.

Every figure runs one file of ``dashboards/sql`` (figure name = file stem) over the views of
:func:`mirror_lib.spark.views.create_views`, so this page and the Lakeview dashboard show the same
numbers. The SQL files are found in an installed wheel (``mirror_lib/dashboard_sql``, package
data) or in a source checkout / editable install (``dashboards/sql``), see :func:`sql_dir`.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.tables.location import (
    catalog_tables,
    spark_writes_tables,
    tables_root,
)

if TYPE_CHECKING:
    import plotly.graph_objects as go

NO_DATA = "no data yet"
#: What the stale-data tile says when no enabled flow skips stale records.
SKIPPING_OFF = "off: no flow sets mirror.skip.older.than.ms (stale records are copied)"
MAX_TABLE_ROWS = 200
#: Line charts draw a row per topic (one time axis) up to this many topics, so that topics
#: with the same figures do not hide each other; more topics share one plot.
MAX_FACETS = 8
#: Page sections: heading -> figure names, in order. Figures of other SQL files go to "More".
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Replication latency", ("latency",)),
    ("Throughput", ("throughput", "skipped")),
    ("Replication lag", ("lag_over_time", "lag")),
    ("Heartbeats", ("heartbeats",)),
    ("Failover readiness", ("failover_readiness", "offset_translation")),
    ("Gaps and flow events", ("gaps",)),
    ("Verification and cutover", ("verifications", "migrations")),
)
#: Table column headers with their units (other columns: the name with spaces).
HEADERS = {
    "ts": "time (UTC)",
    "last_heartbeat": "last heartbeat (UTC)",
    "measured_ts": "measured (UTC)",
    "checkpoint_age_seconds": "checkpoint age (s)",
    "heartbeat_age_seconds": "heartbeat age (s)",
    "age_seconds": "age (s)",
    "replication_lag": "lag (records)",
    "upstream_offset": "committed offset on source",
    "offset": "translated offset on target",
    "group_id": "group",
    "verified_ts": "verified (UTC)",
    "status_ts": "since (UTC)",
}
TITLES = {
    "latency": "Replication latency per topic (ms, log scale): p50 solid, p99 dashed",
    "throughput": "Records replicated per minute, per topic",
    "lag_over_time": "Replication lag per topic over time (records behind the source)",
    "lag": "Current replication lag per partition (records)",
    "heartbeats": "Heartbeat age per cluster pair (seconds since the last heartbeat)",
    "failover_readiness": "Failover readiness per consumer group",
    "offset_translation": "Translated offsets per group and partition (= `mirror translate`)",
    "skipped": "Stale records skipped per minute, per topic (mirror.skip.older.than.ms)",
    "gaps": "Gaps, skips, outages, errors and decode errors (newest first)",
    "verifications": "Latest `mirror verify` per partition (differences first)",
    "migrations": "Cutover per partition: end offset on the source, matching offset on the target",
}
_CHART_HEIGHT = 380
_FACET_HEIGHT = 170  # px per topic row of a line chart
#: How a table's height is estimated, so that its last row is not cut: plotly wraps a cell's
#: text at its column's width and grows the row. The width is a narrow page's (wider pages
#: wrap less, leaving some room under the table, never too little).
_TABLE_PX, _CHAR_PX, _LINE_PX, _ROW_PAD_PX = 1000, 7.5, 19, 12
_TABLE_MAX_PX = 720  # past this a table scrolls, and its title says how many rows it has
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def sql_dir() -> Path:
    """The folder of the dashboard SQL: the wheel's package data, else the checkout's copy."""
    here = Path(__file__).resolve().parents[1]  # the mirror_lib package folder
    for candidate in (here / "dashboard_sql", here.parent / "dashboards" / "sql"):
        if any(candidate.glob("*.sql")):
            return candidate
    raise MirrorRuntimeError(
        f"the dashboard SQL files were not found (looked in {here / 'dashboard_sql'} and "
        f"{here.parent / 'dashboards' / 'sql'}): reinstall mirror_lib; nothing was written"
    )


def load_queries() -> dict[str, str]:
    """File stem -> SQL text of every ``*.sql`` file of :func:`sql_dir`, sorted by name."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(sql_dir().glob("*.sql"))}


def require_tables(config: MirrorConfig) -> None:
    """Raise unless at least one delta-rs table exists under ``mirror.state.dir``."""
    from deltalake import DeltaTable  # lazy: optional extra "delta"

    from mirror_lib.tables.delta_rs import table_path  # lazy: deltalake, pyarrow
    from mirror_lib.tables.schemas import TABLES

    root = tables_root(config)
    if any(DeltaTable.is_deltatable(table_path(root, t)) for t in TABLES):
        return
    config_file = config.origin if config.origin != "<dict>" else "CONFIG"
    raise MirrorRuntimeError(
        f"no Delta tables in {table_path(root, '')} (mirror.state.dir = {config.state_dir}): "
        f"nothing has been materialized yet. Run `mirror run {config_file} --once` (with "
        "mirror.tables.enabled = true, the default) first; no dashboard was written"
    )


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError as exc:
        raise MirrorRuntimeError(
            "plotly is not installed: `pip install 'mirror_lib[dashboard]'`; nothing was written"
        ) from exc
    return go


def _plain(value: Any) -> Any:
    """Naive UTC datetimes (plotly has no time zones) and floats instead of Decimals."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return float(value) if isinstance(value, Decimal) else value


def query_rows(spark: Any, sql: str) -> list[dict[str, Any]]:
    """Rows of ``sql`` as dicts (through Arrow, so timestamps keep their time zone)."""
    return [{k: _plain(v) for k, v in r.items()} for r in spark.sql(sql).toArrow().to_pylist()]


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value)


@dataclass(frozen=True)
class Chart:
    """How one SQL file's rows become a chart: a trace per ``series`` value and ``y`` column."""

    series: str | Callable[[dict[str, Any]], str]  # legend entry: a column or a row label
    x: str | Callable[[dict[str, Any]], Any]
    y: tuple[str, ...]  # several columns: line styles solid, dash, dot
    kind: str  # "line" or "bar" (bars stack)
    x_title: str
    y_title: str
    unit: str  # in hover texts and bar labels
    fmt: str = ",.0f"  # number format (d3 and Python share this syntax)
    labels: bool = False  # value labels on the bars
    legend: str | None = "topic"  # None: no legend (the x labels say it all)
    log_y: bool = False  # a log axis: a start-up's seconds do not flatten the milliseconds


def _get(how: str | Callable[[dict[str, Any]], Any], row: dict[str, Any]) -> Any:
    return how(row) if callable(how) else row[how]


def _pair(r: dict[str, Any]) -> str:
    hops, beats = r["hops"], r["heartbeats"]
    return (
        f"{r['source']}→{r['target']} on {r['cluster']}<br>"
        f"{hops} hop{'s' * (hops != 1)}, {beats} heartbeat{'s' * (beats != 1)}"
    )


CHARTS = {
    "latency": Chart("topic", "minute", ("latency_ms_p50", "latency_ms_p99"), "line",
                     "minute (UTC)", "latency (ms)", "ms", log_y=True),
    "throughput": Chart("topic", "minute", ("records",), "bar", "minute (UTC)",
                        "records / minute", "records"),
    "skipped": Chart("topic", "minute", ("records",), "bar", "minute (UTC)",
                     "records skipped / minute", "records"),
    "lag_over_time": Chart("topic", "minute", ("lag",), "line", "minute (UTC)", "lag (records)",
                           "records"),
    "lag": Chart("remote_topic", lambda r: f"{r['remote_topic']} p{r['partition']}", ("lag",),
                 "bar", "topic and partition", "lag (records)", "records", labels=True),
    "heartbeats": Chart(_pair, _pair, ("age_seconds",), "bar",
                        "source→target on cluster, hops travelled", "age (s)", "s",
                        fmt=",.1f", labels=True, legend=None),
}  # fmt: skip


def _chart(go: Any, fig: go.Figure, spec: Chart, rows: list[dict[str, Any]]) -> None:
    from plotly.colors import qualitative

    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(_get(spec.series, r)), []).append(r)
    facets = spec.kind == "line" and 1 < len(groups) <= MAX_FACETS
    if facets:  # a row per topic, one time axis, each row titled with its topic
        fig.set_subplots(rows=len(groups), cols=1, shared_xaxes=True, vertical_spacing=0.35 /
                         len(groups), subplot_titles=list(groups))  # fmt: skip
        fig.update_layout(height=130 + _FACET_HEIGHT * len(groups))
    for i, (label, rs) in enumerate(groups.items()):
        color = qualitative.Plotly[i % len(qualitative.Plotly)]
        where = {"row": i + 1, "col": 1} if facets else {}
        for dash, col in zip(("solid", "dash", "dot"), spec.y, strict=False):
            name = label if len(spec.y) == 1 else f"{label} {col.rsplit('_', 1)[-1]}"
            ys = [r[col] for r in rs]
            common = {
                "x": [_get(spec.x, r) for r in rs],
                "y": ys,
                "name": name,
                "legendgroup": label,
                "hovertemplate": f"%{{y:{spec.fmt}}} {spec.unit}<extra>{name}</extra>",
            }
            if spec.kind == "line":
                line = {"color": color, "dash": dash}
                fig.add_trace(go.Scatter(mode="lines+markers", line=line, **common), **where)
            else:
                text = [f"{v:{spec.fmt}} {spec.unit}" if v is not None else "" for v in ys]
                fig.add_trace(go.Bar(marker_color=color, text=text if spec.labels else None,
                                     width=0.4 if spec.labels else None,  # narrow, labelled
                                     textposition="outside", **common))  # fmt: skip
    legend = {"showlegend": spec.legend is not None, "legend_title_text": spec.legend or ""}
    fig.update_layout(barmode="stack", **legend)
    if facets:  # the time axis under the last row; each row's own scale in the unit
        fig.update_xaxes(title_text=spec.x_title, row=len(groups), col=1)
        fig.update_yaxes(title_text=spec.unit)
    else:
        fig.update_layout(xaxis_title=spec.x_title, yaxis_title=spec.y_title)
    if spec.log_y:  # ticks at the powers of ten: 10, 100, 1000 ms
        fig.update_yaxes(type="log", dtick=1)
    else:
        fig.update_yaxes(rangemode="tozero")
    xs = [_get(spec.x, r) for r in rows] if spec.x_title == "minute (UTC)" else []
    if xs and max(xs) - min(xs) <= dt.timedelta(minutes=30):  # short runs: a tick per minute
        fig.update_xaxes(dtick=60_000, tickformat="%H:%M\n%b %d")
    if spec.labels:  # leave room above the bars for their labels
        fig.update_yaxes(range=[0, max((r[spec.y[0]] or 0) for r in rows) * 1.15 or 10])


def _table(go: Any, fig: go.Figure, rows: list[dict[str, Any]]) -> None:
    shown = rows[:MAX_TABLE_ROWS]
    cols = list(shown[0])
    header = [HEADERS.get(c, c.replace("_", " ")) for c in cols]
    cells = [[_cell(r[c]) for r in shown] for c in cols]
    # wide content gets a wide column (1 to 4 shares), so that long reasons wrap less
    longest = [max(map(len, [h, *col])) for h, col in zip(header, cells, strict=True)]
    widths = [min(max(n / 12, 1.0), 4.0) for n in longest]
    fig.add_trace(go.Table(
        columnwidth=widths,
        header={"values": [f"<b>{h}</b>" for h in header], "align": "left",
                "fill_color": "#e8edf3", "height": 30, "font": {"size": 13}},
        cells={"values": cells, "align": "left", "height": 26, "font": {"size": 13}},
    ))  # fmt: skip
    margin = {"l": 20, "r": 20, "t": 60, "b": 10}
    height = margin["t"] + margin["b"] + table_height(header, cells, widths)
    fig.update_layout(height=min(height, _TABLE_MAX_PX), margin=margin)
    title = fig.layout.title.text
    if len(rows) > len(shown):
        title = f"{title} — first {len(shown)} of {len(rows)}"
    if height > _TABLE_MAX_PX:
        title += ", scroll for more" if len(rows) > len(shown) else f" — {len(rows)} rows, scroll"
    fig.update_layout(title_text=title)


def table_height(header: list[str], cells: list[list[str]], widths: list[float]) -> int:
    """Pixels a plotly table needs to show every row whole: each row as high as its most
    wrapped cell (an estimate on the safe side, see ``_TABLE_PX``)."""
    import textwrap

    chars = [max(int((_TABLE_PX * w / sum(widths) - 16) / _CHAR_PX), 4) for w in widths]

    def row_px(texts: list[str]) -> int:
        lines = max(len(textwrap.wrap(s, n) or [""]) for s, n in zip(texts, chars, strict=True))
        return _ROW_PAD_PX + _LINE_PX * lines

    rows = [row_px([col[i] for col in cells]) for i in range(len(cells[0]))]
    return row_px(header) + sum(rows) + 10


def bucket_label(seconds: int) -> str:
    """``minute``, ``5 s``, ``10 min``, ``hour``, ``6 h``: the time bucket in words."""
    if seconds % 3600 == 0:
        return "hour" if seconds == 3600 else f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return "minute" if seconds == 60 else f"{seconds // 60} min"
    return f"{seconds} s"


def figure(
    name: str, rows: list[dict[str, Any]], bucket_seconds: int = 60, empty: str = NO_DATA
) -> go.Figure:
    """The figure of one SQL file's rows: a chart for known names, else a table; empty-safe.

    ``bucket_seconds``: the time bucket of the rows' ``minute`` column (see
    :func:`mirror_lib.spark.views.bucket_for`), named in titles and axes. ``empty``: what the
    figure says without rows.
    """
    go = _plotly()
    fig = go.Figure()
    label = bucket_label(bucket_seconds)
    title = TITLES.get(name, name.replace("_", " ")).replace("per minute", f"per {label}")
    fig.update_layout(title_text=title, height=_CHART_HEIGHT, template="plotly_white",
                      margin={"l": 70, "r": 30, "t": 60, "b": 90})  # fmt: skip
    if not rows:
        fig.update_layout(height=_CHART_HEIGHT if name in CHARTS else 200)
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        fig.add_annotation(text=empty, showarrow=False, font={"size": 18, "color": "#777"},
                           xref="paper", yref="paper", x=0.5, y=0.5)  # fmt: skip
    elif name in CHARTS:
        spec = CHARTS[name]
        if spec.x == "minute" and bucket_seconds != 60:
            spec = replace(spec, x_title=f"time (UTC), {label} buckets",
                           y_title=spec.y_title.replace("/ minute", f"/ {label}"))  # fmt: skip
        _chart(go, fig, spec, rows)
    else:
        _table(go, fig, rows)
    return fig


def build_figures(spark: Any, config: MirrorConfig) -> dict[str, go.Figure]:
    """One figure per ``dashboards/sql`` file (keyed by its stem), over freshly created views."""
    from mirror_lib.spark.views import create_views, data_bucket  # lazy: pyspark

    _plotly()
    if not spark_writes_tables(spark, config) or not catalog_tables(config):
        require_tables(config)
    bucket = data_bucket(spark, config)  # a 45 s run: 1 s buckets, not one or two minutes
    create_views(spark, config, bucket_seconds=bucket)
    skipping = any(f.settings.skip_older_than_ms > 0 for f in config.enabled_flows())
    return {
        name: figure(
            name,
            query_rows(spark, sql),
            bucket_seconds=bucket,
            empty=NO_DATA if skipping or name != "skipped" else SKIPPING_OFF,
        )
        for name, sql in load_queries().items()
    }


def render_html(
    figures: dict[str, go.Figure], *, flows: list[str], state_dir: str, generated_at: str
) -> str:
    """One self-contained page: plotly.js inlined once, a heading per section."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    sections = list(SECTIONS)
    known = {n for _, names in SECTIONS for n in names}
    if extra := tuple(n for n in figures if n not in known):
        sections.append(("More", extra))
    body = []
    for heading, names in sections:
        if not any(n in figures for n in names):
            continue
        body.append(f"<section><h2>{html.escape(heading)}</h2>")
        for name in (n for n in names if n in figures):
            div = pio.to_html(
                figures[name],
                include_plotlyjs=False,
                full_html=False,
                div_id=f"fig-{name}",
                config=_PLOT_CONFIG,
            )
            body.append(f'<div class="figure">{div}</div>')
        body.append("</section>")
    meta = (
        f"generated at {html.escape(generated_at)} · flows: "
        f"{html.escape(', '.join(flows) or 'none')} · state: {html.escape(state_dir)}"
    )
    style = (
        "body{font-family:system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}"
        "h1{margin:0 0 4px}.meta{color:#555;margin:0 0 16px}section{margin:0 0 20px}"
        "h2{border-bottom:1px solid #ccc;padding-bottom:4px}"
        ".figure{background:#fff;margin:8px 0;border:1px solid #e3e3e3}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>Kafka mirror health</title>"
        f"<style>{style}</style><script>{get_plotlyjs()}</script></head><body>"
        f'<h1>Kafka mirror health</h1><p class="meta">{meta}</p>\n'
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_dashboard(spark: Any, config: MirrorConfig, out: Path | str) -> Path:
    """Write the static HTML dashboard to ``out``; returns its resolved path.

    ``spark=None`` starts (or reuses) a local session and stops it afterwards only if it was
    started here. Raises :class:`MirrorRuntimeError` when nothing was materialized yet.
    """
    path = Path(out).expanduser().resolve()
    _plotly()
    own_session = False
    if spark is None:
        from mirror_lib.spark.session import command_session  # lazy: pyspark

        try:
            from pyspark.sql import SparkSession  # lazy: optional extra "spark"

            own_session = SparkSession.getActiveSession() is None
        except ImportError:
            own_session = True
        if own_session and not catalog_tables(config):
            require_tables(config)  # fail before a local Spark starts
        spark = command_session(config)
    try:
        figures = build_figures(spark, config)
    finally:
        if own_session:
            spark.stop()
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text = render_html(
        figures,
        flows=[f.name for f in config.enabled_flows()],
        state_dir=str(config.state_dir),
        generated_at=now,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
