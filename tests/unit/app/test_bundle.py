"""databricks.yml checked offline (the Databricks CLI cannot be installed on our machines).

What `databricks bundle validate` would catch and what it would not: every referenced file
exists, variables are declared, the warehouse is looked up by name, dev is isolated and paused,
the schema and volumes are bundle resources, job parameters reach every task and notebook (one
catalog.schema, one state volume), no target leaves state on local disk, serverless jobs have
the shape serverless accepts, every notebook installs the wheel in its first cell, prod grants
its service principal the schema and volumes and lets no defaulted group run its jobs, sync
leaves out what no job reads, and the deploy steps of docs/databricks.md say what the bundle cannot
do.
"""

from __future__ import annotations

import ast
import glob
import re
from fnmatch import fnmatch
from pathlib import Path

import nbformat
import pytest
import yaml
from IPython.core.inputtransformer2 import TransformerManager

from mirror_lib.app.bundle_tasks import TASKS

REPO = Path(__file__).resolve().parents[3]
TEXT = (REPO / "databricks.yml").read_text()
DEPLOY_PAGE = (REPO / "docs" / "databricks.md").read_text()
BUNDLE = yaml.safe_load(TEXT)
JOBS = BUNDLE["resources"]["jobs"]
TASK_LIST = [(job, task) for job, spec in JOBS.items() for task in spec["tasks"]]
TASK_IDS = [f"{job}.{t['task_key']}" for job, t in TASK_LIST]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
SCHEMA = "${resources.schemas.mirror.name}"
REF = re.compile(r"\{\{job\.parameters\.([a-z_]+)\}\}")


def code_cells(notebook: Path) -> list[str]:
    nb = nbformat.read(notebook, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def widget_names(notebook: Path) -> dict[str, bool]:
    """Widget name -> required, from the Widgets(...) declaration of a notebook."""
    names = {}
    for source in code_cells(notebook):
        python = TransformerManager().transform_cell(source)  # %pip lines become Python
        for node in ast.walk(ast.parse(python)):
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


def task_args(task: dict) -> dict[str, str]:
    """``--name=value`` arguments of a Python task as {name: value}."""
    args = task["spark_python_task"]["parameters"]
    assert all(a.startswith("--") and "=" in a for a in args), args  # empty values stay bound
    return dict(a[2:].split("=", 1) for a in args)


def test_top_level_shape_cli_version_and_wheel():
    assert BUNDLE["bundle"]["name"] == "mirror_lib"
    version = BUNDLE["bundle"]["databricks_cli_version"]
    assert re.fullmatch(r">= ?0\.(\d+)\.\d+", version) and int(version.split(".")[1]) >= 281
    artifact = BUNDLE["artifacts"]["mirror_lib"]
    assert artifact["type"] == "whl" and artifact["dynamic_version"] is True
    assert (REPO / artifact["path"] / "setup.py").is_file()
    assert "--wheel-dir dist" in artifact["build"]


def test_every_variable_used_is_declared_and_every_declared_one_is_used():
    used = set(re.findall(r"\$\{var\.([a-z_]+)\}", TEXT))
    assert used == set(BUNDLE["variables"])
    for name, spec in BUNDLE["variables"].items():
        assert spec["description"], name
    without_value = {
        name
        for name, spec in BUNDLE["variables"].items()
        if "default" not in spec and "lookup" not in spec
    }
    # the CLI requires a value for every variable: dev assigns the prod-only ones
    assert (
        without_value
        == set(BUNDLE["targets"]["dev"]["variables"])
        == {"service_principal", "operators_group"}
    )


#: Defaults that exist only in some workspaces -> what each description and the deploy page offer.
WORKSPACE_DEFAULTS = {
    "catalog": ("main", ["databricks catalogs list"]),
    "warehouse": ("Serverless Starter Warehouse", ["databricks warehouses list"]),
    "node_type_id": ("i3.xlarge", ["AWS", "Azure", "Standard_D4ds_v5", "GCP", "n2-highmem-4"]),
}


@pytest.mark.parametrize("name", WORKSPACE_DEFAULTS)
def test_defaults_not_every_workspace_has_say_what_to_pass_instead(name):
    default, hints = WORKSPACE_DEFAULTS[name]
    variable = BUNDLE["variables"][name]
    assert variable["default"] == default  # the common case deploys without --var
    assert all(hint in variable["description"] for hint in hints), variable["description"]
    deploy = DEPLOY_PAGE.split("## Deploy to Databricks")[1].split("\n## ")[0]
    assert f'--var="{name}=' in deploy and all(hint in deploy for hint in hints)


def test_the_dashboard_warehouse_is_looked_up_by_name():
    variables = BUNDLE["variables"]
    assert variables["warehouse_id"]["lookup"] == {"warehouse": "${var.warehouse}"}
    assert "default" not in variables["warehouse_id"]
    assert variables["warehouse"]["default"].strip()
    dashboard = BUNDLE["resources"]["dashboards"]["mirror_health"]
    assert dashboard["warehouse_id"] == "${var.warehouse_id}"
    path = REPO / dashboard["file_path"]
    assert path.is_file() and path.name.endswith(".lvdash.json")
    assert (dashboard["dataset_catalog"], dashboard["dataset_schema"]) == ("${var.catalog}", SCHEMA)


def test_schema_and_volumes_are_bundle_resources():
    resources = BUNDLE["resources"]
    assert resources["schemas"]["mirror"] == {
        "catalog_name": "${var.catalog}",
        "name": "${var.schema}",
        "comment": resources["schemas"]["mirror"]["comment"],
    }
    for name in ("config", "state"):
        volume = resources["volumes"][name]
        assert (volume["catalog_name"], volume["schema_name"], volume["name"]) == (
            "${var.catalog}",
            SCHEMA,  # a reference: created after the schema, and prefixed with it in dev
            name,
        )
        assert volume["volume_type"] == "MANAGED"
    # ${var.schema} names the schema resource only; everything else follows the resource (dev
    # mode renames it dev_<user>_mirror)
    assert TEXT.count("${var.schema}") == 1


def test_dev_is_isolated_and_paused_prod_runs_as_a_service_principal():
    dev, prod = BUNDLE["targets"]["dev"], BUNDLE["targets"]["prod"]
    assert dev["mode"] == "development" and dev["default"] is True
    assert dev["presets"]["trigger_pause_status"] == "PAUSED"
    assert "resources" not in dev  # nothing in dev may re-enable a trigger
    # the CLI pauses only triggers whose pause_status is unset: no job sets one
    assert "pause_status" not in yaml.safe_dump(BUNDLE["resources"])
    triggered = {name for name, spec in JOBS.items() if {"continuous", "schedule"} & set(spec)}
    assert triggered == {"mirror_replication", "mirror_catch_up", "mirror_maintenance"}
    assert prod["mode"] == "production"
    assert prod["presets"]["trigger_pause_status"] == "UNPAUSED"
    # prod runs one replication shape at a time: both would write the same checkpoints
    overrides = prod["resources"]["jobs"]
    assert overrides["mirror_replication"] == {
        "continuous": {"pause_status": "${var.continuous_pause_status}"}
    }
    assert overrides["mirror_catch_up"] == {
        "schedule": {"pause_status": "${var.catch_up_pause_status}"}
    }
    variables = BUNDLE["variables"]
    statuses = [variables[f"{v}_pause_status"]["default"] for v in ("continuous", "catch_up")]
    assert statuses == ["UNPAUSED", "PAUSED"]
    assert prod["run_as"] == {"service_principal_name": "${var.service_principal}"}
    levels = {
        p.get("group_name") or p.get("service_principal_name"): p["level"]
        for p in prod["permissions"]
    }
    assert levels == {"${var.service_principal}": "CAN_MANAGE", "${var.operators_group}": "CAN_RUN"}


#: What prod's jobs, run as the service principal, do there: create tables and (re)create views,
#: append, delete, OPTIMIZE and VACUUM them; read mm2.properties; write checkpoints and ledgers.
PROD_GRANTS = {
    ("schemas", "mirror"): {"USE_SCHEMA", "CREATE_TABLE", "SELECT", "MODIFY"},
    ("volumes", "config"): {"READ_VOLUME"},
    ("volumes", "state"): {"READ_VOLUME", "WRITE_VOLUME"},
}


def test_prod_grants_its_run_as_principal_the_schema_and_volumes():
    # the deployer creates and owns them; without grants the service principal can use none
    prod = BUNDLE["targets"]["prod"]["resources"]
    assert set(prod) == {"jobs", "schemas", "volumes"}
    for (kind, name), privileges in PROD_GRANTS.items():
        assert "grants" not in BUNDLE["resources"][kind][name]  # dev: the deploying user owns it
        (grant,) = prod[kind][name]["grants"]
        assert grant["principal"] == "${var.service_principal}"
        assert set(grant["privileges"]) == privileges, (kind, name)
        assert set(prod[kind][name]) == {"grants"}  # nothing else differs from dev


def test_readme_says_what_the_bundle_cannot_grant():
    # the catalog is not the bundle's, the scope is a person's, run_as needs the deployer's role
    deploy = DEPLOY_PAGE.split("## Deploy to Databricks")[1].split("\n## ")[0]
    assert "databricks secrets put-acl mirror <application-id> READ" in deploy
    assert "GRANT USE CATALOG ON CATALOG main TO `<application-id>`" in deploy
    assert "Service Principal User" in deploy


def deploy_commands() -> list[str]:
    """The commands of docs/databricks.md "Deploy to Databricks", continued lines joined, comments
    dropped."""
    section = DEPLOY_PAGE.split("## Deploy to Databricks")[1].split("\n## ")[0]
    block = section.split("```bash\n")[1].split("```")[0].replace("\\\n", " ")
    return [" ".join(line.split()) for line in block.splitlines() if line.split("#")[0].strip()]


def test_readme_first_prod_deploy_is_paused_until_the_config_is_there():
    # the deploy creates the config volume empty: an unpaused continuous job would fail at once
    prod = [c for c in deploy_commands() if " -t prod" in c or "/Volumes/main/mirror/" in c]
    first, copy, second = prod
    assert first.startswith("databricks bundle deploy -t prod")
    assert "--var=continuous_pause_status=PAUSED" in first.replace('"', "")
    assert copy == (
        "databricks fs cp mm2.properties dbfs:/Volumes/main/mirror/config/mm2.properties"
    )
    assert second.startswith("databricks bundle deploy -t prod") and "PAUSED" not in second


def test_no_prod_permission_lets_every_user_run_the_jobs():
    # CAN_RUN on mirror_failover/mirror_cutover is enough to commit offsets on the target
    prod = BUNDLE["targets"]["prod"]
    values = {n: v.get("default") for n, v in BUNDLE["variables"].items()}
    values.update(prod.get("variables", {}))
    permissions = list(BUNDLE.get("permissions", [])) + prod["permissions"]
    for resources in (BUNDLE["resources"], prod["resources"]):
        for kind in resources.values():
            for spec in kind.values():
                permissions += spec.get("permissions", [])
    groups = [p["group_name"] for p in permissions if "group_name" in p]
    assert groups == ["${var.operators_group}"]
    for group in groups:
        name = re.fullmatch(r"\$\{var\.([a-z_]+)\}", group)
        resolved = values[name[1]] if name else group
        assert resolved is None, resolved  # no default: each prod deploy names its group
    assert "users" in BUNDLE["variables"]["operators_group"]["description"]  # says why


def test_sync_leaves_out_what_no_job_or_notebook_reads():
    excluded = BUNDLE["sync"]["exclude"]
    assert excluded == ["tests/**", "bench/**", ".ci/**", "examples/**", "docs/**"]
    for folder in ("tests", "bench", ".ci", "examples", "docs"):
        files = [p.relative_to(REPO).as_posix() for p in (REPO / folder).rglob("*") if p.is_file()]
        assert files and all(any(fnmatch(f, x) for x in excluded) for f in files), folder
    needed = [*REPO.glob("jobs/*.py"), *NOTEBOOKS, *REPO.glob("dashboards/*"), REPO / "setup.py"]
    named = re.findall(r"(?:python_file|notebook_path|file_path): (\S+)", TEXT)
    needed += [REPO / p for p in named]
    assert len(named) >= 6
    for path in needed:
        name = path.resolve().relative_to(REPO).as_posix()
        assert not any(fnmatch(name, x) for x in excluded), name


def test_every_job_gets_the_schema_and_the_state_volume_of_its_target():
    for name, spec in JOBS.items():
        defaults = {p["name"]: p["default"] for p in spec["parameters"]}
        assert (
            defaults["config_path"] == f"/Volumes/${{var.catalog}}/{SCHEMA}/config/mm2.properties"
        )
        assert defaults["tables_schema"] == f"${{var.catalog}}.{SCHEMA}", name
        assert defaults["state_dir"] == f"/Volumes/${{var.catalog}}/{SCHEMA}/state", name


def test_no_target_keeps_state_on_local_disk():
    assert "mirror-state" not in TEXT and "./state" not in TEXT
    for spec in JOBS.values():
        for p in spec["parameters"]:
            if p["name"] in ("state_dir", "config_path"):
                assert p["default"].startswith("/Volumes/"), p


@pytest.mark.parametrize(("job", "task"), TASK_LIST, ids=TASK_IDS)
def test_task_files_compute_and_libraries(job, task):
    spec = JOBS[job]
    path = (task.get("spark_python_task") or {}).get("python_file") or task["notebook_task"][
        "notebook_path"
    ]
    assert (REPO / path).is_file(), path
    if "environment_key" in task:  # serverless: dependencies come from the job's environment
        assert "job_clusters" not in spec and "libraries" not in task
        (env,) = [
            e for e in spec["environments"] if e["environment_key"] == task["environment_key"]
        ]
        assert "./dist/*.whl" in env["spec"]["dependencies"]
        assert any(p.startswith("aws-msk-iam-sasl-signer") for p in env["spec"]["dependencies"])
        assert any(p.startswith("google-auth") for p in env["spec"]["dependencies"])
        assert env["spec"]["environment_version"]
        return
    clusters = {c["job_cluster_key"] for c in spec.get("job_clusters", [])}
    assert task["job_cluster_key"] in clusters
    wheels = [lib["whl"] for lib in task["libraries"] if "whl" in lib]
    assert wheels == ["./dist/*.whl"]
    pypi = [lib["pypi"]["package"] for lib in task["libraries"] if "pypi" in lib]
    assert any(p.startswith("confluent-kafka") for p in pypi)
    assert any(p.startswith("aws-msk-iam-sasl-signer") for p in pypi)  # MSK IAM logins
    assert any(p.startswith("google-auth") for p in pypi)  # Google Managed Kafka logins


@pytest.mark.parametrize(("job", "task"), TASK_LIST, ids=TASK_IDS)
def test_parameters_reach_every_task_and_notebook(job, task):
    job_params = {p["name"] for p in JOBS[job]["parameters"]}
    assert {"config_path", "tables_schema", "state_dir"} <= job_params
    if "notebook_task" in task:
        widgets = widget_names(REPO / task["notebook_task"]["notebook_path"])
        assert job_params <= set(widgets), job_params - set(widgets)
        assert {n for n, required in widgets.items() if required} <= job_params
        return
    python_file = Path(task["spark_python_task"]["python_file"])
    assert f'main("{python_file.stem}")' in (REPO / python_file).read_text()
    _parts, params = TASKS[python_file.stem]
    args = task_args(task)
    assert set(args) <= {p.arg[2:] for p in params}
    assert {p.arg[2:] for p in params if p.required} <= set(args)
    for name in ("config-path", "tables-schema", "state-dir"):
        param = name.replace("-", "_")
        assert args[name] == f"{{{{job.parameters.{param}}}}}", (name, args)
    for value in args.values():
        assert set(REF.findall(value)) <= job_params


def test_every_parameter_of_a_job_without_notebook_tasks_is_used_by_a_task():
    for name, spec in JOBS.items():
        text = yaml.safe_dump(spec["tasks"])
        notebook = any("notebook_task" in t for t in spec["tasks"])
        for p in spec["parameters"]:
            assert notebook or f"job.parameters.{p['name']}" in text, (name, p["name"])


def test_replication_is_continuous_on_a_job_cluster_with_secrets_from_the_scope():
    job = JOBS["mirror_replication"]
    assert job["continuous"] == {"task_retry_mode": "ON_FAILURE"}
    assert "schedule" not in job
    assert {t["task_key"] for t in job["tasks"]} == {"replication", "companions", "materialization"}
    env = job["job_clusters"][0]["new_cluster"]["spark_env_vars"]
    assert all(v.startswith("{{secrets/${var.secret_scope}/") for v in env.values())
    assert all("once" not in task_args(t) for t in job["tasks"])


def test_catch_up_is_scheduled_serverless_and_runs_once():
    job = JOBS["mirror_catch_up"]
    assert job["schedule"]["quartz_cron_expression"] and "continuous" not in job
    assert "job_clusters" not in job and "spark_env_vars" not in yaml.safe_dump(job)
    tasks = {t["task_key"]: t for t in job["tasks"]}
    assert list(tasks) == ["replication", "companions", "materialization"]
    for task in tasks.values():
        assert task["environment_key"] == "mirror"
        assert task_args(task)["once"] == "true"  # availableNow catch-up, then exit
    assert tasks["companions"]["depends_on"] == [{"task_key": "replication"}]
    assert tasks["materialization"]["depends_on"] == [{"task_key": "companions"}]


def test_maintenance_is_scheduled():
    job = JOBS["mirror_maintenance"]
    assert job["schedule"]["quartz_cron_expression"] and "continuous" not in job


def test_notebook_first_cells_install_the_wheel():
    assert NOTEBOOKS
    for path in NOTEBOOKS:
        first = code_cells(path)[0]
        assert "DATABRICKS_RUNTIME_VERSION" in first, path.name
        assert re.search(r"^\s*%pip install .*\{spec\}", first, re.M), path.name
        for login in ("aws-msk-iam-sasl-signer-python", "google-auth"):  # as the jobs install
            assert login in first, (path.name, login)
        assert "artifacts/.internal/mirror_lib-*.whl" in first, path.name  # the bundle's wheel
        assert 'widgets.text("wheel"' in first, path.name  # or a given wheel/version
        python = TransformerManager().transform_cell(first)
        compile(python, path.name, "exec")


def test_notebooks_take_the_schema_and_default_to_the_bundle_paths():
    for path in NOTEBOOKS:
        widgets = widget_names(path)
        assert "state_dir" in widgets, path.name
        if path.name != "01_configure_flows.ipynb":
            assert "tables_schema" in widgets, path.name
        source = "\n".join(code_cells(path))
        assert "default_path(" in source, path.name  # the bundle's volumes on Databricks


def test_job_entry_points_are_thin():
    for path in glob.glob(str(REPO / "jobs" / "*.py")):
        source = Path(path).read_text()
        assert Path(path).stem in TASKS
        assert (
            len(source.splitlines()) < 20
            and "from mirror_lib.app.bundle_tasks import main" in source
        )
