"""Databricks specifics: durable state dir, secrets resolved on the driver, bundle defaults."""

from __future__ import annotations

import json

import pytest

from mirror_lib.app.bundle_tasks import TASKS, main
from mirror_lib.app.widgets import parse_job_args
from mirror_lib.config.databricks import (
    check_state_dir,
    default_path,
    load_job_config,
    resolve_secrets_on_driver,
    volume_path,
)
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.replication.context import SECRET_OPTION, FlowContext

DBR = {"DATABRICKS_RUNTIME_VERSION": "17.3"}
PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:1",
    "B.bootstrap.servers": "b:1",
    "A->B.enabled": "true",
    "A.sasl.password": "${secret:mirror/source-sasl-password}",
    "B.sasl.password": "${env:MIRROR_TARGET_SASL_PASSWORD}",
}


@pytest.mark.parametrize("path", ["./mirror-state", "/tmp/state", "mirror-state", "/Workspace/x"])
def test_a_local_state_dir_is_refused_on_databricks(path):
    check_state_dir(path, env={})  # anywhere else it is fine
    with pytest.raises(ConfigError, match=r"mirror.state.dir = .*/Volumes/main/mirror/state"):
        check_state_dir(path, env=DBR)


@pytest.mark.parametrize("path", ["/Volumes/main/mirror/state", "/dbfs/mirror"])
def test_durable_state_dirs_are_accepted_on_databricks(path):
    check_state_dir(path, env=DBR)


@pytest.mark.parametrize(
    ("path", "hint"),
    [
        ("dbfs:/mirror", "or /dbfs/mirror"),
        ("s3://bucket/state", "/Volumes/main/mirror/state"),
        ("abfss://c@a.dfs.core.windows.net/s", "/Volumes/main/mirror/state"),
    ],
)
def test_a_uri_state_dir_is_refused_anywhere(path, hint):
    """Spark checkpoints and state files go through the file system: a URI would become a
    local folder named after its scheme, lost with the cluster."""
    for env in ({}, DBR):
        with pytest.raises(ConfigError, match="not a URI") as err:
            check_state_dir(path, env=env)
        assert path in str(err.value) and hint in str(err.value)
    with pytest.raises(ConfigError, match=r"mirror\.state\.dir"):
        parse_config({**PROPS, "mirror.state.dir": path})


def test_parse_config_refuses_the_default_state_dir_on_databricks(monkeypatch):
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    with pytest.raises(ConfigError, match=r"mirror\.state\.dir = '\./mirror-state'"):
        parse_config(PROPS)
    config = parse_config({**PROPS, "mirror.state.dir": "/Volumes/main/mirror/state"})
    assert config.state_dir == "/Volumes/main/mirror/state"


def test_secrets_are_resolved_on_the_driver_and_travel_in_a_redacted_option():
    asked = []

    def lookup(scope: str, key: str) -> str:
        asked.append((scope, key))
        return "s3cr3t"

    config = resolve_secrets_on_driver(parse_config(PROPS), lookup)
    assert asked == [("mirror", "source-sasl-password")]
    assert config.properties["A.sasl.password"] == "s3cr3t"
    assert config.properties["B.sasl.password"] == "${env:MIRROR_TARGET_SASL_PASSWORD}"
    assert "s3cr3t" not in repr(config)
    options = FlowContext.create(config, "A->B").to_options()
    assert "s3cr3t" not in options["properties"]
    assert json.loads(options[SECRET_OPTION]) == {"A.sasl.password": "s3cr3t"}
    assert "secret" in SECRET_OPTION  # Spark's spark.redaction.regex hides such options
    rebuilt = FlowContext.from_options(options)
    assert rebuilt.config.properties == config.properties
    plain = FlowContext.create(parse_config(PROPS), "A->B").to_options()  # references only
    assert SECRET_OPTION not in plain


def test_job_config_overrides_schema_and_state_dir(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text("".join(f"{k} = {v}\n" for k, v in PROPS.items()))
    config = load_job_config(str(path), " main.dev_ann_mirror ", str(tmp_path / "s"))
    assert config.properties["mirror.tables.schema"] == "main.dev_ann_mirror"
    assert config.state_dir == str(tmp_path / "s")
    unchanged = load_job_config(str(path))
    assert "mirror.tables.schema" not in unchanged.properties
    assert unchanged.properties["A.sasl.password"].startswith("${secret:")


def test_an_empty_config_path_is_the_schemas_config_volume():
    with pytest.raises(ConfigError, match=r"dbfs:/Volumes/main/dev_ann_mirror/config/mm2\.prop"):
        load_job_config("", "main.dev_ann_mirror")
    with pytest.raises(ConfigError, match=r"config_path = ' ': expected an mm2.properties path"):
        load_job_config(" ", "")


def test_no_default_on_databricks_where_a_guess_could_be_prods():
    """A dev deployment's notebook must not default to prod's schema and volumes (it would
    save its config over prod's): on Databricks the user names them; jobs pass them."""
    assert default_path("config", env=DBR) == ""
    assert default_path("state", env=DBR) == ""
    assert default_path("schema", env=DBR) == ""
    assert default_path("state", env={}) == "./mirror-state"
    assert default_path("state", local="", env={}) == ""
    assert default_path("schema", env={}) == ""
    with pytest.raises(ConfigError, match="config, state or schema"):
        default_path("logs")
    assert volume_path("cat.sch", "state") == "/Volumes/cat/sch/state"
    with pytest.raises(ConfigError, match=r"catalog\.schema"):
        volume_path("mirror", "state")


def test_empty_job_parameters_stay_bound_to_their_flag():
    _parts, params = TASKS["replication"]
    values = parse_job_args(["--flows=", "--once=true", "--config-path=/Volumes/m/c"], params)
    assert values == {"flows": "", "once": "true", "config_path": "/Volumes/m/c"}


def test_a_missing_config_in_the_volume_says_how_to_put_it_there(capsys):
    # a first prod deploy creates the config volume empty; the task names the path and the fix
    path = "/Volumes/main/mirror/config/mm2.properties"
    with pytest.raises(ConfigError, match=f"config_path = '{path}'") as err:
        load_job_config(path, "main.mirror", "/Volumes/main/mirror/state")
    assert f"databricks fs cp mm2.properties dbfs:{path}" in str(err.value)
    assert main("replication", [f"--config-path={path}"]) == 2
    assert f"dbfs:{path}" in capsys.readouterr().err
