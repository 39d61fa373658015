"""Which ``mirror_lib`` is benchmarked: the working tree, or a ``--engine-ref`` git export.

The benchmark code itself always comes from the working tree; only ``mirror_lib`` is exported.
It imports the post-restructure paths (``mirror_lib.testing``, ``mirror_lib.replication``, ...),
so ``--engine-ref`` works for refs at or after the package restructure (issue 15, merge 47dbe5a)
only; an older ref is refused before anything starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE_ENV = "MIRROR_BENCH_ENGINE"  # folder holding the mirror_lib package to benchmark
SCRIPT = ROOT / "bench" / "replication.py"  # the CLI entry, also run for the internal loops


def engine() -> Path:
    """The folder whose ``mirror_lib`` is benchmarked (the repository unless exported)."""
    return Path(os.environ.get(ENGINE_ENV) or ROOT)


def use_engine() -> None:
    """Put the engine's folder first on ``sys.path``."""
    folder = str(engine())
    if not sys.path or sys.path[0] != folder:
        sys.path.insert(0, folder)


def export_engine(ref: str, folder: Path) -> str:
    """``git archive REF mirror_lib`` into ``folder`` (read-only for the repository), compiled to
    bytecode as ``pip install`` does (else, with ``PYTHONDONTWRITEBYTECODE`` set, every Spark
    worker would compile it again), and use it here and in every subprocess started afterwards.
    Returns the short sha."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", sha, "mirror_lib"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    if not (folder / "mirror_lib" / "testing" / "embedded.py").exists():
        raise SystemExit(
            f"--engine-ref {ref} (git {sha}): its mirror_lib has no testing/embedded.py; the "
            "benchmark imports the layered package, so use a ref at or after the package "
            "restructure (merge 47dbe5a)"
        )
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder)], check=True)
    (folder / "ENGINE_REF").write_text(f"git {sha} ({ref}, exported with git archive)\n")
    os.environ[ENGINE_ENV] = str(folder)
    use_engine()
    return sha


def subprocess_env() -> dict[str, str]:
    """The environment of every subprocess: the engine first on PYTHONPATH, unbuffered output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(engine()) + os.pathsep + env.get("PYTHONPATH", "")
    env[ENGINE_ENV] = str(engine())
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYTHONUNBUFFERED"] = "1"  # progress lines arrive when printed, not at exit
    return env


def git_state() -> str:
    """Which mirror_lib was measured: a ``--engine-ref`` export, or HEAD + modified files."""
    if engine() != ROOT:
        return (engine() / "ENGINE_REF").read_text().strip()

    def git(*a: str) -> str:
        try:
            out = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return out.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "?"
    status = git("status", "--porcelain", "--", "mirror_lib")
    dirty = [line.strip().split(maxsplit=1)[-1] for line in status.splitlines() if line.strip()]
    return f"git {head}" + (f" + uncommitted changes in {', '.join(dirty)}" if dirty else "")
