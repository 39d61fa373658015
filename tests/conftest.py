"""Shared fixtures: two test clusters, unique names, markers.

The clusters are Apache Kafka by default: single-node KRaft clusters that this run starts
(:mod:`mirror_lib.testing.kafka_broker`). ``MIRROR_TEST_BROKER=tansu`` runs the integration tier
on the embedded tansu broker instead (fast, but docs/testing.md#test-broker-limits says what it
hides). Clusters of your own: set ``MIRROR_TEST_SOURCE_BOOTSTRAP`` and
``MIRROR_TEST_TARGET_BOOTSTRAP`` (optionally ``MIRROR_TEST_THIRD_BOOTSTRAP``); the run then sets
``MIRROR_TEST_EXTERNAL_CLUSTERS=1``, and the tests that need brokers of their own in front of a
proxy skip. Tests marked ``real_kafka`` are skipped on tansu.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from mirror_lib.testing import embedded, kafka_jvm
from mirror_lib.testing.clusters import BROKER_ENV, broker_kind, kafka_version, start_clusters
from tests.helpers.clean_tree import left_behind, tree_entries

# Property tests assert what they compute, never how fast: a per-example deadline fails them on
# a busy machine (test_mm2_compatible_points_match_mm2_writer did at load average 30).
settings.register_profile("mirror", deadline=None)
settings.load_profile("mirror")

REPO = Path(__file__).resolve().parent.parent
MATRIX_ENV = "MIRROR_FAULT_MATRIX"
# Set by this run when the test clusters are your own (MIRROR_TEST_*_BOOTSTRAP), not started here.
EXTERNAL_ENV = "MIRROR_TEST_EXTERNAL_CLUSTERS"
# Names the tests read once: one still set in a shell would otherwise be ignored without a word.
RENAMED_ENV = {"MIRROR_TEST_REAL_KAFKA": EXTERNAL_ENV}


@dataclass(frozen=True)
class Clusters:
    """Bootstrap servers of the two test clusters."""

    source: str
    target: str
    real_kafka: bool


def _real_kafka() -> bool:
    return embedded.external_clusters_from_env() is not None or broker_kind() == "kafka"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs brokers (embedded tansu or real Kafka)")
    config.addinivalue_line(
        "markers", "real_kafka: needs Apache Kafka (the default brokers); skipped on tansu"
    )
    for old, new in RENAMED_ENV.items():
        if old in os.environ:
            raise pytest.UsageError(
                f"{old} = {os.environ[old]!r} is no longer read: it is {new} now (set by the run "
                "when MIRROR_TEST_SOURCE_BOOTSTRAP and MIRROR_TEST_TARGET_BOOTSTRAP name your own "
                f"clusters; {BROKER_ENV}=tansu picks the broker). Unset {old}."
            )
    if embedded.external_clusters_from_env() is not None:  # clusters this run does not own
        os.environ.setdefault(EXTERNAL_ENV, "1")
    # Kafka JVMs that start on a third of the CPU (docs/testing.md#brokers)
    os.environ.setdefault(kafka_jvm.JVM_ENV, "lean")


def pytest_report_header(config: pytest.Config) -> str:
    """Which brokers this run starts: a tier of another Kafka release says so at the top."""
    from mirror_lib.testing.clusters import VERSION_ENV, kafka_version

    if embedded.external_clusters_from_env() is not None:
        return "test clusters: your own (MIRROR_TEST_*_BOOTSTRAP)"
    if broker_kind() != "kafka":
        return "test clusters: embedded tansu"
    return f"test clusters: Apache Kafka {kafka_version()} ({VERSION_ENV} picks another)"


# The order in which `make test` hands whole files to its two workers (`--dist loadfile
# --no-loadscope-reorder`), each entry a file or a folder: the three-broker fault run first, with
# the unit tests beside it rather than another file with brokers of its own, then the files that
# take minutes, longest first (`pytest --durations`, 2026-12-03), then the rest in collection
# order. Started last, the three-broker run kept a worker busy for 9 minutes after the other had
# finished.
START_ORDER = (
    "integration/test_three_brokers.py",
    "unit/",
    "docs/",
    "integration/test_demo.py",
    "notebooks/test_notebooks.py",
    "integration/test_mm2_interop.py",
    "integration/test_tables.py",
    "integration/test_outages.py",
    "integration/test_dashboard.py",
    "integration/test_kafka_faults.py",
    "integration/test_broker_crash.py",
    "integration/test_delta_writers.py",
    "integration/test_fanout.py",
    "integration/test_tracking.py",
    "integration/test_slices.py",
    "integration/test_crash_restart.py",
)


def _start_rank(item: pytest.Item) -> int:
    path, here = Path(str(item.path)), Path(__file__).parent
    name = path.relative_to(here).as_posix() if here in path.parents else ""
    for rank, entry in enumerate(START_ORDER):
        if name.startswith(entry) if entry.endswith("/") else name == entry:
            return rank
    return len(START_ORDER)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_start_rank)  # stable: every other file keeps its place and order
    integration_dir = Path(__file__).parent / "integration"
    skip_real = pytest.mark.skip(reason=f"needs Apache Kafka: unset {BROKER_ENV}=tansu")
    skip_matrix = pytest.mark.skip(reason=f"the fault matrix: `make fault-matrix` ({MATRIX_ENV}=1)")
    real = _real_kafka()
    matrix = os.environ.get(MATRIX_ENV) == "1"
    for item in items:
        if not matrix and item.get_closest_marker("fault_matrix") is not None:
            item.add_marker(skip_matrix)
        if integration_dir in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)
        if not real and item.get_closest_marker("real_kafka") is not None:
            item.add_marker(skip_real)


@pytest.fixture(scope="session", autouse=True)
def tree_stays_clean() -> Iterator[None]:
    """Tests write under their temporary folders only: a file left in the clone (a state dir
    taken relative to the working directory, ./spark-warehouse) fails the run."""
    before = tree_entries(REPO)
    yield
    after = tree_entries(REPO)
    if before is not None and after is not None:
        new = left_behind(before, after)
        assert not new, f"the tests left files in the working tree: {new}"


#: Test files that start no broker: a session of these only writes no class archive.
NO_BROKERS = ("unit", "tools", "docs")


@pytest.fixture(scope="session", autouse=True)
def kafka_class_archive(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The first session on a machine that starts Apache Kafka writes the class archive its lean
    JVMs map (about 10 s); while another worker writes it, this one goes on without."""
    here = Path(__file__).parent
    starts = any(
        Path(str(item.path)).relative_to(here).parts[0] not in NO_BROKERS
        for item in request.session.items
        if here in Path(str(item.path)).parents
    )
    if starts and broker_kind() == "kafka" and kafka_jvm.lean_jvms():
        kafka_jvm.write_class_archive(tmp_path_factory.mktemp("class-archive"), kafka_version())


@pytest.fixture(scope="session")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    """Source and target clusters for the whole session; those started here stop at the end."""
    external = embedded.external_clusters_from_env()
    if external is not None:
        yield Clusters(external["source"], external["target"], real_kafka=True)
        return
    started = start_clusters(["source", "target"], tmp_path_factory.mktemp("brokers"))
    try:
        boots = started.bootstraps
        yield Clusters(boots["source"], boots["target"], real_kafka=started.kind == "kafka")
    finally:
        started.stop()


@pytest.fixture(scope="session")
def third_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap of a third cluster (chain tests), started on first use."""
    external = embedded.external_clusters_from_env()
    if external is not None:
        if "third" not in external:
            pytest.skip("set MIRROR_TEST_THIRD_BOOTSTRAP for tests that need a third cluster")
        yield external["third"]
        return
    started = start_clusters(["third"], tmp_path_factory.mktemp("third"))
    try:
        yield started.bootstraps["third"]
    finally:
        started.stop()


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One embedded tansu broker (whatever ``MIRROR_TEST_BROKER`` says), for the tests that pin
    its limits beside Apache Kafka's behaviour; started on first use."""
    (broker,) = embedded.start_brokers(1, ["tansu"], tmp_path_factory.mktemp("tansu"))
    try:
        yield broker.bootstrap_servers
    finally:
        embedded.stop_brokers([broker])


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A per-test name prefix, e.g. ``test-foo-3f9a1c2b``; append suffixes for topics and groups."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"
