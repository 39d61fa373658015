"""mypy over mirror_lib (``[tool.mypy]`` in pyproject.toml), held to ``mypy-baseline.txt``.

``mirror_lib/mm2``, ``config``, ``offsets``, ``replication/copy``, ``spark/plan.py`` and
``spark/runner.py`` are strict and must be clean. Elsewhere the errors mypy found when it was
added are recorded in ``mypy-baseline.txt``, one line per error without its line number (``path:
error: message  [code]``), so the file stays stable while code moves. This check fails when mypy
reports an error that is not in the file, and when a line of the file no longer occurs: the
baseline only shrinks. ``--shrink`` removes the lines that no longer occur.

    python tests/tools/mypy_baseline.py [--shrink]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "mypy-baseline.txt"
STRICT = (
    "mirror_lib/mm2/",
    "mirror_lib/config/",
    "mirror_lib/offsets/",
    "mirror_lib/spark/plan.py",
    "mirror_lib/spark/runner.py",
    "mirror_lib/replication/copy/",
)
ERROR = re.compile(r"^(?P<path>[^:\s]+):\d+: error: (?P<text>.*)$")
NOTE = re.compile(r"^[^:\s]+:\d+: note: ")


def run_mypy() -> list[tuple[str, str]]:
    """(baseline line, mypy's own line) per error of a mypy run from the repository's root."""
    cmd = [sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty", "--no-color-output"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    errors, other = [], []
    for line in done.stdout.splitlines():
        if m := ERROR.match(line):
            errors.append((stable(m["path"], m["text"]), line))
        elif not NOTE.match(line):
            other.append(line)
    if done.returncode not in (0, 1) or other or done.stderr.strip():
        sys.exit(
            f"mypy did not run as expected (exit {done.returncode}):\n" + done.stdout + done.stderr
        )
    return errors


def stable(path: str, text: str) -> str:
    """The baseline's line for an error: no line numbers, also none inside the message."""
    return f"{path}: error: " + re.sub(r"\bline \d+", "line N", text)


def read_baseline() -> Counter[str]:
    if not BASELINE.exists():
        return Counter()
    return Counter(line for line in BASELINE.read_text().splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shrink", action="store_true", help="remove the baseline's lines that no longer occur"
    )
    args = parser.parse_args(argv)
    errors = run_mypy()
    baseline = read_baseline()
    found = Counter(key for key, _line in errors)
    gone = baseline - found
    if args.shrink and gone:
        baseline -= gone
        BASELINE.write_text("".join(f"{line}\n" for line in sorted(baseline.elements())))
        print(f"mypy-baseline.txt: {sum(gone.values())} line(s) removed")
        gone = Counter()
    ok = True
    strict = sorted(line for line in baseline if line.startswith(STRICT))
    if strict:
        ok = False
        print(f"mypy-baseline.txt may not hold errors of {', '.join(STRICT)} (strict):")
        print("".join(f"  {line}\n" for line in strict), end="")
    allowed = Counter(baseline)
    new = []
    for key, line in errors:
        if allowed[key] > 0:
            allowed[key] -= 1
        else:
            new.append(line)
    if new:
        ok = False
        print(f"mypy: {len(new)} error(s) not in mypy-baseline.txt; fix them:")
        print("".join(f"  {line}\n" for line in new), end="")
    if gone:
        ok = False
        print(
            f"mypy-baseline.txt: {sum(gone.values())} line(s) no longer occur; remove them "
            "(python tests/tools/mypy_baseline.py --shrink), so the baseline only shrinks:"
        )
        print("".join(f"  {line}\n" for line in sorted(gone.elements())), end="")
    if ok:
        print(f"mypy: no new errors ({sum(baseline.values())} in mypy-baseline.txt)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
