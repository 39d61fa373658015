"""databricks.yml checked offline (the Databricks CLI cannot be installed on our machines).

What `databricks bundle validate` would catch and more: every referenced file exists, variables
are declared, job parameters match the notebooks' widgets and the job tasks' named parameters.
"""

from __future__ import annotations

import ast
import glob
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from mirror_lib.tasks import TASKS

REPO = Path(__file__).resolve().parents[2]
BUNDLE = yaml.safe_load((REPO / "databricks.yml").read_text())
JOBS = BUNDLE["resources"]["jobs"]
TASK_LIST = [(job, task) for job, spec in JOBS.items() for task in spec["tasks"]]


def widget_names(notebook: Path) -> dict[str, bool]:
    """Widget name -> required, from the Widgets(...) declaration of a notebook."""
    nb = nbformat.read(notebook, as_version=4)
    names = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "") in ("text", "dropdown", "multiselect", "combobox")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                required = any(
                    k.arg == "required" and getattr(k.value, "value", False) for k in node.keywords
                )
                names[node.args[0].value] = required
    return names


def test_top_level_shape_and_targets():
    assert BUNDLE["bundle"]["name"] == "mirror_lib"
    targets = BUNDLE["targets"]
    assert targets["dev"] == {"mode": "development", "default": True}
    assert targets["prod"]["mode"] == "production"
    assert BUNDLE["artifacts"]["mirror_lib"]["type"] == "whl"
    assert (REPO / BUNDLE["artifacts"]["mirror_lib"]["path"] / "setup.py").is_file()
    assert "--wheel-dir dist" in BUNDLE["artifacts"]["mirror_lib"]["build"]


def test_every_variable_used_is_declared_and_every_declared_one_is_used():
    text = (REPO / "databricks.yml").read_text()
    used = set(re.findall(r"\$\{var\.([a-z_]+)\}", text))
    assert used == set(BUNDLE["variables"])
    for name in ("catalog", "schema", "secret_scope", "config_path"):
        assert BUNDLE["variables"][name]["description"]


def test_replication_is_continuous_and_maintenance_scheduled():
    assert JOBS["mirror_replication"]["continuous"]["pause_status"] == "UNPAUSED"
    assert "schedule" not in JOBS["mirror_replication"]
    assert JOBS["mirror_maintenance"]["schedule"]["quartz_cron_expression"]
    assert "continuous" not in JOBS["mirror_maintenance"]
    tasks = {t["task_key"] for t in JOBS["mirror_replication"]["tasks"]}
    assert tasks == {"replication", "companions", "materialization"}


@pytest.mark.parametrize(("job", "task"), TASK_LIST, ids=[t["task_key"] for _, t in TASK_LIST])
def test_task_files_clusters_and_libraries_exist(job, task):
    spec = JOBS[job]
    clusters = {c["job_cluster_key"] for c in spec.get("job_clusters", [])}
    assert task["job_cluster_key"] in clusters
    path = (task.get("spark_python_task") or {}).get("python_file") or task["notebook_task"][
        "notebook_path"
    ]
    assert (REPO / path).is_file(), path
    wheels = [lib["whl"] for lib in task["libraries"] if "whl" in lib]
    assert wheels == ["./dist/*.whl"]
    pypi = [lib["pypi"]["package"] for lib in task["libraries"] if "pypi" in lib]
    assert any(p.startswith("confluent-kafka") for p in pypi)


@pytest.mark.parametrize(("job", "task"), TASK_LIST, ids=[t["task_key"] for _, t in TASK_LIST])
def test_parameters_match_widgets_and_task_arguments(job, task):
    spec = JOBS[job]
    job_params = {p["name"] for p in spec.get("parameters", [])}
    if "notebook_task" in task:
        widgets = widget_names(REPO / task["notebook_task"]["notebook_path"])
        assert job_params <= set(widgets), job_params - set(widgets)
        assert {n for n, required in widgets.items() if required} <= job_params
        return
    python_file = Path(task["spark_python_task"]["python_file"])
    assert f'main("{python_file.stem}")' in (REPO / python_file).read_text()
    _parts, params = TASKS[python_file.stem]
    args = task["spark_python_task"]["parameters"]
    flags = args[0::2]
    assert all(f.startswith("--") for f in flags), args
    assert set(flags) <= {p.arg for p in params}
    assert {p.arg for p in params if p.required} <= set(flags)
    for value in args[1::2]:
        for ref in re.findall(r"\{\{job\.parameters\.([a-z_]+)\}\}", value):
            assert ref in job_params, ref


def test_every_job_parameter_is_used():
    for name, spec in JOBS.items():
        text = yaml.safe_dump(spec["tasks"])
        for p in spec.get("parameters", []):
            notebook = any("notebook_task" in t for t in spec["tasks"])
            assert notebook or f"job.parameters.{p['name']}" in text, (name, p["name"])


def test_dashboard_resource_points_at_the_lakeview_file():
    dashboard = BUNDLE["resources"]["dashboards"]["mirror_health"]
    path = REPO / dashboard["file_path"]
    assert path.is_file() and path.name.endswith(".lvdash.json")
    assert dashboard["warehouse_id"] == "${var.warehouse_id}"
    assert (dashboard["dataset_catalog"], dashboard["dataset_schema"]) == (
        "${var.catalog}",
        "${var.schema}",
    )


def test_job_entry_points_are_thin():
    for path in glob.glob(str(REPO / "jobs" / "*.py")):
        source = Path(path).read_text()
        assert Path(path).stem in TASKS
        assert len(source.splitlines()) < 20 and "from mirror_lib.tasks import main" in source
