"""Code, tests, bench and notebooks cite only documents the repository has.

A citation is a path to a Markdown file (``docs/design.md#d3-exactly-once``, ``bench/README.md``),
optionally with anchors; the file must exist and each anchor must be a heading of it. Bare design
decision numbers (``D3``), section signs (``§4.4``) and README section names (``README "Tests"``)
cite documents by their numbering or layout; the first two have no place to point at, and a README
section must exist. The documentation site (``make docs``) checks the links between its own pages.

Docstrings also name code: Sphinx roles (``:func:`mirror_lib.x.y```, ``:class:`~Name```, ``:mod:``,
``:meth:``, ...) and bare dotted names (``mirror_lib.replication.copy.writer``). Each must name a
module, or a name bound in it (a class's methods and ``self.`` attributes too), read from the
source with :mod:`ast`, so nothing is imported. A short name is looked up where the docstring
stands: the enclosing classes (and their bases), then the module.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from collections.abc import Iterator
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


#: ``:func:`~mirror_lib.x.y```: a Sphinx role and the name it points at.
ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|attr|data|exc|obj|const):`~?\.?([\w.]+)`")
#: ``mirror_lib.a.b`` in running text (not a path, not part of a role).
DOTTED = re.compile(r"(?<![\w./`~-])(mirror_lib(?:\.[A-Za-z_]\w*)+)")
Scope = dict[str, "ast.AST | str"]


@cache
def _module_tree(module: str) -> ast.Module | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return ast.parse(path.read_text(encoding="utf-8"))
    return None


def _bound(body: list[ast.stmt], module: str) -> Scope:
    """What a module or class body binds: the node, or the dotted name an import binds."""
    out: Scope = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id: node for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            package = module.split(".")[: -node.level] if node.level else []
            source = ".".join([*package, *([node.module] if node.module else [])])
            out |= {a.asname or a.name: f"{source}.{a.name}" for a in node.names}
        elif isinstance(node, ast.If | ast.Try | ast.With):
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            inner += [s for h in getattr(node, "handlers", []) for s in h.body]
            out |= _bound(inner, module)
    return out


def _class_bound(cls: ast.ClassDef, module: str) -> Scope:
    """A class body's names and the attributes its methods set on ``self`` or ``cls``."""
    out = _bound(cls.body, module)
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            out.setdefault(node.attr, node)
    return out


def resolves(dotted: str) -> bool:
    """Whether ``a.b.c`` names a module of the repository or something bound in one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        tree = _module_tree(".".join(parts[:i]))
        if tree is not None:
            module = ".".join(parts[:i])
            return _resolves_in(_bound(tree.body, module), module, parts[i:])
    return False


def _resolves_in(scope: Scope, module: str, rest: list[str]) -> bool:
    if not rest:
        return True
    target = scope.get(rest[0])
    if target is None:
        return False
    if isinstance(target, str):  # imported: followed into our own modules only
        return not target.startswith("mirror_lib") or resolves(".".join([target, *rest[1:]]))
    if len(rest) == 1:
        return True
    if isinstance(target, ast.ClassDef):
        inner = _class_bound(target, module)
        if rest[1] in inner:
            return _resolves_in(inner, module, rest[1:])
        return bool(target.bases)  # perhaps inherited from a base not followed here
    return isinstance(target, ast.Assign | ast.AnnAssign)  # an attribute of a value


def _docstrings(tree: ast.Module) -> Iterator[tuple[str, list[Scope], list[str]]]:
    """Each docstring with the scopes a short name in it is looked up in (innermost first) and
    the bases of its enclosing classes."""
    module_scope = _bound(tree.body, "")

    def visit(node: ast.AST, scopes: list[Scope], bases: list[str]) -> Iterator:
        if isinstance(node, ast.ClassDef):
            scopes = [_class_bound(node, ""), *scopes]
            bases = [*bases, *(ast.unparse(b) for b in node.bases)]
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield doc, scopes, bases
        for child in ast.iter_child_nodes(node):
            yield from visit(child, scopes, bases)

    yield from visit(tree, [module_scope], [])


def name_problems(source: Path, text: str) -> list[str]:
    """The code names in the docstrings of ``text`` (Python source) that name nothing."""
    found = []
    module = ".".join(source.relative_to(ROOT).with_suffix("").parts)
    for doc, scopes, bases in _docstrings(ast.parse(text)):
        for m in ROLE.finditer(doc):
            parts = m.group(1).split(".")
            if not (
                resolves(m.group(1))
                or any(_resolves_in(scope, module, parts) for scope in scopes)
                or any(_resolves_in(scopes[-1], module, [*b.split("."), *parts]) for b in bases)
            ):
                found.append(f"{m.group(0)}: names nothing where it stands: write its dotted name")
        found += [
            f"{m.group(1)}: no such module or name"
            for m in DOTTED.finditer(doc)
            if not resolves(m.group(1))
        ]
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


def test_every_code_name_in_a_docstring_names_a_module_or_attribute_the_repository_has() -> None:
    report = []
    for path in _scanned():
        if path.suffix == ".py":
            text = path.read_text(encoding="utf-8")
            report += [f"{path.relative_to(ROOT)}: {p}" for p in name_problems(path, text)]
    assert not report, "\n".join(report)


EXAMPLE = ROOT / "mirror_lib" / "replication" / "copy" / "example.py"


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (":mod:`mirror_lib.replication.copy.no_such_module`", ":mod:`mirror_lib.replication"),
        (":func:`mirror_lib.replication.copy.writer.no_such`", ":func:`mirror_lib.replication"),
        (":meth:`~mirror_lib.replication.copy.writer.TargetWriter.nope`", ":meth:`~mirror_lib"),
        (":class:`Interleaved` (not imported here)", ":class:`Interleaved`: names nothing"),
        ("see mirror_lib.spark.no_such.thing", "mirror_lib.spark.no_such.thing: no such"),
    ],
)
def test_a_code_name_that_names_nothing_is_reported(doc: str, expected: str) -> None:
    found = name_problems(EXAMPLE, f'"""{doc}"""\n')
    assert any(p.startswith(expected) for p in found), found


#: A module of this shape: the names its docstring may use without their package.
HERE = """
from mirror_lib.replication.copy.source_reader import Reader
from mirror_lib.replication.copy.writer import TargetWriter

LIMIT = 1


def helper() -> None:
    pass
"""


@pytest.mark.parametrize(
    "doc",
    [
        ":mod:`mirror_lib.replication.copy.writer`, :mod:`~mirror_lib.replication.copy`",
        ":class:`~mirror_lib.replication.copy.writer.TargetWriter`, :meth:`TargetWriter.commit`",
        ":func:`mirror_lib.replication.copy.copier.cyclic_gc_paused`",
        ":class:`Reader` (imported), :func:`helper` (defined here), :data:`LIMIT`",
        "mirror_lib.replication.copy.writer.TargetWriter.commit, in running text.",
        ":attr:`mirror_lib.replication.copy.writer.TargetWriter.producer` (set in __init__)",
    ],
)
def test_code_names_the_repository_has_pass(doc: str) -> None:
    assert name_problems(EXAMPLE, f'"""{doc}"""\n{HERE}') == []


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
