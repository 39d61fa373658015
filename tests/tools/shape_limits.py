"""Size and shape of the code, held to ``shape-baseline.txt`` (docs/testing.md#size-and-shape).

Three checks, each with today's exceptions listed so that the lists only shrink:

- **module length**: a module of ``mirror_lib/`` has at most 500 lines; the longer ones are
  listed in ``shape-baseline.txt`` with their length, which they may not exceed;
- **duplicate code**: pylint's ``symilar`` over ``mirror_lib/``, ``jobs/`` and ``bench/`` (blocks
  of more than 5 lines alike, comments, docstrings and imports left out); today's blocks are
  listed by their files and a hash of their text;
- **complexity and arguments**: ruff's C901 and PLR0912/PLR0913/PLR0915 run in ``ruff check``
  with today's offending files in ``[tool.ruff.lint.per-file-ignores]``; here an entry whose
  rule no longer fires in its file fails, so that list only shrinks too.

A line of the baseline that no longer holds (a module shorter than listed, a block gone) fails
as well: ``--shrink`` rewrites the file to what holds now, never allowing more (without a file,
it records today's figures).

    python tests/tools/shape_limits.py [--shrink]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

from pylint.checkers.symilar import Symilar

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "shape-baseline.txt"
MAX_LINES = 500
LENGTH_SCOPE = "mirror_lib"
DUPLICATE_SCOPE = ("mirror_lib", "jobs", "bench")
MIN_SIMILAR = 5  # symilar reports blocks of more lines than this
SHAPE_RULES = ("C901", "PLR0912", "PLR0913", "PLR0915")
HEADER = f"""\
# Size and shape held by tests/tools/shape_limits.py (docs/testing.md#size-and-shape); it may
# only shrink: after making code shorter or removing a duplicate, run
# `python tests/tools/shape_limits.py --shrink` and commit this file with the change.
# length <module> <lines>: a module of {LENGTH_SCOPE}/ over {MAX_LINES} lines, at most that long.
# duplicate <file> <file>... <lines> <hash>: a block symilar finds in those files.
"""
BLOCK = re.compile(r"^(\d+) similar lines in \d+ files$")
PLACE = re.compile(r"^==(?P<path>.+):\[\d+:\d+\]$")


def python_files(*folders: str) -> list[str]:
    """The Python files under ``folders``, relative to the repository's root."""
    return sorted(
        path.relative_to(ROOT).as_posix()
        for folder in folders
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    )


def lengths() -> list[str]:
    """A ``length`` line per module over the limit."""
    out = []
    for path in python_files(LENGTH_SCOPE):
        n = len((ROOT / path).read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            out.append(f"length {path} {n}")
    return out


def duplicates() -> list[str]:
    """A ``duplicate`` line per block of code that symilar finds in more than one place."""
    similar = Symilar(min_lines=MIN_SIMILAR, ignore_comments=True, ignore_docstrings=True)
    for path in python_files(*DUPLICATE_SCOPE):
        text = (ROOT / path).read_text(encoding="utf-8")
        similar.append_stream(path, io.StringIO(without_imports(text)))
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        similar.run()
    return parse_symilar(report.getvalue())


def without_imports(text: str) -> str:
    """``text`` with its import statements as blank lines, which symilar skips. Its own
    ``--ignore-imports`` parses every file with astroid: 10 s of CPU here instead of 0.5 s."""
    lines = text.splitlines(keepends=True)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            lines[node.lineno - 1 : node.end_lineno] = ["\n"] * (node.end_lineno - node.lineno + 1)
    return "".join(lines)


def parse_symilar(report: str) -> list[str]:
    """symilar's report as ``duplicate`` lines: the files, the block's length and its hash."""
    out: list[str] = []
    size, places, text = 0, [], []

    def close() -> None:
        if places:
            digest = hashlib.sha1("\n".join(t.strip() for t in text).encode()).hexdigest()[:12]
            out.append(f"duplicate {' '.join(sorted(set(places)))} {size} {digest}")

    for line in report.splitlines():
        if m := BLOCK.match(line):
            close()
            size, places, text = int(m[1]), [], []
        elif m := PLACE.match(line):
            places.append(m["path"])
        elif places and line.strip() and not line.startswith("TOTAL "):
            text.append(line)
    close()
    return out


def shape_ignores() -> dict[str, set[str]]:
    """``[tool.ruff.lint.per-file-ignores]``'s entries of the size and shape rules."""
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    ignores = lint.get("per-file-ignores", {})
    return {path: set(rules) & set(SHAPE_RULES) for path, rules in ignores.items()}


def stale_ignores() -> list[str]:
    """Per-file ignores of a shape rule that no longer fires in its file."""
    listed = {path: rules for path, rules in shape_ignores().items() if rules}
    if not listed:
        return []
    cmd = [str(Path(sys.executable).parent / "ruff"), "check", "--output-format", "json",
           "--select", ",".join(SHAPE_RULES), "--config", "lint.per-file-ignores = {}",
           "--exit-zero", *sorted(listed)]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    firing: dict[str, set[str]] = {}
    for found in json.loads(done.stdout):
        path = Path(found["filename"]).resolve().relative_to(ROOT).as_posix()
        firing.setdefault(path, set()).add(found["code"])
    return [
        f'pyproject.toml: "{path}" ignores {rule}, which no longer fires there: remove it'
        for path, rules in sorted(listed.items())
        for rule in sorted(rules - firing.get(path, set()))
    ]


def read_baseline() -> set[str]:
    if not BASELINE.exists():
        return set()
    lines = BASELINE.read_text().splitlines()
    return {line for line in lines if line.strip() and not line.startswith("#")}


def _lengths(lines: set[str] | list[str]) -> dict[str, int]:
    """Module -> lines of the ``length`` lines among ``lines``."""
    return {line.split()[1]: int(line.split()[2]) for line in lines if line.startswith("length ")}


def compare(baseline: set[str], now: list[str]) -> list[str]:
    """What fails: a module longer than listed or newly long, a new duplicate, a stale line."""
    listed = _lengths(baseline)
    problems = []
    for line in now:
        kind, first = line.split()[:2]
        if kind == "length" and first in listed:
            n, limit = int(line.split()[2]), listed[first]
            if n > limit:
                problems.append(f"{first}: {n} lines, more than the {limit} listed: shorten it")
        elif kind == "length":
            problems.append(f"{first}: {line.split()[2]} lines, over {MAX_LINES}: split it")
        elif line not in baseline:
            problems.append(f"new duplicate code (more than {MIN_SIMILAR} lines): {line}")
    now_lengths = _lengths(now)
    for line in sorted(baseline):
        kind, first = line.split()[:2]
        if kind == "length" and now_lengths.get(first, 0) < listed[first]:
            problems.append(f"shape-baseline.txt: {line} no longer holds: run --shrink")
        elif kind == "duplicate" and line not in now:
            problems.append(f"shape-baseline.txt: {line} no longer occurs: run --shrink")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shrink", action="store_true", help="rewrite the baseline to what holds now, if less"
    )
    args = parser.parse_args(argv)
    now = lengths() + duplicates()
    baseline = read_baseline()
    problems = compare(baseline, now)
    if args.shrink:
        grown = [p for p in problems if "run --shrink" not in p] if BASELINE.exists() else []
        if grown:
            print("\n".join(grown), file=sys.stderr)
            return 1
        BASELINE.write_text(HEADER + "".join(f"{line}\n" for line in now))
        print(f"shape-baseline.txt: {len(now)} lines")
        return 0
    problems += stale_ignores()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    longest = len([line for line in now if line.startswith("length ")])
    print(
        f"shape: no new long module ({longest} listed), duplicate or complex function "
        f"({len(now) - longest} duplicates listed; ruff's per-file ignores all still needed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
