"""Code, tests, bench and notebooks cite only documents the repository has.

A citation is a path to a Markdown file (``docs/design.md#d3-exactly-once``, ``bench/README.md``),
optionally with anchors; the file must exist and each anchor must be a heading of it. Bare design
decision numbers (``D3``), section signs (``§4.4``) and README section names (``README "Tests"``)
cite documents by their numbering or layout; the first two have no place to point at, and a README
section must exist. The documentation site (``make docs``) checks the links between its own pages.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("mirror_lib", "jobs", "bench", "notebooks", "tests")
SUFFIXES = (".py", ".md", ".ipynb")
FRONT = ("README.md", "ARCHITECTURE.md", "CHANGELOG.md")

#: ``docs/page.md#anchor, #another and #third``: a path, its anchor and more anchors of it.
DOC = re.compile(
    r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.md)((?:#[\w-]+)?)((?:(?:,\s*|\s+and\s+)#[\w-]+)*)"
)
DECISION = re.compile(r"(?<![\w#/.-])D(?:[1-9]|1[0-9])(?![\w-])")
SECTION = re.compile(r"§\s*\d[\d.]*")
README_SECTION = re.compile(r'README\s*[(:,]?\s*["“]([^"”\n]+)["”]')
#: Documents that were never in the repository, named without a folder.
NEVER_HERE = ("DESIGN.md", "mm2.md", "platform.md")
#: Documents of other projects, cited by their own name.
ELSEWHERE = ("CONFIGURATION.md",)  # librdkafka's property list (tests/tools/librdkafka_dump.py)
#: This file: its examples cite what the repository lacks, on purpose.
THIS = Path(__file__).resolve()


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor of a Markdown file: explicit ``{#id}`` ones and slugs of its headings."""
    found: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*$", line)
        if match is None:
            continue
        title = match.group(1)
        explicit = re.search(r"\{#([\w-]+)\}\s*$", title)
        if explicit:
            found.add(explicit.group(1))
            title = title[: explicit.start()]
        found.add(slug(title))
    return frozenset(found)


def _cited_file(name: str, source: Path) -> Path | None:
    """The file a citation names: from the repository root, else beside the citing file."""
    for base in (ROOT, source.parent):
        candidate = (base / name).resolve()
        if candidate.is_file():
            return candidate
    return None


def problems(source: Path, text: str) -> list[str]:
    """What in ``text`` (the content of ``source``) cites something the repository lacks."""
    found = []
    for m in DECISION.finditer(text):
        found.append(f"design decision {m.group(0)}: cite docs/design.md#<anchor> instead")
    for m in SECTION.finditer(text):
        found.append(f"section {m.group(0)!r} of no document: cite a docs/ page and anchor")
    for m in README_SECTION.finditer(text):
        readme = ROOT / "README.md"
        if slug(m.group(1)) not in anchors(readme):
            found.append(f'README "{m.group(1)}": no such section in README.md')
    for m in DOC.finditer(text):
        name, first, more = m.group(1), m.group(2), m.group(3)
        bare = "/" not in name
        if (bare and not name[0].isupper() and name not in NEVER_HERE) or name in ELSEWHERE:
            continue  # a file name in code (``conf.md``), or another project's document
        cited = None if name in NEVER_HERE else _cited_file(name, source)
        if cited is None:
            found.append(f"{name}: the repository has no such document")
            continue
        for anchor in [first, *re.findall(r"#[\w-]+", more)]:
            if anchor and anchor[1:] not in anchors(cited):
                found.append(f"{name}{anchor}: no such heading in {name}")
    return found


def _scanned() -> list[Path]:
    files = [ROOT / name for name in FRONT if (ROOT / name).is_file()]
    for folder in SCANNED:
        files += sorted(
            p
            for p in (ROOT / folder).rglob("*")
            if p.suffix in SUFFIXES
            and p.is_file()
            and "__pycache__" not in p.parts
            and p.resolve() != THIS
        )
    return files


def test_every_citation_names_a_document_and_heading_the_repository_has() -> None:
    report = []
    for path in _scanned():
        text = path.read_text(encoding="utf-8")
        report += [f"{path.relative_to(ROOT)}: {p}" for p in problems(path, text)]
    assert not report, "\n".join(report)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the ledger (D3)", "design decision D3"),
        ("(DESIGN D4, mm2.md §4)", "design decision D4"),
        ("(DESIGN D4, mm2.md §4)", "mm2.md: the repository has no such document"),
        ("(DESIGN D4, mm2.md §4)", "section '§4' of no document"),
        ('exit codes of DESIGN.md "Command line"', "DESIGN.md: the repository has no such"),
        ("see reference/platform.md section 8", "reference/platform.md: the repository has no"),
        ("see docs/no-such-page.md", "docs/no-such-page.md: the repository has no such"),
        ("docs/design.md#d3-exactly-twice", "docs/design.md#d3-exactly-twice: no such heading"),
        ("docs/design.md#d3-exactly-once, #d99-nothing", "docs/design.md#d99-nothing: no such"),
        ('README "Metrics records"', 'README "Metrics records": no such section'),
    ],
)
def test_a_citation_of_what_the_repository_lacks_is_reported(text: str, expected: str) -> None:
    found = problems(ROOT / "mirror_lib" / "example.py", text)
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize(
    "text",
    [
        "exactly once (docs/design.md#d3-exactly-once)",
        "(docs/mm2-reference.md#checkpoints, #group-offset-sync)",
        "docs/mm2-reference.md#internal-topics,\n#replication-policies and #mirrorclient",
        "results in bench/README.md; layers in ARCHITECTURE.md",
        'path = os.path.join(tmp, "conf.md")',
        "docs/operations/migration.md#1-prove-the-copy-mirror-verify",
    ],
)
def test_citations_of_what_the_repository_has_pass(text: str) -> None:
    assert problems(ROOT / "mirror_lib" / "example.py", text) == []
