"""Delta's Spark writer and delta-rs write the same tables (docs/tables.md#two-writers).

One flow is replicated with checkpoints and heartbeats; its target's internal topics are then
materialized once through delta-rs and once through Delta's Spark writer (a local session with
delta-spark), into two folders, each twice (tests/helpers/delta_writers.py). The Spark session
runs in a process of its own: the shared test session has no Delta jars.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirror_lib.tables.rollups import ROLLUPS
from mirror_lib.testing.kafka_io import create_topic, produce_exact
from tests.integration.conftest import flow_properties

# the module fixture replicates and materializes four times in a JVM of its own (7 min on a
# busy 2-core machine); a first run also fetches Delta's jars
pytestmark = pytest.mark.timeout(1500)
REPO = Path(__file__).resolve().parents[2]
TABLES_WITH_ROWS = ("offset_syncs", "checkpoints", "heartbeats", "replication_metrics")


@pytest.fixture(scope="module")
def written(brokers, tmp_path_factory):
    """Both writers' folders and what the helper measured."""
    name = f"writers-{int(time.time() * 1000) % 10**8}"
    group = f"{name}-g"
    root = tmp_path_factory.mktemp("writers")
    create_topic(brokers.source, name, 2)
    produce_exact(
        brokers.source,
        name,
        [{"value": f"v{i}".encode(), "partition": i % 2} for i in range(200)],
    )
    consumer = Consumer({"bootstrap.servers": brokers.source, "group.id": group})
    consumer.commit(
        offsets=[TopicPartition(name, 0, 40), TopicPartition(name, 1, 60)], asynchronous=False
    )
    consumer.close()
    props = flow_properties(
        brokers.source, brokers.target, root / "replication", topics=name, groups=group
    )
    spec = root / "in.json"
    spec.write_text(json.dumps({"props": props, "root": str(root)}))
    out = root / "out.json"
    # bounded: the first run on a machine fetches Delta's jars (docs/testing.md)
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.delta_writers", str(spec), str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return {"root": root, "name": name, "group": group, **json.loads(out.read_text())}


def _table(root: Path, writer: str, name: str):
    from deltalake import DeltaTable

    return DeltaTable(str(root / writer / "tables" / name))


def _sorted_rows(table) -> list[str]:
    """Every row, in an order that neither writer decides (nulls sort too)."""
    return sorted(repr(row) for row in table.to_pyarrow_table().to_pylist())


def _per_origin(table, column: str) -> dict[tuple, int]:
    """``column`` summed per origin (cluster, topic, partition of the record it came from)."""
    keys = ["cluster", "kafka_topic", "kafka_partition"]
    sums = table.group_by(keys).aggregate([(column, "sum")]).to_pylist()
    return {tuple(r[k] for k in keys): r[f"{column}_sum"] for r in sums}


#: Rollup -> its count column. A rollup's rows are partial aggregates, one per batch the writer
#: rolled up: the writers may cut the history of an upgrade into different batches.
COUNTED = {"metrics_per_minute": "records", "heartbeats_per_minute": "heartbeats"}


@pytest.mark.spark40
def test_both_writers_hold_the_same_rows_and_schemas(written):
    from mirror_lib.tables.schemas import TABLES

    root = written["root"]
    for name in TABLES:
        rs, spark = _table(root, "delta-rs", name), _table(root, "spark", name)
        assert spark.schema().to_json() == rs.schema().to_json(), name
        if name in COUNTED:
            rows = (rs.to_pyarrow_table(), spark.to_pyarrow_table())
            assert _per_origin(rows[1], COUNTED[name]) == _per_origin(rows[0], COUNTED[name])
        else:
            assert _sorted_rows(spark) == _sorted_rows(rs), name
    checkpoints = _table(root, "spark", "checkpoints").to_pyarrow_table().to_pylist()
    assert {(r["group_id"], r["topic"]) for r in checkpoints} >= {
        (written["group"], f"A.{written['name']}")
    }
    for name in TABLES_WITH_ROWS:
        assert written["spark"]["passes"][0][name] > 0, name
    assert _table(root, "spark", "verifications").to_pyarrow_table().num_rows == 1


@pytest.mark.spark40
def test_rollups_added_to_written_tables_roll_up_their_history(written):
    """An upgrade: the rollups were deleted after three passes, then later records came; each
    writer's first rollup write for an origin also rolled up what the tables held of it
    (docs/tables.md). Origins with no later record (other tests' partitions on the shared
    brokers) are not rolled up until they get one."""
    import pyarrow as pa

    root = written["root"]
    for writer in ("delta-rs", "spark"):
        assert (
            written[writer]["upgraded"]["replication_metrics"]
            > written[writer]["passes"][0]["replication_metrics"]
        ), writer
        for rollup, column in COUNTED.items():
            source = _table(root, writer, ROLLUPS[rollup]).to_pyarrow_table()
            if column == "heartbeats":
                source = source.append_column(column, pa.array([1] * source.num_rows))
            rolled = _per_origin(_table(root, writer, rollup).to_pyarrow_table(), column)
            held = _per_origin(source, column)
            assert rolled, (writer, rollup)
            assert rolled == {origin: held[origin] for origin in rolled}, (writer, rollup)


@pytest.mark.spark40
def test_the_spark_folder_is_written_by_delta_spark_with_transactions(written):
    """Delta's own writer (its engine in each commit), tagged with txnAppId/txnVersion."""
    delta_version = importlib.metadata.version("delta_spark")
    log = _table(written["root"], "spark", "heartbeats").history()
    engines = {c.get("engineInfo", "") for c in log}
    assert engines and all(f"Delta-Lake/{delta_version}" in e for e in engines), engines
    log_folder = written["root"] / "spark" / "tables" / "heartbeats" / "_delta_log"
    txns = [
        json.loads(line)["txn"]
        for f in sorted(log_folder.glob("*.json"))
        for line in f.read_text().splitlines()
        if '"txn"' in line
    ]
    assert txns and all(t["appId"].startswith("mirror:") for t in txns), txns


@pytest.mark.spark40
def test_materializing_the_same_records_again_adds_nothing(written):
    for writer in ("delta-rs", "spark"):
        first, again = written[writer]["passes"]
        assert again == first, writer


@pytest.mark.spark40
def test_the_dashboards_sql_runs_on_either_writers_tables(written):
    rs, spark = written["delta-rs"]["queries"], written["spark"]["queries"]
    assert spark and spark == rs
    assert spark["heartbeats"]["rows"] > 0
