"""The configuration reference of the documentation site, generated from the settings tables.

``make docs`` builds the site in strict mode (broken links and anchors fail); these tests hold the
hook that writes docs/configuration.md's reference (docs/hooks/settings_reference.py).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from mirror_lib.config.global_settings import GLOBAL_SETTINGS
from mirror_lib.config.settings import BY_KEY, SETTINGS

ROOT = Path(__file__).resolve().parents[2]


def _hook() -> ModuleType:
    path = ROOT / "docs" / "hooks" / "settings_reference.py"
    spec = importlib.util.spec_from_file_location("settings_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


def _row(reference: str, key: str) -> str:
    return next(line for line in reference.splitlines() if line.startswith(f"| `{key}`"))


@pytest.mark.parametrize("setting", [*SETTINGS, *GLOBAL_SETTINGS], ids=lambda s: s.key)
def test_every_key_has_a_row_with_its_default_and_meaning(setting) -> None:
    row = _row(HOOK.reference(), setting.key)
    assert (f"`{setting.default}`" if setting.default else "(empty)") in row
    assert all(f"`{alias}`" in row for alias in setting.aliases)
    assert HOOK.accepted(setting) in row.replace("&lt;", "<").replace("&gt;", ">")


def test_accepted_values_are_what_the_key_s_own_check_says() -> None:
    assert HOOK.accepted(BY_KEY["mirror.delivery"]) == "one of exactly_once, at_least_once"
    assert HOOK.accepted(BY_KEY["tasks.max"]) == "a whole number >= 1"
    assert HOOK.accepted(BY_KEY["mirror.starting.offsets"]) == "empty, or one of earliest, latest"
    assert HOOK.accepted(BY_KEY["replication.factor"]).startswith("a replication factor >= 1")


def test_the_configuration_page_gets_the_reference_in_place_of_its_marker() -> None:
    page = SimpleNamespace(file=SimpleNamespace(src_uri=HOOK.PAGE))
    source = (ROOT / "docs" / HOOK.PAGE).read_text()
    built = HOOK.on_page_markdown(source, page=page)
    assert HOOK.MARKER not in built and HOOK.reference() in built
    other = SimpleNamespace(file=SimpleNamespace(src_uri="index.md"))
    assert HOOK.on_page_markdown(HOOK.MARKER, page=other) == HOOK.MARKER
    with pytest.raises(ValueError, match="lost its marker"):
        HOOK.on_page_markdown("# Configuration\n", page=page)
