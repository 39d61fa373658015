"""Each serverless task of databricks.yml imports with only what its environment installs.

A serverless task gets the packages of its job's ``environments[].spec.dependencies`` and the
runtime's own (pyspark, pyarrow, pandas); the wheel declares no install_requires. So each task's
entry file, and the modules ``bundle_tasks`` imports when a task runs, are imported in a fresh
interpreter where every optional package (setup.py's extras) the environment leaves out is
blocked.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
JOBS = yaml.safe_load((REPO / "databricks.yml").read_text())["resources"]["jobs"]

#: Extras a serverless environment has without listing them: the runtime's pyspark, pyarrow and
#: pandas, and the test tools (never imported by the library).
PROVIDED = {"spark", "test"}


def normalized(requirement: str) -> str:
    """The distribution name of a requirement, as pip compares names."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return re.sub(r"[-_.]+", "-", name[0] if name else requirement).lower()


def setup_extras() -> dict[str, list[str]]:
    """setup.py's EXTRAS, read without running setup()."""
    for node in ast.parse((REPO / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EXTRAS":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py defines no EXTRAS")


def optional_modules(installed: list[str]) -> set[str]:
    """Top-level modules of the optional distributions, less those the environment installs."""
    extras = setup_extras()
    wanted = {normalized(r) for name, reqs in extras.items() for r in reqs}
    provided = {normalized(r) for name in PROVIDED for r in extras.get(name, [])}
    optional = wanted - provided - {normalized(d) for d in installed}
    return {
        module
        for module, dists in packages_distributions().items()
        if {normalized(d) for d in dists} & optional
    }


def lazy_imports() -> set[str]:
    """Modules ``bundle_tasks`` imports inside its functions (when a task runs)."""
    tree = ast.parse((REPO / "mirror_lib/app/bundle_tasks.py").read_text())
    top = set(tree.body)
    return {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node not in top and node.module
    }


SERVERLESS = [
    (job, task, env["spec"]["dependencies"])
    for job, spec in JOBS.items()
    for env in spec.get("environments", [])
    for task in spec["tasks"]
    if task.get("environment_key") == env["environment_key"]
]


def test_there_are_serverless_tasks_and_lazy_imports():
    assert {job for job, _task, _deps in SERVERLESS} >= {"mirror_catch_up", "mirror_maintenance"}
    assert "mirror_lib.spark.materialize" in lazy_imports()
    assert "confluent_kafka" in optional_modules([])  # the check blocks something real


@pytest.mark.parametrize(
    ("job", "task", "dependencies"),
    SERVERLESS,
    ids=[f"{job}.{task['task_key']}" for job, task, _deps in SERVERLESS],
)
def test_serverless_task_imports_with_its_environment_only(job, task, dependencies):
    blocked = sorted(optional_modules(dependencies))
    entry = REPO / task["spark_python_task"]["python_file"]
    code = "\n".join(
        [
            "import importlib, runpy, sys",
            *(f"sys.modules[{name!r}] = None" for name in blocked),
            f"runpy.run_path({str(entry)!r}, run_name='entry')",  # not __main__: nothing runs
            *(f"importlib.import_module({m!r})" for m in sorted(lazy_imports())),
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    last = (done.stderr.strip().splitlines() or [""])[-1]
    assert done.returncode == 0, f"{job}.{task['task_key']} without {blocked}: {last}"
