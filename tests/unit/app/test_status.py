"""`mirror status`: figures over a window it names, columns that stay aligned, a sentence for a
config that never ran, and exit code 3 when a --max-* threshold is crossed (for alerting).

The CLI tests read real Delta tables, written with delta-rs into a temporary state folder."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from mirror_lib.app.cli import main
from mirror_lib.app.status import Thresholds, alerts, format_status, format_window
from mirror_lib.tables.health import health

deltalake = pytest.importorskip("deltalake")

NOW = 1_790_000_000_000.0  # ms
FLOWS = [("A->B", "A", "B")]


def metric(age_s: float, records: int, p50: float, p99: float, lag: int = 0, part: int = 0):
    return {
        "flow": "A->B", "topic": "orders", "partition": part, "_ms": NOW - age_s * 1000,
        "records": records, "lag": lag, "upstream_last": 0, "latency_ms_p50": p50,
        "latency_ms_p99": p99, "latency_ms_max": p99,
    }  # fmt: skip


def test_the_window_leaves_out_a_slow_start_that_all_history_keeps():
    """The demo's 9.5 s first slice set `status`'s p99 for good; over the last 5 minutes it is
    the steady state's."""
    rows = [metric(1800, 100, 4000, 9571), metric(120, 300, 10, 40), metric(30, 300, 12, 45)]
    (h,) = health(rows, [], [], FLOWS, NOW)
    assert h.latency_ms_p99 == 9571 and h.records == 700  # all history, as before
    assert h.window_seconds == 300
    assert (h.window_records, h.window_latency_ms_p99) == (600, 45)
    assert h.window_records_per_second == pytest.approx(2.0)
    assert h.window_latency_ms_p50 == pytest.approx(11.0)
    (wide,) = health(rows, [], [], FLOWS, NOW, window_s=3600)
    assert (wide.window_records, wide.window_latency_ms_p99) == (700, 9571)


def columns(header: str) -> list[tuple[int, int]]:
    """(start, end) of each header cell (cells are separated by two spaces or more)."""
    return [(m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", header)]


def test_columns_stay_under_their_headers_whatever_the_values():
    rows = [metric(30, 123_456_789, 12, 45_000, lag=98_765_432_100)]
    (h,) = health(rows, [], [], FLOWS, NOW)
    h.last_batch = "2026-09-21T14:13:25.123456+00:00"  # 32 characters, as the issue saw
    h.flow = "primary-datacenter->backup-datacenter"
    text = format_status([h])
    lines = text.splitlines()
    assert lines[0] == (
        "records, rec/s, p50 and p99: over the last 5m; lag, checkpoint (ckpt) and heartbeat "
        "(hb) age: the latest"
    )
    header, row = lines[1], lines[2]
    heads = columns(header)
    assert [header[a:b] for a, b in heads] == [
        "flow", "last batch (UTC)", "records/5m", "rec/s/5m", "lag", "p50 ms/5m", "p99 ms/5m",
        "ckpt age", "hb age",
    ]  # fmt: skip
    # left-aligned columns start where their header starts, the others end where it ends
    assert row.startswith("primary-datacenter->backup-datacenter  2026-09-21 14:13:25  ")
    assert heads[1][0] == len("primary-datacenter->backup-datacenter  ")
    values = ["123456789", "411522.6", "98765432100", "12", "45000", "-", "-"]
    for (_start, end), value in zip(heads[2:], values, strict=True):
        assert row[end - len(value) : end] == value, (header, row)
        assert end == len(row) or row[end] == " "


def test_a_flow_without_figures_says_so_below_the_table():
    (h,) = health([], [], [], FLOWS, NOW)
    assert not h.has_data
    assert (
        format_status([h]).splitlines()[-1] == "A->B: no run has written figures of this flow yet"
    )


def test_each_threshold_names_the_figure_the_limit_and_the_option():
    rows = [metric(30, 10, 12, 900, lag=12_000)]
    (h,) = health(rows, [], [{"source": "A", "target": "B", "_ms": NOW - 400_000, "hops": 0}],
                  FLOWS, NOW)  # fmt: skip
    limits = Thresholds(max_lag=10_000, max_age_s=300, max_p99_ms=500)
    assert alerts(h, limits) == [
        "lag 12000 records > --max-lag 10000 records",
        "no checkpoint yet (--max-age 300s)",
        "heartbeat age 400s > --max-age 300s",
        "p99 900 ms > --max-p99 500 ms",
    ]
    assert alerts(h, Thresholds(max_lag=20_000, max_p99_ms=1000)) == []
    assert format_status([h], limits).splitlines()[-1].startswith("A->B: ALERT: lag 12000 ")


def test_the_window_is_named_as_people_write_it():
    assert [format_window(s) for s in (300, 90, 3600, 7200, 150.5)] == [
        "5m", "90s", "1h", "2h", "150.5s",
    ]  # fmt: skip


# --- the command, over real Delta tables -------------------------------------------------------


def write(root: Path, name: str, rows: list[dict]) -> None:
    from mirror_lib.tables.delta_rs import ensure_tables, table_path
    from mirror_lib.tables.schemas import SCHEMAS

    ensure_tables(str(root))
    schema = SCHEMAS[name]
    full = [{f: r.get(f) for f in schema.names} for r in rows]
    deltalake.write_deltalake(table_path(str(root), name), pa.Table.from_pylist(full, schema),
                              mode="append")  # fmt: skip


def config(tmp_path: Path, state: Path) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        f"A->B.enabled = true\nmirror.state.dir = {state}\n"
    )
    return path


def status(capsys, *args: str) -> tuple[int, str]:
    code = main(["status", *args])
    return code, capsys.readouterr().out


def test_a_config_that_never_ran_is_one_sentence_and_alerts_when_asked(tmp_path, capsys):
    path = config(tmp_path, tmp_path / "state")
    code, out = status(capsys, str(path))
    assert code == 0
    assert out == (
        f"nothing to report for {path} (flows: A->B): no run has written figures to its tables "
        f"under {tmp_path / 'state'} yet; start one with mirror run {path} (figures appear "
        "after its first batch)\n"
    )
    code, out = status(capsys, str(path), "--max-age", "600")
    assert code == 3
    assert out.splitlines()[-1] == (
        "A->B: ALERT: no checkpoint yet (--max-age 600s); no heartbeat yet (--max-age 600s)"
    )


def test_status_exits_3_past_a_threshold_and_json_adds_the_windows_figures(tmp_path, capsys):
    state = tmp_path / "state"
    now = time.time()

    def ts(age_s: float) -> datetime:
        return datetime.fromtimestamp(now - age_s, timezone.utc)

    write(state, "replication_metrics", [
        {"flow": "A->B", "source": "A", "target": "B", "topic": "orders", "partition": 0,
         "ts": ts(age), "records": n, "lag": lag, "upstream_last": 10 * n,
         "latency_ms_p50": p50, "latency_ms_p99": p99, "latency_ms_max": p99}
        for age, n, lag, p50, p99 in ((2400, 50, 900, 4000, 9571), (60, 200, 12_000, 20, 80))
    ])  # fmt: skip
    write(state, "checkpoints", [{"source": "A", "target": "B", "group_id": "g", "topic": "o",
                                  "partition": 0, "record_ts": ts(30)}])  # fmt: skip
    write(state, "heartbeats", [{"source": "A", "target": "B", "heartbeat_ts": ts(2),
                                 "hops": 0}])  # fmt: skip
    path = config(tmp_path, state)
    code, out = status(capsys, str(path))
    assert code == 0
    header, row = out.splitlines()[1:3]
    assert header.split("  ")[-1] == "hb age"
    figures, ages = row.split()[3:8], row.split()[8:]
    assert figures == ["200", "0.7", "12000", "20", "80"]
    assert all(re.fullmatch(r"\d+s", age) for age in ages) and len(ages) == 2  # 30 s and 2 s old
    code, out = status(capsys, str(path), "--max-lag", "10000", "--max-age", "60")
    assert code == 3
    assert out.splitlines()[-1] == "A->B: ALERT: lag 12000 records > --max-lag 10000 records"
    assert status(capsys, str(path), "--max-lag", "20000", "--max-p99", "100")[0] == 0
    assert status(capsys, str(path), "--window", "1h", "--max-p99", "100")[0] == 3  # the start
    code, out = status(capsys, str(path), "--json", "--window", "1h", "--max-p99", "100")
    assert code == 3
    flow = json.loads(out)["A->B"]
    assert (flow["records"], flow["latency_ms_p99"]) == (250, 9571)  # as before: all history
    assert flow["window_seconds"] == 3600
    assert (flow["window_records"], flow["window_latency_ms_p99"]) == (250, 9571)
    assert flow["alerts"] == ["p99 9571 ms > --max-p99 100 ms"]
    assert "alerts" not in json.loads(status(capsys, str(path), "--json")[1])["A->B"]


def test_a_window_that_is_not_a_duration_is_refused(tmp_path, capsys):
    path = config(tmp_path, tmp_path / "state")
    assert main(["status", str(path), "--window", "5 minutes"]) == 2
    assert "a positive duration such as 300, 90s, 5m or 1h" in capsys.readouterr().err
