"""The committed Lakeview dashboard: generated from dashboards/sql, every reference resolves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mirror_lib.app.lakeview import OUT, build_lakeview, render, select_columns

ROOT = Path(__file__).resolve().parents[3]
SQL = {p.stem: p.read_text() for p in sorted((ROOT / "dashboards" / "sql").glob("*.sql"))}
COMMITTED = json.loads((ROOT / "dashboards" / "mirror_health.lvdash.json").read_text())
SPEC_VERSIONS = {"counter": 2, "line": 3, "bar": 3, "table": 1}


def widgets(dashboard: dict) -> list[dict]:
    return [item for page in dashboard["pages"] for item in page["layout"]]


def test_committed_file_is_what_the_generator_builds():
    assert OUT == ROOT / "dashboards" / "mirror_health.lvdash.json"
    assert build_lakeview() == COMMITTED, "run: python -m mirror_lib.app.lakeview --write"
    assert render(COMMITTED) == OUT.read_text()


def test_one_dataset_per_sql_file_with_the_file_as_query_lines():
    assert [d["name"] for d in COMMITTED["datasets"]] == list(SQL)
    assert len(SQL) >= 8
    for dataset in COMMITTED["datasets"]:
        assert "".join(dataset["queryLines"]) == SQL[dataset["name"]]
        assert dataset["queryLines"][0].startswith("-- ")  # the description comment is kept
        assert all(line.endswith("\n") for line in dataset["queryLines"])


def test_every_widget_resolves_its_dataset_and_columns():
    items = widgets(COMMITTED)
    assert len(items) >= 10
    assert len({i["widget"]["name"] for i in items}) == len(items)
    used = set()
    for item in items:
        widget, pos = item["widget"], item["position"]
        assert pos["x"] >= 0 and pos["x"] + pos["width"] <= 6, widget["name"]
        spec = widget["spec"]
        assert spec["version"] == SPEC_VERSIONS[spec["widgetType"]], widget["name"]
        (query,) = widget["queries"]
        dataset = query["query"]["datasetName"]
        assert dataset in SQL, widget["name"]
        used.add(dataset)
        columns = set(select_columns(SQL[dataset]))
        names = set()
        for field in query["query"]["fields"]:
            referenced = re.findall(r"`([^`]+)`", field["expression"])
            assert referenced and set(referenced) <= columns, (widget["name"], field)
            names.add(field["name"])
        encodings = spec["encodings"]
        encoded = [e["fieldName"] for e in encodings.get("columns", [])] + [
            e["fieldName"] for k, e in encodings.items() if k != "columns"
        ]
        assert encoded and set(encoded) <= names, widget["name"]
    assert used == set(SQL), "every dataset is shown by some widget"


def test_select_columns_takes_aliases_and_skips_comments():
    sql = "-- a, b FROM x\nSELECT a, f(b, c) AS d,\n  t.e, `g`\nFROM t ORDER BY a"
    assert select_columns(sql) == ["a", "d", "e", "g"]
    with pytest.raises(ValueError):
        select_columns("-- nothing here")


def test_tables_are_disaggregated_and_charts_aggregate():
    for item in widgets(COMMITTED):
        widget = item["widget"]
        (query,) = widget["queries"]
        is_table = widget["spec"]["widgetType"] == "table"
        assert query["query"]["disaggregated"] is is_table, widget["name"]
