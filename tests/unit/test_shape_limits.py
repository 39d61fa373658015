"""tests/tools/shape_limits.py: what fails `make lint` and what only asks for --shrink."""

from __future__ import annotations

from tests.tools.shape_limits import MAX_LINES, compare, parse_symilar, without_imports

REPORT = """
7 similar lines in 2 files
==mirror_lib/b.py:[10:17]
==mirror_lib/a.py:[3:10]
       started, errors = [], []
       for f in futures:
           try:
               started.append(f.result())
           except BaseException as e:
               errors.append(e)
   if errors:
TOTAL lines=100 duplicates=7 percent=7.00
"""
LISTED = {"length mirror_lib/long.py 600", *parse_symilar(REPORT)}


def test_a_block_is_named_by_its_files_length_and_text_not_where_it_stands() -> None:
    (line,) = parse_symilar(REPORT)
    assert line.startswith("duplicate mirror_lib/a.py mirror_lib/b.py 7 ")
    moved = REPORT.replace("[10:17]", "[40:47]").replace("[3:10]", "[5:12]")
    assert parse_symilar(moved) == [line]
    assert parse_symilar(REPORT.replace("if errors:", "if not errors:")) != [line]


def test_what_holds_today_passes() -> None:
    assert compare(LISTED, sorted(LISTED)) == []


def test_a_listed_module_that_grows_or_a_new_long_one_fails() -> None:
    now = [*parse_symilar(REPORT), "length mirror_lib/long.py 601", "length mirror_lib/new.py 501"]
    problems = compare(LISTED, now)
    assert "mirror_lib/long.py: 601 lines, more than the 600 listed: shorten it" in problems
    assert f"mirror_lib/new.py: 501 lines, over {MAX_LINES}: split it" in problems


def test_a_new_duplicate_fails() -> None:
    other = parse_symilar(REPORT.replace("mirror_lib/b.py", "mirror_lib/c.py"))
    (problem,) = compare(LISTED, [*LISTED, *other])
    assert problem.startswith("new duplicate code (more than 5 lines): duplicate mirror_lib/a.py")


def test_what_shrank_or_went_asks_for_shrink_so_the_baseline_only_shrinks() -> None:
    problems = compare(LISTED, ["length mirror_lib/long.py 550"])
    assert len(problems) == 2 and all(p.endswith("run --shrink") for p in problems)


def test_imports_are_left_out_of_the_comparison_and_the_rest_stays_in_place() -> None:
    text = "import os\nfrom a import (\n    b,\n    c,\n)\n\n\ndef f():\n    import sys\n"
    text += "    return 1\n"
    out = without_imports(text).splitlines()
    assert out == ["", "", "", "", "", "", "", "def f():", "", "    return 1"]
