"""``python -m tests.helpers.delta_writers IN.json OUT.json``: one flow replicated, then its
target's internal topics materialized by both writers, each twice, in a session with Delta.

A process of its own because a JVM gets Delta's jars only when it starts, and the tests'
shared session has none. IN.json: ``{"props": {...}, "root": FOLDER}``. Replication runs with
``props`` (tables off); each writer then materializes into ``FOLDER/<writer>`` with
``mirror.tables.writer`` set, once, and once more after its query checkpoint is deleted (a
replay of every record: a new query id, batch ids from 0). Then an upgrade: a third pass leaves
a checkpoint, the rollup tables are deleted (as before they existed), more records are copied,
and each writer materializes those (its rollups must roll up the history too). Last, each
appends a ``mirror verify`` row. OUT.json: per writer, the row count of every table after each
pass and each pass's seconds, and per dashboard SQL file its columns and row count.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: A row of ``mirror verify``, written as the command writes it (the columns not given are null).
VERIFIED = {
    "run_id": "r1",
    "flow": "A->B",
    "topic": "t",
    "partition": 0,
    "status": "ok",
    "records": 3,
    "verified_ts": datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc),
}


def _counts(config: Any) -> dict[str, int]:
    from deltalake import DeltaTable

    from mirror_lib.tables.location import table_folder
    from mirror_lib.tables.schemas import TABLES

    return {n: DeltaTable(table_folder(config, n)).to_pyarrow_table().num_rows for n in TABLES}


def main(args: list[str]) -> None:
    from mirror_lib.config.parse import parse_config
    from mirror_lib.spark.materialize import materialize_caught_up
    from mirror_lib.spark.runner import run_flows
    from mirror_lib.spark.session import local_spark_session
    from mirror_lib.spark.views import create_views
    from mirror_lib.tables.catch_up import spark_query_folder
    from mirror_lib.tables.location import table_folder
    from mirror_lib.tables.rollups import ROLLUPS
    from mirror_lib.tables.state_tables import append_rows
    from mirror_lib.testing.kafka_io import produce_exact

    spec = json.loads(Path(args[0]).read_text())
    root = Path(spec["root"])
    spark = local_spark_session(
        "delta-writers", cores=4, delta=True, **{"spark.sql.warehouse.dir": str(root / "wh")}
    )
    out: dict[str, Any] = {}
    writers = ("delta-rs", "spark")
    configs = {
        writer: parse_config({
            **spec["props"],
            "mirror.tables.enabled": "true",
            "mirror.tables.writer": writer,
            "mirror.state.dir": str(root / writer),
        })
        for writer in writers
    }  # fmt: skip
    try:
        run_flows(spark, parse_config(spec["props"]), once=True, timeout_s=180, report=print)
        for writer, config in configs.items():
            passes, seconds = [], []
            for _ in range(2):
                started = time.monotonic()
                materialize_caught_up(spark, config, "B", timeout_s=300, writer=writer)
                seconds.append(round(time.monotonic() - started, 1))
                passes.append(_counts(config))
                shutil.rmtree(spark_query_folder(config, "B"))
            materialize_caught_up(spark, config, "B", timeout_s=300, writer=writer)
            for rollup in ROLLUPS:  # tables written before the rollups existed
                shutil.rmtree(table_folder(config, rollup))
            out[writer] = {"passes": passes, "seconds": seconds}
        spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # as a new session would
        more = [{"value": f"u{i}".encode(), "partition": i % 2} for i in range(50)]
        produce_exact(spec["props"]["A.bootstrap.servers"], spec["props"]["topics"], more)
        run_flows(spark, parse_config(spec["props"]), once=True, timeout_s=180, report=print)
        for writer, config in configs.items():
            materialize_caught_up(spark, config, "B", timeout_s=300, writer=writer)
            out[writer]["upgraded"] = _counts(config)
            append_rows(config, "verifications", [VERIFIED], spark=spark)  # a command's row
            create_views(spark, config)
            queries = {}
            for sql in sorted((REPO / "dashboards" / "sql").glob("*.sql")):
                df = spark.sql(sql.read_text())
                queries[sql.stem] = {"columns": df.columns, "rows": df.count()}
            out[writer]["queries"] = queries
    finally:
        spark.stop()
    Path(args[1]).write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
