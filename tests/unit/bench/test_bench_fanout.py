"""The fan-out case's flags, flow properties and block, without brokers (bench/fanout.py)."""

from __future__ import annotations

from pathlib import Path

from bench import fanout, report
from bench.cases import plan
from bench.cli import parse_args
from mirror_lib.config.fanout import read_groups
from mirror_lib.config.parse import parse_config

SERVERS = {"A": "a:1", "B": "b:1", "C": "c:1"}


def test_fanout_case_is_its_own_run_and_quick_makes_it_small() -> None:
    args = parse_args(["--cases", "fanout"])
    assert plan(args) == ([], [])  # no two-broker case or steady run
    assert args.fanout_records == 1_000_000
    assert parse_args(["--quick", "--cases", "fanout"]).fanout_records == 200_000
    assert parse_args(["--quick", "--fanout-records", "5000"]).fanout_records == 5000


def test_two_targets_share_one_read_and_one_target_reads_alone(tmp_path: Path) -> None:
    def groups(targets: tuple[str, ...]) -> list[list[str]]:
        config = parse_config(fanout.fanout_props(SERVERS, tmp_path, targets))
        return [[f.name for f in g] for g in read_groups(config.enabled_flows())]

    assert groups(("B", "C")) == [["A->B", "A->C"]]
    assert groups(("B",)) == [["A->B"]]


def runs() -> list[fanout.FanoutRun]:
    one = fanout.FanoutRun("one target (A->B)", 1000, 210_000, 220_000, 20.0, 0)
    one.copies = [fanout.Copy("B", 1000, True, 5000.0)]
    two = fanout.FanoutRun("fan-out (A->B,C)", 1000, 210_000, 231_000, 25.0, 0)
    two.copies = [fanout.Copy("B", 1000, True, 4000.0), fanout.Copy("C", 0, False, None)]
    return [one, two]


def test_block_has_a_row_per_target_with_the_read_ratio() -> None:
    block = fanout.render(runs(), "CMD", "now", {"nproc": "2"})
    assert block.startswith("Fan-out (`--cases fanout`), run now.")  # in results.md after the main
    rows = [line for line in block.splitlines() if line.startswith("| fan-out") or "| one" in line]
    assert len(rows) == 3
    assert "| one target (A->B) | B | 0.2 | 1.05 | 1.00x | 20.0 | 50 | 5,000 |" in rows[0]
    assert "| 1.10 | 1.05x |" in rows[1] and rows[1].endswith("| yes |")
    assert rows[2].endswith("| NO |")
    assert fanout.summary(runs())["read_ratio"] == 1.05
    assert not runs()[1].ok


def test_block_replaces_its_markers_only(tmp_path: Path) -> None:
    results = tmp_path / "results.md"
    results.write_text("intro\n<!-- bench:results:begin -->\nmain\n<!-- bench:results:end -->\n")
    marks = (fanout.MARK_BEGIN, fanout.MARK_END)
    report.write_block(results, "first\n", marks)
    report.write_block(results, "second\n", marks)
    text = results.read_text()
    assert text.count(fanout.MARK_BEGIN) == 1 and "second" in text and "first" not in text
    assert "\nmain\n" in text and text.startswith("intro\n")
    report.write_block(results, "main again\n")
    assert "second" in results.read_text() and "\nmain\n" not in results.read_text()


def test_copy_rate_is_from_the_query_start_to_the_last_transaction_of_the_case_topic() -> None:
    def batch(ts: int, n: int, remote: str = fanout.REMOTE) -> dict:
        return {"type": "batch", "remote_topic": remote, "ts_ms": ts, "records": n}

    events = [batch(1000, 500), batch(1500, 300), batch(3000, 200)]
    events += [batch(9000, 99, "A.other"), {"type": "skip", "ts_ms": 9000}]
    assert fanout.copy_rate(events, start_ms=1000) == 1000 / 2.0
    assert fanout.copy_rate(events, start_ms=None) is None
    assert fanout.copy_rate([], start_ms=0) is None
