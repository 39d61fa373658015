"""The settings' types are what their parsers return, so that mypy's checks of their use hold:
FlowSettings is built from a dict of parsed values, and global_setting has one overload per type."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest

from mirror_lib.config import global_settings
from mirror_lib.config.global_settings import GLOBAL_BY_KEY
from mirror_lib.config.settings import SETTINGS, FlowSettings

FLOW_TYPES = get_type_hints(FlowSettings)


def conforms(value: Any, tp: Any) -> bool:
    """``value`` is of type ``tp`` (the forms the settings use)."""
    origin = get_origin(tp)
    if origin is Literal:
        return value in get_args(tp)
    if origin in (types.UnionType, typing.Union):
        return any(conforms(value, arg) for arg in get_args(tp))
    if origin is tuple:
        return isinstance(value, tuple) and all(conforms(v, get_args(tp)[0]) for v in value)
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, float)
    return isinstance(value, tp) and (tp is bool or not isinstance(value, bool))


#: A set value besides the default where the default alone leaves a type untried.
SET: dict[str, str] = {"mirror.outage.max.seconds": "5", "mirror.metrics.port": "9400"}


def samples(setting: Any, tp: Any) -> list[str]:
    """The default, a set value and, for a word setting, every word it takes."""
    words = list(get_args(tp)) if get_origin(tp) is Literal else []
    return [setting.default, *words, *([SET[setting.key]] if setting.key in SET else [])]


def test_every_flow_setting_is_a_field() -> None:
    fields = {f.name for f in dataclasses.fields(FlowSettings)}
    assert {s.attr for s in SETTINGS} == fields - {"separator_configured", "explicit"}


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.key)
def test_flow_setting_parses_to_its_field_type(setting: Any) -> None:
    for raw in samples(setting, FLOW_TYPES[setting.attr]):
        value = setting.parse(setting.key, raw)
        assert conforms(value, FLOW_TYPES[setting.attr]), (setting.key, raw, value)


def test_global_setting_has_an_overload_per_key_and_type() -> None:
    typed: dict[str, Any] = {}
    for overload in typing.get_overloads(global_settings.global_setting):
        hints = get_type_hints(overload, vars(global_settings))
        for key in get_args(hints["key"]):
            typed[key] = hints["return"]
    assert set(typed) == set(GLOBAL_BY_KEY)
    for key, setting in GLOBAL_BY_KEY.items():
        assert conforms(global_settings.global_setting({}, key), typed[key]), key
        for raw in samples(setting, typed[key]):
            assert conforms(setting.parse(key, raw), typed[key]), (key, raw)
