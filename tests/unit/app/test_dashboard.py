"""The static dashboard's pure parts: SQL discovery, figures from rows, the page, the errors."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from mirror_lib.app import dashboard
from mirror_lib.app.cli import main
from mirror_lib.app.dashboard import (
    MAX_FACETS,
    MAX_TABLE_ROWS,
    NO_DATA,
    SECTIONS,
    figure,
    load_queries,
    render_html,
    require_tables,
    sql_dir,
    write_dashboard,
)
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import MirrorRuntimeError

ROOT = Path(__file__).resolve().parents[3]
T0 = dt.datetime(2026, 11, 21, 2, 13)


def config(state: Path):
    return parse_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:2",
            "A->B.enabled": "true",
            "mirror.state.dir": str(state),
        },
        origin="my.properties",
    )


def test_queries_are_the_dashboard_sql_files():
    assert sql_dir() == ROOT / "dashboards" / "sql"
    queries = load_queries()
    assert list(queries) == sorted(p.stem for p in sql_dir().glob("*.sql"))
    assert {"latency", "throughput", "lag", "lag_over_time", "heartbeats", "gaps"} <= set(queries)
    assert "FROM lag_per_minute" in queries["lag_over_time"]


def test_every_figure_says_no_data_yet_when_empty():
    for name in [*load_queries(), "something_new"]:
        fig = figure(name, [])
        assert not fig.data
        assert [a.text for a in fig.layout.annotations] == [NO_DATA], name


def test_latency_has_a_p50_and_a_p99_line_per_topic():
    rows = [
        {"minute": T0 + dt.timedelta(minutes=m), "topic": t, "latency_ms_p50": 10.0 * m,
         "latency_ms_p99": 99.0, "latency_ms_max": 120.0}
        for m in range(3) for t in ("A.orders", "A.clicks")
    ]  # fmt: skip
    fig = figure("latency", rows)
    names = [t.name for t in fig.data]
    assert names == ["A.orders p50", "A.orders p99", "A.clicks p50", "A.clicks p99"]
    assert list(fig.data[0].y) == [0.0, 10.0, 20.0] and fig.data[1].line.dash == "dash"
    assert fig.data[0].line.color == fig.data[1].line.color != fig.data[2].line.color
    # a row per topic, so that topics with the same latency do not hide each other (issue 55)
    assert [t.yaxis for t in fig.data] == ["y", "y", "y2", "y2"]
    assert [a.text for a in fig.layout.annotations] == ["A.orders", "A.clicks"]
    assert fig.layout.yaxis.title.text == fig.layout.yaxis2.title.text == "ms"
    # a log axis: a start-up's 9.5 s does not flatten the milliseconds after it
    assert fig.layout.yaxis.type == fig.layout.yaxis2.type == "log"
    assert "log scale" in fig.layout.title.text
    # one time axis, titled under the last row
    assert fig.layout.xaxis2.title.text == "minute (UTC)" and fig.layout.xaxis.matches == "x2"
    assert fig.layout.xaxis.dtick == 60_000
    one = figure("latency", [r for r in rows if r["topic"] == "A.orders"])
    assert one.layout.yaxis.title.text == "latency (ms)" and not one.layout.annotations
    many = [dict(r, topic=f"A.t{i}") for i in range(MAX_FACETS + 1) for r in rows[:1]]
    assert not figure("latency", many).layout.annotations  # too many rows: one plot


def test_throughput_lag_and_heartbeats_are_labelled_with_units():
    fig = figure("throughput", [{"minute": T0, "topic": "A.o", "records": 7, "bytes": 70}])
    assert fig.layout.yaxis.title.text == "records / minute" and fig.layout.barmode == "stack"
    rows = [{"flow": "A->B", "remote_topic": "A.o", "partition": p, "lag": 3 * p} for p in (0, 1)]
    fig = figure("lag", rows)
    assert list(fig.data[0].x) == ["A.o p0", "A.o p1"] and list(fig.data[0].text) == [
        "0 records",
        "3 records",
    ]
    beat = {"cluster": "B", "source": "A", "target": "B", "hops": 1, "age_seconds": 2.25,
            "heartbeats": 4, "last_heartbeat": T0}  # fmt: skip
    fig = figure("heartbeats", [beat])
    assert fig.data[0].x[0].startswith("A→B on B<br>1 hop, 4 heartbeats")
    assert list(fig.data[0].text) == ["2.2 s"] and fig.layout.yaxis.title.text == "age (s)"


def test_tables_format_cells_and_cap_rows():
    rows = [{"group_id": "g", "checkpoint_age_seconds": 1.25, "replication_lag": None,
             "ts": T0}] * (MAX_TABLE_ROWS + 5)  # fmt: skip
    fig = figure("failover_readiness", rows)
    (table,) = fig.data
    assert "<b>checkpoint age (s)</b>" in table.header.values
    assert [col[0] for col in table.cells.values] == ["g", "1.2", "–", "2026-11-21 02:13:00"]
    assert len(table.cells.values[0]) == MAX_TABLE_ROWS
    assert fig.layout.title.text.endswith(
        f"first {MAX_TABLE_ROWS} of {MAX_TABLE_ROWS + 5}, scroll for more"
    )


def test_a_table_is_as_high_as_its_wrapped_rows():
    """Plotly grows a row whose text wraps: the figure grows with it, so that the last row of
    the events table is not cut (issue 55)."""
    event = {"ts": T0, "type": "stop", "flow": "A->B", "reason": "--once: caught up"}
    short = figure("gaps", [event] * 4).layout.height
    long_reason = "--once: caught up with the snapshot taken at start " * 4
    wrapped = figure("gaps", [dict(event, reason=long_reason)] + [event] * 3).layout.height
    assert wrapped >= short + 2 * 19  # at least two more lines in the first row
    (table,) = figure("gaps", [dict(event, reason=long_reason)]).data
    assert table.columnwidth[3] > table.columnwidth[2]  # the reason gets the wider column
    assert figure("gaps", [event] * 50).layout.title.text.endswith("50 rows, scroll")


def test_arrow_values_become_naive_utc_and_floats():
    aware = dt.datetime(2026, 1, 1, 3, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert dashboard._plain(aware) == dt.datetime(2026, 1, 1, 1, 0)
    assert dashboard._plain(Decimal("1.5")) == 1.5 and dashboard._plain("x") == "x"


def test_page_inlines_plotly_once_with_a_heading_per_section():
    figs = {name: figure(name, []) for name in load_queries()}
    figs["extra_query"] = figure("extra_query", [])
    page = render_html(figs, flows=["A->B"], state_dir="/s", generated_at="2026-11-21 02:13 UTC")
    assert page.count("plotly.js v") == 1 and "cdn.plot.ly" not in page.split("</script>")[-1]
    for heading, _ in [*SECTIONS, ("More", ())]:
        assert page.count(f"<h2>{heading}</h2>") == 1
    assert page.index("<h2>Replication latency</h2>") < page.index('id="fig-latency"')
    assert "generated at 2026-11-21 02:13 UTC · flows: A-&gt;B · state: /s" in page
    only_gaps = render_html({"gaps": figs["gaps"]}, flows=[], state_dir="/s", generated_at="now")
    assert only_gaps.count("<h2>") == 1 and "flows: none" in only_gaps


def test_no_tables_is_a_clear_error_before_spark_starts(tmp_path):
    cfg = config(tmp_path / "state")
    with pytest.raises(MirrorRuntimeError) as err:
        require_tables(cfg)
    text = str(err.value)
    assert f"mirror.state.dir = {tmp_path / 'state'}" in text
    assert "mirror run my.properties --once" in text
    with pytest.raises(MirrorRuntimeError, match="nothing has been materialized"):
        write_dashboard(None, cfg, tmp_path / "d.html")
    assert not (tmp_path / "d.html").exists() and not (tmp_path / "state").exists()
    from mirror_lib.tables.delta_rs import ensure_tables

    ensure_tables(str(tmp_path / "state"))
    require_tables(cfg)  # tables exist now (empty is fine)


def test_cli_dashboard_exit_codes(tmp_path, capsys):
    props = tmp_path / "mm2.properties"
    props.write_text(
        "clusters = A, B\nA.bootstrap.servers = x:1\nB.bootstrap.servers = y:1\n"
        f"A->B.enabled = true\nmirror.state.dir = {tmp_path / 'none'}\n"
    )
    assert main(["dashboard", str(props), "--out", str(tmp_path / "d.html")]) == 1
    assert "mirror: failed: no Delta tables" in capsys.readouterr().err
    assert main(["dashboard", str(props)]) == 2  # --out is required


def test_time_buckets_suit_the_length_of_the_run():
    from mirror_lib.app.dashboard import bucket_label
    from mirror_lib.spark.views import MAX_POINTS, bucket_for

    assert bucket_for(None) == 60  # no data: a minute
    assert bucket_for(45) == 1  # a 45 s demo: 45 points, not one or two minutes
    assert bucket_for(75) == 2
    assert bucket_for(3600) == 60
    assert bucket_for(86400) == 1800
    assert bucket_for(10**9) == 86400
    for span in (1, 59, 61, 600, 7200, 10**6):
        assert span / bucket_for(span) <= MAX_POINTS
    labels = [bucket_label(s) for s in (1, 30, 60, 120, 3600, 21600)]
    assert labels == ["1 s", "30 s", "minute", "2 min", "hour", "6 h"]
