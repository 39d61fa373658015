"""A pytest mark sits on a test: on any other function it marks nothing, without a word.

The spark40 mark of ``test_both_writers_hold_the_same_rows_and_schemas`` once slid onto a helper
inserted above it, and the pyspark 4.0 tier (``make test-spark40``) stopped running that test.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_mark(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    text = ast.unparse(target)
    return text.startswith("pytest.mark.")


def marks_off_tests(source: str) -> list[str]:
    """``name (line)`` of each function or class that a pytest mark decorates but that pytest
    does not collect as a test (a name not starting with ``test`` / ``Test``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            prefix = "Test" if isinstance(node, ast.ClassDef) else "test"
            if not node.name.startswith(prefix) and any(map(_is_mark, node.decorator_list)):
                found.append(f"{node.name} (line {node.lineno})")
    return found


def test_a_mark_on_a_helper_is_found():
    source = "import pytest\n@pytest.mark.spark40\ndef helper():\n    pass\n"
    assert marks_off_tests(source) == ["helper (line 3)"]
    marked = "@pytest.mark.parametrize('x', [1])\ndef test_x(x):\n    pass\n"
    assert marks_off_tests(marked) == []


def test_every_pytest_mark_in_the_tests_sits_on_a_test():
    off = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if (found := marks_off_tests(path.read_text()))
    }
    assert not off, f"pytest marks on functions that are no tests, so they mark nothing: {off}"
