"""The benchmark's run plan and README block, without brokers (bench/cases.py, bench/report.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import report, steady
from bench.cases import plan
from bench.cli import parse_args
from bench.measure import Measure
from bench.runner import Row, Runner

README = Path(__file__).resolve().parents[3] / "bench" / "README.md"


def labels(argv: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    cases, steady = plan(parse_args(argv))
    return {c.name: [m.label for m in c.methods] for c in cases}, [s.label for s in steady]


def test_full_run_has_every_method_and_tasks4_only_for_200_bytes() -> None:
    cases, steady = labels([])
    assert cases["200B"] == [
        "baseline loop (a)",
        "tuned loop (a')",
        "engine copier, no Spark (c)",
        "mirror EOS (b)",
        "mirror ALO (b')",
        "mirror EOS tasks.max=4 (b'')",
    ]
    assert cases["10KB"] == cases["200B"][:-1]
    assert len(steady) == 2


def test_quick_and_no_flags_leave_out_their_methods() -> None:
    cases, _ = labels(["--quick"])
    assert cases["200B"] == [
        "baseline loop (a)",
        "tuned loop (a')",
        "engine copier, no Spark (c)",
        "mirror EOS (b)",
    ]
    cases, steady = labels(
        ["--cases", "10KB,steady", "--no-copier", "--no-tuned", "--no-steady-lean"]
    )
    assert cases == {"10KB": ["baseline loop (a)", "mirror EOS (b)", "mirror ALO (b')"]}
    assert steady == ["default: all queries of `mirror run`"]


def test_quick_lowers_only_unchanged_defaults() -> None:
    args = parse_args(["--quick", "--records", "1000"])
    assert (args.records, args.big_records, args.steady_seconds) == (1000, 10_000, 10)
    assert args.readme is None


def test_block_has_the_table_headers_of_the_recorded_readme(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(report, "facts", lambda: {"nproc": "2"})
    args = parse_args(["--quick"])
    runner = Runner(args, tmp_path)
    m = Measure(wall_s=10, machine_cpu_s=20, broker_cpu_s=2, peak_rss_mb=100, peak_pss_mb=90)
    runner.rows = [Row("200B", "baseline loop (a)", 1000, 205_000_000, m, True, {"inner_s": 9.5})]
    block = report.render(runner, args, "CMD", "now", 60)
    recorded = README.read_text().split(report.MARK_BEGIN)[1].split(report.MARK_END)[0]
    headers = [line for line in block.splitlines() if line.startswith("| case |")]
    assert len(headers) == 2
    for header in headers:
        assert header in recorded.splitlines()
    assert "| 200B | baseline loop (a) | 1,000 | 10.0 | 100 | 20.5 |" in block
    assert "Idle flow" not in block
    runner.idle = {"rc": 0, "cpu_pct": 2.2, "peak_rss_mb": 983, "peak_pss_mb": 761}
    runner.idle.update(processes=9, sampled_s=25, warm_up_s=30, log="run.log")
    idle_block = report.render(runner, args, "CMD", "now", 60)
    assert "9 processes, CPU 2.2 % of a core over 25 s." in idle_block
    assert "| idle flow, every part: CPU of the process tree | < 5 % of a core | 2.2 % | yes |" in (
        idle_block
    )

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{report.MARK_BEGIN}\nold\n{report.MARK_END}\n\n## After\n")
    report.write_readme(readme, block)
    text = readme.read_text()
    assert "old" not in text and block in text and text.endswith("## After\n")


def test_warm_up_line_says_what_the_first_run_did() -> None:
    assert report.warmup_line({}) == []
    fresh = {"records": 10_000, "rc": 0, "seconds": 21.5}
    wrote = report.warmup_line({**fresh, "archive_before": False, "archive_after": True})[0]
    assert "10,000 x 200 B (exit 0, 21.5 s)" in wrote and "was written by it" in wrote
    kept = report.warmup_line({**fresh, "archive_before": True, "archive_after": True})[0]
    assert "was already there" in kept


def test_steady_latency_is_split_at_the_source_brokers_ack() -> None:
    receiver = steady.Receiver("unused:1", "unused")
    receiver.lat, receiver.by_seq = [300.0, 500.0], {0: 300.0, 1: 500.0}
    receiver.got["s"] = 2
    load = steady.Load(receiver, {0: 100.0, 1: 450.0}, 1.0, 10.0, 5.0, 1.0, 0.0, 10_000.0)
    out = steady.summarize("run", load, [], 1, 5_000, 100)
    assert (out["source_ack_p50_ms"], out["source_ack_p99_ms"]) == (100.0, 450.0)
    assert (out["after_ack_p50_ms"], out["after_ack_max_ms"]) == (50.0, 200.0)
    assert out["ok"] and out["e2e_max_ms"] == 500.0


def test_slow_seconds_place_the_tail_in_the_load() -> None:
    by_seq = {0: 100.0, 4_999: 1_200.0, 5_000: 1_500.0, 5_001: 900.0, 20_000: 2_000.0}
    assert steady.slow_seconds(by_seq, 5_000) == {0: 1, 1: 1, 4: 1}
