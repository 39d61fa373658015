"""The `mirror` command line: exit codes and messages (runs the installed console script)."""

from __future__ import annotations

import importlib.metadata
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mm2.properties"


def mirror(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_validate_prints_flows_naming_and_internal_topics():
    out = mirror("validate", str(EXAMPLE))
    assert out.returncode == 0, out.stderr
    assert "flow A->B:" in out.stdout
    assert "would replicate orders -> A.orders" in out.stdout
    assert "checkpoints: A.checkpoints.internal on B" in out.stdout
    assert "heartbeats only: B->A" in out.stdout


def test_validate_json_is_machine_readable():
    out = mirror("validate", str(EXAMPLE), "--json")
    data = json.loads(out.stdout)
    assert data["flows"][0]["flow"] == "A->B"
    assert data["flows"][0]["examples"] == {"orders": "A.orders", "payments": "A.payments"}


def test_bad_config_exits_2_naming_key_and_value(tmp_path):
    bad = tmp_path / "bad.properties"
    bad.write_text(EXAMPLE.read_text() + "\nA->B.tasks.max = 0\n")
    out = mirror("validate", str(bad))
    assert out.returncode == 2
    assert "A->B.tasks.max = '0'" in out.stderr
    assert ">= 1" in out.stderr
    assert "Traceback" not in out.stderr


def test_secrets_never_printed(tmp_path):
    cfg = tmp_path / "s.properties"
    cfg.write_text(EXAMPLE.read_text() + "\nA.sasl.password = hunter2\n")
    out = mirror("validate", str(cfg))
    assert out.returncode == 0
    assert "hunter2" not in out.stdout
    assert "<redacted>" in out.stdout


def test_unknown_key_warns_with_suggestion(tmp_path):
    cfg = tmp_path / "t.properties"
    cfg.write_text(EXAMPLE.read_text() + "\nemit.checkpoint.interval.seconds = 3\n")
    out = mirror("validate", str(cfg))
    assert out.returncode == 0
    assert "did you mean 'emit.checkpoints.interval.seconds'" in out.stdout


def test_missing_file_and_bad_arguments_exit_2(tmp_path):
    assert mirror("validate", str(tmp_path / "nope")).returncode == 2
    out = mirror("frobnicate")
    assert out.returncode == 2
    assert "invalid input" in out.stderr


def test_version_prints_the_installed_package_version():
    out = mirror("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"mirror {importlib.metadata.version('mirror_lib')}\n"


def test_the_package_version_is_one_number_in_setup_py_and_the_source():
    import mirror_lib

    setup = (EXAMPLE.parents[1] / "setup.py").read_text()
    assert re.search(r'version="([^"]+)"', setup).group(1) == mirror_lib.__version__


TWO = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    from mirror_lib.app.cli import main

    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_typo_in_topics_is_the_first_line_and_strict_exits_2(tmp_path, capsys):
    cfg = tmp_path / "typo.properties"
    cfg.write_text(TWO + "A->B.enabled = true\nA->B.topic = orders\nemit.checkpoint.x = 1\n")
    code, out, _ = run_main(capsys, "validate", str(cfg))
    assert code == 0  # MM2 runs this file too: accepted, and said first
    lines = out.splitlines()
    assert lines[0] == (
        "warning, changes what is copied: unknown key 'A->B.topic' is ignored (did you mean "
        "'topics'?), so flow A->B keeps topics = .* (every topic)"
    )
    assert lines[-1].startswith("1 warning(s) at the top change what is copied")
    assert any(x.startswith("warning: unknown key 'emit.checkpoint.x'") for x in lines[1:])
    code, _, err = run_main(capsys, "validate", str(cfg), "--strict")
    assert code == 2
    assert err == "mirror: --strict: 2 warning(s), 1 of them change what is copied\n"
    code, out, _ = run_main(capsys, "validate", str(cfg), "--json")
    data = json.loads(out)
    assert data["copy_warnings"] == [lines[0].split(": ", 1)[1]]
    assert data["warnings"][0] == data["copy_warnings"][0]


def test_strict_passes_a_file_without_warnings(capsys):
    assert run_main(capsys, "validate", str(EXAMPLE), "--strict")[0] == 0


@pytest.mark.parametrize(
    ("line", "first"),
    [
        ("A.topics = orders", "A.topics is ignored: topics is a flow setting"),
        ("A->B.topics = orders # the main one", "A->B.topics: the value contains ' #'"),
        ("A->B.enable = false", "unknown key 'A->B.enable' is ignored (did you mean 'enabled'?)"),
        ("topic = orders", "unknown key 'topic' is ignored (did you mean 'topics'?), so flow A->B"),
    ],
)
def test_each_line_that_changes_what_is_copied_is_said_first(tmp_path, capsys, line, first):
    cfg = tmp_path / "t.properties"
    cfg.write_text(TWO + "A->B.enabled = true\n" + line + "\n")
    code, out, _ = run_main(capsys, "validate", str(cfg))
    assert code == 0
    assert out.splitlines()[0].startswith(f"warning, changes what is copied: {first}")
    assert sum(line.startswith("warning, changes") for line in out.splitlines()) == 1


def test_a_flow_to_an_unlisted_cluster_is_named_by_validate_and_by_run(tmp_path, capsys):
    cfg = tmp_path / "stray.properties"
    cfg.write_text(TWO + "A->C.enabled = true\nA->B.topic = orders\nA.consumer.group.id = x\n")
    code, out, _ = run_main(capsys, "validate", str(cfg))
    assert code == 0
    said = [line for line in out.splitlines() if line.startswith("warning")]
    assert said[0] == (
        "warning, changes what is copied: A->C.enabled is ignored: C is not in clusters (A, B), "
        "so flow A->C does not exist"
    )
    code, _, err = run_main(capsys, "run", str(cfg), "--once")
    assert code == 2
    lines = err.splitlines()
    assert lines[-1] == (
        "mirror: invalid input: A->C.enabled = 'true': expected a flow between clusters that "
        "clusters lists (A, B): C is not listed there, so this line is ignored and no flow is "
        f"enabled; add C to clusters (with its bootstrap.servers) or use a listed alias (looked "
        f"in {cfg})"
    )
    # run says what validate says about the same file, in the same order, before it stops
    assert [line.removeprefix("mirror: ") for line in lines[:-1]] == said


def test_a_native_crash_of_the_cli_prints_the_python_stack_that_caused_it():
    """A segmentation fault in a native library (librdkafka, delta-rs, pyarrow) kills the run
    without a Python traceback; the console script prints every thread's stack first."""
    crash = (
        "import ctypes\n"
        "from mirror_lib.app import cli\n"
        "def materialize_tables():\n"
        "    ctypes.string_at(0)\n"
        "cli.main = materialize_tables\n"
        "cli.entry_point()\n"
    )
    done = subprocess.run([sys.executable, "-c", crash], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGSEGV
    assert "Segmentation fault" in done.stderr
    assert "in materialize_tables" in done.stderr
