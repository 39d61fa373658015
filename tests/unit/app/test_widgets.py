"""The widgets layer: Databricks widgets (fake dbutils), job arguments, environment, defaults."""

from __future__ import annotations

import pytest

from mirror_lib.app.widgets import (
    Widgets,
    as_bool,
    as_number,
    dropdown,
    multiselect,
    parse_job_args,
    text,
)
from mirror_lib.errors import ConfigError


class FakeWidgets:
    """dbutils.widgets as documented: creating an existing widget keeps its value."""

    def __init__(self, job_values: dict[str, str] | None = None) -> None:
        self.values = dict(job_values or {})
        self.created: list[tuple] = []

    def _create(self, kind: str, name: str, default: str, *rest) -> None:
        self.created.append((kind, name, default, *rest))
        self.values.setdefault(name, default)

    def text(self, name, default, label=None):
        self._create("text", name, default, label)

    def dropdown(self, name, default, choices, label=None):
        self._create("dropdown", name, default, choices, label)

    def multiselect(self, name, default, choices, label=None):
        self._create("multiselect", name, default, choices, label)

    def combobox(self, name, default, choices, label=None):
        self._create("combobox", name, default, choices, label)

    def get(self, name):
        if name not in self.values:
            raise KeyError(f"InputWidgetNotDefined: {name}")
        return self.values[name]


class FakeDbutils:
    def __init__(self, job_values=None) -> None:
        self.widgets = FakeWidgets(job_values)


PARAMS = (
    text("config_path", "mm2.properties", "Config file", required=True),
    dropdown("mode", "once", ["once", "continuous"]),
    multiselect("jobs", ["replication"], ["replication", "checkpoints", "heartbeats"]),
    text("duration_seconds", "60", parse=as_number(1)),
)


def test_defaults_when_nothing_is_set():
    w = Widgets(*PARAMS, env={}, interactive=False)
    assert w.values() == {
        "config_path": "mm2.properties",
        "mode": "once",
        "jobs": ["replication"],
        "duration_seconds": 60.0,
    }


def test_environment_then_job_arguments_take_precedence():
    env = {"MIRROR_MODE": "continuous", "MIRROR_DURATION_SECONDS": "5"}
    w = Widgets(*PARAMS, env=env, interactive=False)
    assert (w.get("mode"), w.get("duration_seconds")) == ("continuous", 5.0)
    w = Widgets(*PARAMS, env=env, args=["--mode", "once", "--jobs=checkpoints,heartbeats"])
    assert w.get("mode") == "once"
    assert w.get("jobs") == ["checkpoints", "heartbeats"]
    assert w.get("duration_seconds") == 5.0


def test_databricks_widgets_are_declared_and_read():
    dbutils = FakeDbutils({"mode": "continuous", "jobs": "heartbeats,checkpoints"})
    w = Widgets(*PARAMS, dbutils=dbutils, env={"MIRROR_MODE": "once"})
    kinds = {c[1]: c[0] for c in dbutils.widgets.created}
    assert kinds == {
        "config_path": "text",
        "mode": "dropdown",
        "jobs": "multiselect",
        "duration_seconds": "text",
    }
    assert ("dropdown", "mode", "once", ["once", "continuous"], "mode") in dbutils.widgets.created
    assert w.get("mode") == "continuous"  # the widget (job parameter) wins over the environment
    assert w.get("jobs") == ["heartbeats", "checkpoints"]


def test_invalid_dropdown_value_names_widget_parameter_and_variable():
    w = Widgets(*PARAMS, env={"MIRROR_MODE": "sometimes"}, interactive=False)
    with pytest.raises(ConfigError) as err:
        w.values()
    message = str(err.value)
    assert "widget mode = 'sometimes'" in message
    assert "one of once, continuous" in message
    assert "job parameter --mode" in message
    assert "environment variable MIRROR_MODE" in message


def test_parse_errors_and_missing_required_values():
    w = Widgets(*PARAMS, env={"MIRROR_DURATION_SECONDS": "soon"}, interactive=False)
    with pytest.raises(ConfigError, match=r"duration_seconds = 'soon': expected a number >= 1"):
        w.get("duration_seconds")
    w = Widgets(*PARAMS, env={"MIRROR_CONFIG_PATH": "  "}, interactive=False)
    with pytest.raises(ConfigError, match="config_path = <missing>"):
        w.get("config_path")
    w = Widgets(*PARAMS, env={"MIRROR_JOBS": "replication,backups"}, interactive=False)
    with pytest.raises(ConfigError, match="any of replication, checkpoints, heartbeats"):
        w.get("jobs")


def test_unknown_job_arguments_and_names_are_errors():
    with pytest.raises(ConfigError, match="one of --config-path, --duration-seconds"):
        parse_job_args(["--colour", "red"], PARAMS)
    with pytest.raises(ConfigError, match="a value after --mode"):
        parse_job_args(["--mode"], PARAMS)
    with pytest.raises(ConfigError, match="one of config_path"):
        Widgets(*PARAMS, env={}, interactive=False).get("nope")


def test_parsers():
    assert [as_bool(v) for v in ("true", "Yes", "0", "FALSE")] == [True, True, False, False]
    with pytest.raises(ValueError):
        as_bool("maybe")
    assert as_number(0, integer=True)("7") == 7
    with pytest.raises(ValueError, match="an integer >= 0"):
        as_number(0, integer=True)("7.5")
    with pytest.raises(ConfigError, match="choice"):
        dropdown("x", "a", [])


def test_interactive_jupyter_shows_controls_initialised_from_environment():
    pytest.importorskip("ipywidgets")
    w = Widgets(*PARAMS, env={"MIRROR_MODE": "continuous"}, interactive=True)
    assert w.controls["mode"].value == "continuous"
    w.controls["mode"].value = "once"  # a person edits the widget
    w.controls["jobs"].value = ("checkpoints",)
    assert w.get("mode") == "once"
    assert w.get("jobs") == ["checkpoints"]
