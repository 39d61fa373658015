"""MkDocs hook: the configuration reference, generated from the settings tables of the code.

``docs/configuration.md`` holds the marker ``<!-- settings-reference -->``; at build time it is
replaced with one table of the per-flow keys (``mirror_lib.config.settings.SETTINGS``) and one of
the process-wide keys (``mirror_lib.config.global_settings.GLOBAL_SETTINGS``): key, default,
accepted values (what the key's own parser says when it refuses a value) and meaning. So the
reference cannot drift from the code. ``python docs/hooks/settings_reference.py`` prints it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- settings-reference -->"
PAGE = "configuration.md"

# The tree being documented, not whatever mirror_lib is installed in the virtualenv.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mirror_lib.config.global_settings import GLOBAL_SETTINGS  # noqa: E402
from mirror_lib.config.setting_values import Setting, regex_list, text  # noqa: E402
from mirror_lib.config.settings import SETTINGS  # noqa: E402
from mirror_lib.errors import ConfigError  # noqa: E402

#: Parsers whose refusal does not read as a description of what they accept.
_DESCRIBED = {
    regex_list: "comma-separated regular expressions, each matching a whole name",
    text: "text",
}
#: Values tried on a parser, in order; the first it refuses gives its "expected ..." text.
_PROBES = ("0", "(", "")


def accepted(setting: Setting) -> str:
    """What the key accepts, in the words of its parser's own error message."""
    if setting.parse in _DESCRIBED:
        return _DESCRIBED[setting.parse]
    for probe in _PROBES:
        try:
            setting.parse(setting.key, probe)
        except ConfigError as exc:
            return exc.expected.replace("one of , ", "empty, or one of ")  # choice("", ...)
    return "text"


def _cell(value: str) -> str:
    """A table cell: pipes escaped, and ``<`` / ``>`` outside code spans (``<dir>`` is no tag)."""
    parts = value.replace("|", "\\|").replace("\n", " ").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _default(setting: Setting) -> str:
    return f"`{setting.default}`" if setting.default else "(empty)"


def table(settings: tuple[Setting, ...]) -> str:
    """A Markdown table of ``settings``: key (old names), default, accepted values, meaning."""
    rows = ["| key | default | accepts | meaning |", "|---|---|---|---|"]
    for s in settings:
        key = f"`{s.key}`"
        if s.aliases:
            key += "<br>(old name " + ", ".join(f"`{a}`" for a in s.aliases) + ")"
        rows.append(f"| {key} | {_cell(_default(s))} | {_cell(accepted(s))} | {_cell(s.doc)} |")
    return "\n".join(rows) + "\n"


def reference() -> str:
    """Both tables with their headings, as they replace the marker."""
    mm2 = tuple(s for s in SETTINGS if not s.key.startswith("mirror."))
    ours = tuple(s for s in SETTINGS if s.key.startswith("mirror."))
    return (
        "### Per-flow keys: MirrorMaker 2's {#per-flow-mm2-keys}\n\n"
        "Set at the top level for every flow, or as `A->B.<key>` for one flow.\n\n"
        + table(mm2)
        + "\n### Per-flow keys: `mirror.*` {#per-flow-mirror-keys}\n\n"
        "Set at the top level for every flow, or as `A->B.<key>` for one flow.\n\n"
        + table(ours)
        + "\n### Process-wide keys {#process-wide-keys}\n\n"
        "Top level only: set per flow they are refused.\n\n" + table(GLOBAL_SETTINGS)
    )


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """MkDocs event: put the generated reference in place of the marker."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lost its marker {MARKER}: the reference has no place")
    return markdown.replace(MARKER, reference())


if __name__ == "__main__":
    print(reference())
