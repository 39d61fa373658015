"""The public API of ``mirror_lib`` and what importing it costs (no pyspark, no Kafka client)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mirror_lib

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mm2.properties"

# Runs the code after it with every pyspark import failing, as on a machine without pyspark.
BLOCK_PYSPARK = textwrap.dedent(
    """
    import sys

    class _NoPyspark:
        def find_spec(self, name, path=None, target=None):
            if name == "pyspark" or name.startswith("pyspark."):
                raise ImportError(f"pyspark is not installed (blocked: {name})")

    sys.meta_path.insert(0, _NoPyspark())
    """
)


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_PYSPARK + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_public_name_resolves():
    for name in mirror_lib.__all__:
        assert getattr(mirror_lib, name) is not None, name
    assert set(mirror_lib.__all__) <= set(dir(mirror_lib))


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = mirror_lib.nope


def test_import_needs_neither_pyspark_nor_kafka():
    out = run_python(
        """
        import mirror_lib
        from mirror_lib import load_config, MirrorClient
        assert "pyspark" not in sys.modules
        print("ok")
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_mirror_status_needs_no_pyspark(tmp_path):
    """`mirror status` reads delta-rs tables directly: it must answer where pyspark is missing."""
    config = tmp_path / "mm2.properties"
    config.write_text(
        "\n".join(
            line
            for line in EXAMPLE.read_text().splitlines()
            if not line.startswith("mirror.state.dir")
        )
        + f"\nmirror.state.dir = {tmp_path / 'state'}\n"
    )
    out = run_python(
        f"""
        from mirror_lib import load_config
        from mirror_lib.tables.delta_rs import ensure_tables
        from mirror_lib.tables.location import tables_root
        ensure_tables(tables_root(load_config({str(config)!r})))
        from mirror_lib.app.cli import main
        code = main(["status", {str(config)!r}])
        assert "pyspark" not in sys.modules
        sys.exit(code)
        """
    )
    assert out.returncode == 0, out.stderr
    assert "A->B" in out.stdout


def test_the_cli_starts_without_kafka_spark_or_plotting():
    """`mirror --help`, `validate` and `status` load no Kafka client, Spark, plotly or MLflow:
    those imports stay inside the commands that need them."""
    out = run_python(
        """
        import mirror_lib.app.cli
        heavy = {"pyspark", "confluent_kafka", "plotly", "mlflow", "deltalake"}
        print(sorted(heavy & {m.split(".")[0] for m in sys.modules}))
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_validate_without_confluent_kafka_says_the_clients_were_not_built(tmp_path):
    """The kafka extra is optional: `mirror validate` still checks the config, and says it could
    not build the clients instead of failing with a traceback."""
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n")
    out = run_python(
        f"""
        class _NoKafka:
            def find_spec(self, name, path=None, target=None):
                if name == "confluent_kafka" or name.startswith("confluent_kafka."):
                    raise ImportError(f"confluent_kafka is not installed (blocked: {{name}})")

        sys.meta_path.insert(0, _NoKafka())
        from mirror_lib.app.cli import main
        sys.exit(main(["validate", {str(config)!r}]))
        """
    )
    assert out.returncode == 0, out.stderr
    assert "clients: not built (confluent-kafka is not installed here)" in out.stdout
