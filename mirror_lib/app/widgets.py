"""Notebook and job parameters: one declaration for Databricks widgets, Jupyter and headless runs.

A parameter's value is looked up, first hit wins, in: the Databricks widget (job parameters set
widget values on Databricks), the job's ``--name value`` arguments, the environment variable
``MIRROR_<NAME>``, an ipywidget shown in interactive Jupyter (initialised from the previous
sources), and finally the declared default. Every value is validated (choices, parser) before it
is returned, and a bad or missing one raises a :class:`ConfigError` that lists every place tried.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mirror_lib.errors import ConfigError

KINDS = ("text", "dropdown", "combobox", "multiselect")


@dataclass(frozen=True)
class Param:
    """One declared parameter. ``parse`` turns the string into a value or raises ValueError."""

    name: str
    default: str
    kind: str = "text"
    choices: tuple[str, ...] = ()
    label: str = ""
    parse: Callable[[str], Any] | None = field(default=None, compare=False)
    required: bool = False
    help: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"widget {self.name} kind", self.kind, " | ".join(KINDS))
        if self.kind in ("dropdown", "multiselect") and not self.choices:
            raise ConfigError(f"widget {self.name} choices", (), "at least one choice")

    @property
    def env_var(self) -> str:
        return "MIRROR_" + self.name.upper()

    @property
    def arg(self) -> str:
        return "--" + self.name.replace("_", "-")


def text(name: str, default: str = "", label: str = "", **kw: Any) -> Param:
    """A free-text parameter."""
    return Param(name, default, "text", (), label, **kw)


def dropdown(name: str, default: str, choices: Sequence[str], label: str = "", **kw: Any) -> Param:
    """One value out of ``choices``."""
    return Param(name, default, "dropdown", tuple(choices), label, **kw)


def multiselect(
    name: str, default: str | Sequence[str], choices: Sequence[str], label: str = "", **kw: Any
) -> Param:
    """Zero or more of ``choices``; the value is a list (Databricks hands over a joined string)."""
    joined = default if isinstance(default, str) else ",".join(default)
    return Param(name, joined, "multiselect", tuple(choices), label, **kw)


def as_bool(value: str) -> bool:
    """'true'/'false' (also yes/no, 1/0), any case."""
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise ValueError("true or false")


def as_number(minimum: float = 0, integer: bool = False) -> Callable[[str], float | int]:
    """A parser for numbers >= ``minimum``."""

    def parse(value: str) -> float | int:
        try:
            number = int(value) if integer else float(value)
        except ValueError:
            raise ValueError(f"{'an integer' if integer else 'a number'} >= {minimum}") from None
        if number < minimum:
            raise ValueError(f"a number >= {minimum}")
        return number

    return parse


def parse_job_args(args: Sequence[str], params: Sequence[Param]) -> dict[str, str]:
    """``--name value`` / ``--name=value`` pairs of a job task; unknown names are an error."""
    known = {p.arg: p.name for p in params}
    values: dict[str, str] = {}
    items = list(args)
    while items:
        item = items.pop(0)
        key, eq, value = item.partition("=")
        if key not in known:
            raise ConfigError("job parameter", item, "one of " + ", ".join(sorted(known)))
        if not eq:
            if not items:
                raise ConfigError(f"job parameter {key}", None, "a value after " + key)
            value = items.pop(0)
        values[known[key]] = value
    return values


class Widgets:
    """Declares parameters and reads their values wherever the code runs.

    ``dbutils``: the notebook's ``dbutils`` on Databricks (pass it in; never looked up here).
    ``args``: a job task's argument list. ``env``: defaults to ``os.environ``. ``interactive``:
    show ipywidgets (default: when running in a Jupyter kernel without dbutils).
    """

    def __init__(
        self,
        *params: Param,
        dbutils: Any = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        interactive: bool | None = None,
    ) -> None:
        self.params = {p.name: p for p in params}
        self.dbutils = dbutils
        self.args = parse_job_args(args, params) if args is not None else {}
        self.env = os.environ if env is None else env
        if dbutils is not None:
            self.interactive = False
        else:
            self.interactive = _in_jupyter() if interactive is None else interactive
        self.controls: dict[str, Any] = {}
        if dbutils is not None:
            for p in params:
                _declare_databricks(dbutils, p)
        elif self.interactive:
            self.controls = {p.name: _declare_ipywidget(p, self._initial(p)) for p in params}

    def _initial(self, p: Param) -> str:
        if p.name in self.args:
            return self.args[p.name]
        return self.env.get(p.env_var, p.default)

    def _raw(self, p: Param) -> str:
        if self.dbutils is not None:
            return str(self.dbutils.widgets.get(p.name))
        if p.name in self.controls:
            value = self.controls[p.name].value
            return ",".join(value) if isinstance(value, tuple | list) else str(value)
        return self._initial(p)

    def where(self, p: Param) -> str:
        """Every place a parameter's value is looked for, for error messages."""
        places = [
            f"widget '{p.name}'",
            f"job parameter {p.arg}",
            f"environment variable {p.env_var}",
        ]
        return ", ".join(places)

    def get(self, name: str) -> Any:
        """The validated (and parsed) value of one parameter."""
        if name not in self.params:
            raise ConfigError("widget", name, "one of " + ", ".join(self.params))
        p = self.params[name]
        raw = self._raw(p).strip()
        key, where = f"widget {p.name}", self.where(p)
        if p.kind == "multiselect":
            values = [v.strip() for v in raw.split(",") if v.strip()]
            bad = [v for v in values if v not in p.choices]
            if bad:
                raise ConfigError(key, raw, "any of " + ", ".join(p.choices), where)
            if p.required and not values:
                raise ConfigError(
                    key, raw, "at least one of " + ", ".join(p.choices), self.where(p)
                )
            return values
        if p.required and not raw:
            raise ConfigError(key, None, p.help or "a value", where)
        if p.kind == "dropdown" and raw not in p.choices:
            raise ConfigError(key, raw, "one of " + ", ".join(p.choices), where)
        if p.parse is None or (not raw and not p.required):
            return raw
        try:
            return p.parse(raw)
        except ValueError as exc:
            raise ConfigError(
                key, raw, str(exc) or p.help or "a valid value", self.where(p)
            ) from None

    def values(self) -> dict[str, Any]:
        """Every parameter's validated value; the first bad one raises."""
        return {name: self.get(name) for name in self.params}


def _in_jupyter() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def _declare_databricks(dbutils: Any, p: Param) -> None:
    w = dbutils.widgets
    label = p.label or p.name
    if p.kind == "text":
        w.text(p.name, p.default, label)
    else:
        default = p.default.split(",")[0] if p.kind != "multiselect" else p.default
        getattr(w, p.kind)(p.name, default or p.choices[0], list(p.choices), label)


def _declare_ipywidget(p: Param, initial: str) -> Any:
    import ipywidgets as iw
    from IPython.display import display

    common = {"description": p.label or p.name, "style": {"description_width": "initial"}}
    if p.kind == "dropdown" and initial in p.choices:
        control = iw.Dropdown(options=list(p.choices), value=initial, **common)
    elif p.kind == "multiselect":
        chosen = tuple(v for v in initial.split(",") if v in p.choices)
        control = iw.SelectMultiple(options=list(p.choices), value=chosen, **common)
    elif p.kind == "combobox":
        control = iw.Combobox(options=list(p.choices), value=initial, **common)
    else:  # text, or a dropdown whose initial value is invalid (get() reports it)
        control = iw.Text(value=initial, **common)
    display(control)
    return control
