"""The `mirror` command line: exit codes and messages (runs the installed console script)."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

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
