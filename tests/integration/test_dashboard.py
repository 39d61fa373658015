"""The static plotly dashboard over real tables: figures per topic, the HTML file, the CLI.

build_figures (re)creates the session's temp views (t_<table>, the views) over this module's
tables, as every create_views caller does; test modules that query views create their own.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from mirror_lib.app.dashboard import NO_DATA, SKIPPING_OFF, build_figures
from mirror_lib.app.lakeview import select_columns
from mirror_lib.config.parse import parse_config
from mirror_lib.tables.delta_rs import ensure_tables
from mirror_lib.tables.location import tables_root
from mirror_lib.tables.positions import append_unseen
from mirror_lib.tables.schemas import SCHEMAS
from tests.browser import chromium_available, render
from tests.integration.conftest import flow_properties, write_properties

SQL_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "sql"
NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
M0 = NOW.replace(second=0) - dt.timedelta(minutes=2)
M1 = M0 + dt.timedelta(minutes=1)


def metric(topic: str, partition: int, ts: dt.datetime, records: int, lag: int, p50: float,
           p99: float, last: int) -> dict:  # fmt: skip
    return {"flow": "A->B", "source": "A", "target": "B", "topic": topic,
            "remote_topic": f"A.{topic}", "partition": partition, "ts": ts, "records": records,
            "bytes": records * 100, "lag": lag, "upstream_last": last, "latency_ms_p50": p50,
            "latency_ms_p99": p99, "latency_ms_max": p99}  # fmt: skip


ROWS = {
    "replication_metrics": [
        metric("orders", 0, M0 + dt.timedelta(seconds=5), 10, 5, 100, 300, 9),
        metric("orders", 1, M0 + dt.timedelta(seconds=5), 30, 1, 200, 400, 29),
        metric("clicks", 0, M0 + dt.timedelta(seconds=7), 5, 0, 50, 60, 4),
        metric("orders", 0, M1 + dt.timedelta(seconds=5), 20, 0, 100, 200, 29),
        metric("orders", 1, M1 + dt.timedelta(seconds=10), 5, 7, 100, 200, 34),
        metric("orders", 1, M1 + dt.timedelta(seconds=20), 5, 2, 100, 200, 39),
    ],
    "heartbeats": [
        {"source": "A", "target": "B", "heartbeat_ts": NOW - dt.timedelta(seconds=s), "hops": 0,
         "cluster": "B"} for s in (9, 3)
    ] + [{"source": "C", "target": "A", "heartbeat_ts": NOW, "hops": 1, "cluster": "B"}],
    "checkpoints": [
        {"source": "A", "target": "B", "group_id": "app", "topic": "A.orders", "partition": p,
         "upstream_offset": u, "downstream_offset": u, "cluster": "B", "kafka_offset": p,
         "record_ts": NOW} for p, u in ((0, 8), (1, 30))
    ],
    "offset_syncs": [
        {"flow": "A->B", "source": "A", "target": "B", "topic": "orders",
         "remote_topic": "A.orders", "partition": p, "upstream_start": 0, "upstream_end": e,
         "downstream_start": 0, "downstream_end": e, "kind": "segment"}
        for p, e in ((0, 29), (1, 39))
    ],
    "flow_events": [
        {"type": "gap", "flow": "A->B", "ts": NOW, "topic": "orders", "partition": 1,
         "reason": "truncated", "action": "fail", "cluster": "B"},
        {"type": "skip", "flow": "A->B", "ts": M0 + dt.timedelta(seconds=5), "topic": "orders",
         "partition": 0, "reason": "stale", "action": "skip", "cluster": "B",
         "details": json.dumps({"type": "skip", "remote_topic": "A.orders", "partition": 0,
                                "first_offset": 0, "last_offset": 11, "records": 12,
                                "bytes": 1200})},
    ],
    "verifications": [
        {"run_id": "r1", "flow": "A->B", "source": "A", "target": "B", "topic": "orders",
         "remote_topic": "A.orders", "partition": p, "status": status, "behind": behind,
         "upstream_to": u, "downstream_to": u, "total_records": u, "verified_ts": NOW,
         "record_ts": NOW}
        for p, status, behind, u in ((0, "complete", 0, 30), (1, "behind", 2, 38))
    ],
    "migrations": [
        {"run_id": "r2", "flow": "A->B", "source": "A", "target": "B", "topic": "orders",
         "remote_topic": "A.orders", "partition": 0, "status": "migrated",
         "source_end_offset": 30, "target_offset": 30, "groups": "app", "ts": NOW}
    ],
}  # fmt: skip


def config_at(state: Path):
    return parse_config(flow_properties("127.0.0.1:1", "127.0.0.1:2", state))


BUCKETS_2S = ((M0, 4), (M1, 4), (M1, 10), (M1, 20))


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """Delta tables with known rows: two minutes of metrics of A.orders (2 partitions), A.clicks,
    written as a run writes them (the metrics also rolled up)."""
    state = tmp_path_factory.mktemp("dashboard") / "state"
    config = config_at(state)
    root = tables_root(config)
    ensure_tables(root)
    for name, rows in ROWS.items():
        table = pa.Table.from_pylist(rows, schema=SCHEMAS[name])
        append_unseen(root, {name: table}, "fixture")
    return config


def test_figures_show_each_topic_and_partition(spark, tables):
    figs = build_figures(spark, tables)
    assert set(figs) == {p.stem for p in SQL_DIR.glob("*.sql")}
    trace = {(name, t.name): t for name, fig in figs.items() for t in fig.data}
    # 75 s of metrics: 2 s buckets (at most 60 points), not two minutes
    naive = [(m + dt.timedelta(seconds=s)).replace(tzinfo=None) for m, s in BUCKETS_2S]
    p50 = trace["latency", "A.orders p50"]
    assert list(p50.x) == naive and list(p50.y) == [175.0, 100.0, 100.0, 100.0]  # weighted
    assert list(trace["latency", "A.orders p99"].y) == [400.0, 200.0, 200.0, 200.0]
    assert list(trace["throughput", "A.orders"].y) == [40, 20, 5, 5]
    assert list(trace["throughput", "A.clicks"].y) == [5]
    # latest lag per partition, carried through buckets where a partition copied nothing
    assert list(trace["lag_over_time", "A.orders"].y) == [6, 1, 7, 2]
    # a row per topic: the time axis is titled under the last one
    assert figs["latency"].layout.xaxis2.title.text == "time (UTC), 2 s buckets"
    assert figs["throughput"].layout.title.text == "Records replicated per 2 s, per topic"
    lag = trace["lag", "A.orders"]
    assert dict(zip(lag.x, lag.y, strict=True)) == {"A.orders p0": 0, "A.orders p1": 2}
    beats = {t.x[0]: t.y[0] for t in figs["heartbeats"].data}
    assert set(beats) == {"A→B on B<br>0 hops, 2 heartbeats", "C→A on B<br>1 hop, 1 heartbeat"}
    since_import = (dt.datetime.now(dt.timezone.utc) - NOW).total_seconds()  # NOW: at collection
    assert 3 <= beats["A→B on B<br>0 hops, 2 heartbeats"] < since_import + 60
    (ready,) = figs["failover_readiness"].data
    first = [col[0] for col in ready.cells.values]  # source, target, group, partitions, age, lag
    assert first[:4] == ["A", "B", "app", "2"] and first[5] == "2"
    (translated,) = figs["offset_translation"].data
    assert list(translated.cells.values[-1]) == ["8", "30"]
    (gaps,) = figs["gaps"].data
    assert "truncated" in [col[0] for col in gaps.cells.values]
    assert list(trace["skipped", "A.orders"].y) == [12]  # stale records skipped
    (verified,) = figs["verifications"].data  # flow, topic, partition, status, behind, ...
    assert list(verified.cells.values[3]) == ["behind", "complete"]
    (migrated,) = figs["migrations"].data
    assert list(migrated.cells.values[3]) == ["migrated"]
    said = [a.text for fig in figs.values() for a in fig.layout.annotations]
    assert NO_DATA not in said and SKIPPING_OFF not in said  # every tile has data
    assert [a.text for a in figs["latency"].layout.annotations] == ["A.orders", "A.clicks"]


def test_select_lists_match_what_spark_returns(spark, tables):
    from mirror_lib.spark.views import create_views

    create_views(spark, tables)  # a minute: what the Lakeview dashboard shows
    lag = spark.sql("SELECT lag FROM lag_per_minute WHERE topic = 'A.orders' ORDER BY minute")
    assert [r["lag"] for r in lag.collect()] == [6, 2]
    for path in sorted(SQL_DIR.glob("*.sql")):
        sql = path.read_text()
        assert select_columns(sql) == spark.sql(sql).columns, path.name


def test_mirror_dashboard_writes_an_offline_page_also_for_empty_tables(tmp_path, subprocess_env):
    config = config_at(tmp_path / "state")
    ensure_tables(tables_root(config))  # materialized, but nothing replicated yet
    config_file = write_properties(tmp_path / "mm2.properties", dict(config.properties))
    out = tmp_path / "out" / "health.html"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirror_lib.app.cli",
            "dashboard",
            str(config_file),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == str(out.resolve())
    page = out.read_text()
    assert "plotly.js v" in page and "<script src=" not in page  # inlined: works offline
    for heading in ("Replication latency", "Throughput", "Replication lag", "Heartbeats",
                    "Failover readiness", "Gaps and flow events"):  # fmt: skip
        assert f"<h2>{heading}</h2>" in page
    stems = [p.stem for p in SQL_DIR.glob("*.sql")]
    assert all(f'id="fig-{stem}"' in page for stem in stems)
    # no flow sets mirror.skip.older.than.ms: the tile says skipping is off, not "no data yet"
    assert page.count(f'"text":"{NO_DATA}"') == len(stems) - 1
    assert page.count(f'"text":"{SKIPPING_OFF}"') == 1
    assert "flows: A-&gt;B" in page


def test_mirror_dashboard_without_tables_says_what_to_run(tmp_path, subprocess_env):
    state = tmp_path / "empty-state"
    config_file = write_properties(
        tmp_path / "mm2.properties", flow_properties("127.0.0.1:1", "127.0.0.1:2", state)
    )
    out = tmp_path / "health.html"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirror_lib.app.cli",
            "dashboard",
            str(config_file),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=60,
    )
    assert run.returncode == 1, run.stderr
    assert "mirror.state.dir" in run.stderr and f"mirror run {config_file} --once" in run.stderr
    assert not out.exists() and not state.exists()


def assert_every_tile_draws(report: dict, stems: list[str]) -> dict[str, dict]:
    """No JavaScript error; one drawn, sized plot per SQL file; each shows data or says none."""
    assert report["errors"] == [], report["errors"]
    figures = {f["id"].removeprefix("fig-"): f for f in report["figures"]}
    assert sorted(figures) == sorted(stems)
    for name, fig in figures.items():
        assert fig["drawn"] and fig["width"] > 300 and fig["height"] > 100, fig
        if fig["annotations"] in ([NO_DATA], [SKIPPING_OFF]):
            continue
        if fig["table_overflow_px"] is not None and "scroll" not in fig["title"]:
            assert fig["table_overflow_px"] <= 0, (name, fig)  # no row cut at the bottom
        assert fig["traces"], fig
        assert sum(fig["markers"]) + fig["bars"] + fig["table_cells"] > 0, (name, fig)
    return figures


@pytest.mark.skipif(not chromium_available(), reason="needs Debian's chromium: make chromium")
def test_the_page_draws_in_a_real_browser(spark, tables, tmp_path):
    from mirror_lib.app.dashboard import write_dashboard

    page = write_dashboard(spark, tables, tmp_path / "health.html")
    stems = [p.stem for p in SQL_DIR.glob("*.sql")]
    figures = assert_every_tile_draws(render(page, tmp_path), stems)
    said = [a for f in figures.values() for a in f["annotations"]]
    assert NO_DATA not in said and SKIPPING_OFF not in said  # every tile has data
    latency = figures["latency"]
    assert latency["markers"] == [4, 4, 1, 1]  # A.orders p50/p99 over 2 s buckets, A.clicks
    assert latency["annotations"] == ["A.orders", "A.clicks"]  # a row each
    assert latency["yaxis_types"] == ["log", "log"]
    assert latency["xaxis_title"] == "time (UTC), 2 s buckets"
    assert figures["lag"]["bars"] == 3  # A.orders p0, p1 and A.clicks p0
    assert figures["heartbeats"]["bars"] == 2
    assert figures["failover_readiness"]["table_cells"] > 0


@pytest.mark.skipif(not chromium_available(), reason="needs Debian's chromium: make chromium")
def test_the_browser_probe_sees_javascript_errors_and_undrawn_tiles(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>t</title></head><body>"
        '<div class="plotly-graph-div" id="fig-latency"></div>'
        "<script>no_such_function();</script></body></html>"
    )
    report = render(page, tmp_path)
    assert any("no_such_function" in e for e in report["errors"]), report["errors"]
    (fig,) = report["figures"]
    assert fig["id"] == "fig-latency" and not fig["drawn"]
    with pytest.raises(AssertionError):
        assert_every_tile_draws(report, ["latency"])


@pytest.mark.skipif(not chromium_available(), reason="needs Debian's chromium: make chromium")
def test_the_browser_probe_sees_a_table_cut_mid_row(tmp_path):
    """The check that no table is cut at its bottom can fail: a table figure too low for its
    rows, as the events table was (issue 55), is reported with its overflow."""
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = go.Figure(go.Table(cells={"values": [[f"row {i}" for i in range(8)]], "height": 26}))
    fig.update_layout(height=150, margin={"t": 60, "b": 10}, title_text="events")
    page = tmp_path / "cut.html"
    page.write_text(pio.to_html(fig, include_plotlyjs=True, full_html=True, div_id="fig-gaps"))
    (cut,) = render(page, tmp_path)["figures"]
    assert cut["table_overflow_px"] > 0, cut
    with pytest.raises(AssertionError):
        assert_every_tile_draws({"errors": [], "figures": [cut]}, ["gaps"])
