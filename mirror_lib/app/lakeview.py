"""The Lakeview dashboard ``dashboards/mirror_health.lvdash.json``, generated from the SQL files.

One dataset per ``dashboards/sql/*.sql`` file: ``name`` = file stem and ``queryLines`` = the
file's lines with their line ends, leading ``--`` comment included, so joining them gives the
file back. Widgets follow the exported format (counter spec v2, line/bar v3, table v1) on the
6-column grid. Regenerate after changing a SQL file or a widget::

    python -m mirror_lib.app.lakeview --write
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mirror_lib.app.dashboard import HEADERS, load_queries

OUT = Path(__file__).resolve().parents[2] / "dashboards" / "mirror_health.lvdash.json"


def select_columns(sql: str) -> list[str]:
    """Output column names of the top-level SELECT of a simple query (aliases win)."""
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    match = re.search(r"\bSELECT\b(.*?)\bFROM\b", body, re.S | re.I)
    if not match:
        raise ValueError(f"no SELECT ... FROM in {sql!r}")
    items, depth, start = [], 0, 0
    text = match.group(1)
    for i, ch in enumerate(text + ","):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    return [re.split(r"\s+", item)[-1].strip("`").rsplit(".", 1)[-1] for item in items]


def _field(name: str, expression: str | None = None) -> dict[str, str]:
    return {"name": name, "expression": expression or f"`{name}`"}


def _widget(
    name: str, dataset: str, fields: list[dict[str, str]], spec: dict[str, Any], pos: tuple
) -> dict[str, Any]:
    # Tables show the dataset's rows as they are (disaggregated); charts and counters aggregate.
    disaggregated = spec["widgetType"] == "table"
    query = {"datasetName": dataset, "fields": fields, "disaggregated": disaggregated}
    x, y, width, height = pos
    return {
        "widget": {"name": name, "queries": [{"name": "main_query", "query": query}], "spec": spec},
        "position": {"x": x, "y": y, "width": width, "height": height},
    }


def _frame(title: str) -> dict[str, Any]:
    return {"showTitle": True, "title": title}


def counter(name: str, dataset: str, agg: str, column: str, title: str, pos: tuple) -> dict:
    """A counter of ``agg(column)`` over the dataset."""
    field = _field(f"{agg.lower()}({column})", f"{agg}(`{column}`)")
    spec = {
        "version": 2,
        "widgetType": "counter",
        "frame": _frame(title),
        "encodings": {"value": {"fieldName": field["name"], "displayName": title}},
    }
    return _widget(name, dataset, [field], spec, pos)


def chart(
    kind: str,
    name: str,
    dataset: str,
    x: tuple[str, str],
    y: tuple[str, str, str],
    color: tuple[str, str],
    title: str,
    pos: tuple,
) -> dict:
    """A line or bar chart; x and color are (column, label), y is (agg, column, label)."""
    agg, y_col, y_label = y
    fields = [
        _field(x[0]),
        _field(f"{agg.lower()}({y_col})", f"{agg}(`{y_col}`)"),
        _field(color[0]),
    ]
    x_scale = "temporal" if x[0] == "minute" else "categorical"
    encodings = {
        "x": {"fieldName": x[0], "scale": {"type": x_scale}, "displayName": x[1]},
        "y": {
            "fieldName": fields[1]["name"],
            "scale": {"type": "quantitative"},
            "displayName": y_label,
        },
        "color": {"fieldName": color[0], "scale": {"type": "categorical"}, "displayName": color[1]},
    }
    spec = {"version": 3, "widgetType": kind, "encodings": encodings, "frame": _frame(title)}
    return _widget(name, dataset, fields, spec, pos)


def _header(column: str) -> str:
    """The HTML page's column header; Lakeview shows times in the workspace's time zone."""
    return HEADERS.get(column, column.replace("_", " ")).replace(" (UTC)", "")


def table(name: str, dataset: str, columns: list[str], title: str, pos: tuple) -> dict:
    """A table of the dataset's columns, in order."""
    spec = {
        "version": 1,
        "widgetType": "table",
        "frame": _frame(title),
        "encodings": {"columns": [{"fieldName": c, "displayName": _header(c)} for c in columns]},
    }
    return _widget(name, dataset, [_field(c) for c in columns], spec, pos)


def build_lakeview(queries: dict[str, str] | None = None) -> dict[str, Any]:
    """The dashboard as a dict: datasets from the SQL files, an overview and a failover page."""
    queries = load_queries() if queries is None else queries
    cols = {name: select_columns(sql) for name, sql in queries.items()}
    datasets = [
        {
            "name": name,
            "displayName": name.replace("_", " ").capitalize(),
            "queryLines": sql.splitlines(keepends=True),
        }
        for name, sql in queries.items()
    ]
    minute, topic = ("minute", "Minute"), ("topic", "Topic")
    overview = [
        counter("total_lag", "lag", "SUM", "lag", "Replication lag (records)", (0, 0, 2, 2)),
        counter("max_p99", "latency", "MAX", "latency_ms_p99", "Latency p99 (ms)", (2, 0, 2, 2)),
        counter("records", "throughput", "SUM", "records", "Records replicated", (4, 0, 2, 2)),
        chart("line", "latency_p50", "latency", minute, ("MAX", "latency_ms_p50", "p50 (ms)"),
              topic, "Replication latency p50 per topic (ms)", (0, 2, 3, 6)),
        chart("line", "latency_p99", "latency", minute, ("MAX", "latency_ms_p99", "p99 (ms)"),
              topic, "Replication latency p99 per topic (ms)", (3, 2, 3, 6)),
        chart("bar", "throughput_chart", "throughput", minute, ("SUM", "records", "Records"),
              topic, "Records replicated per minute", (0, 8, 3, 6)),
        chart("line", "lag_over_time_chart", "lag_over_time", minute, ("SUM", "lag", "Records"),
              topic, "Replication lag per topic (records)", (3, 8, 3, 6)),
        chart("bar", "lag_per_partition", "lag", ("partition", "Partition"),
              ("SUM", "lag", "Records"), ("remote_topic", "Topic"),
              "Current lag per partition (records)", (0, 14, 3, 6)),
        table("heartbeat_table", "heartbeats", cols["heartbeats"],
              "Heartbeats per cluster pair (age in seconds)", (3, 14, 3, 6)),
        counter("skipped_records", "skipped", "SUM", "records",
                "Stale records skipped (mirror.skip.older.than.ms)", (0, 20, 2, 2)),
        chart("bar", "skipped_chart", "skipped", minute, ("SUM", "records", "Records"),
              topic, "Stale records skipped per minute", (0, 22, 6, 6)),
    ]  # fmt: skip
    failover = [
        table("readiness", "failover_readiness", cols["failover_readiness"],
              "Failover readiness per consumer group (ages in seconds)", (0, 0, 6, 5)),
        table("translation", "offset_translation", cols["offset_translation"],
              "Translated offsets on the target (= mirror translate)", (0, 5, 6, 6)),
        table("gaps_table", "gaps", cols["gaps"],
              "Gaps, skips, outages, errors and decode errors (newest first)", (0, 11, 6, 6)),
        table("verifications_table", "verifications", cols["verifications"],
              "Latest mirror verify per partition (differences first)", (0, 17, 6, 6)),
        table("migrations_table", "migrations", cols["migrations"],
              "Cutover per partition (end offset on the source, offset on the target)",
              (0, 23, 6, 5)),
    ]  # fmt: skip
    return {
        "datasets": datasets,
        "pages": [
            {"name": "replication", "displayName": "Replication", "layout": overview},
            {"name": "failover", "displayName": "Failover and events", "layout": failover},
        ],
    }


def render(dashboard: dict[str, Any]) -> str:
    """The committed file's text (stable key order and indentation)."""
    return json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the dashboard JSON, or ``--write`` it to dashboards/mirror_health.lvdash.json."""
    parser = argparse.ArgumentParser(prog="python -m mirror_lib.app.lakeview", description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"write {OUT}")
    args = parser.parse_args(argv)
    text = render(build_lakeview())
    if args.write:
        OUT.write_text(text, encoding="utf-8")
        print(OUT)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
