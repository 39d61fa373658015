"""The benchmark's run plan and results block, without brokers (bench/cases.py, bench/report.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import report, steady
from bench.cases import plan
from bench.cli import parse_args
from bench.measure import Measure
from bench.runner import Row, Runner


def labels(argv: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    cases, steady = plan(parse_args(argv))
    return {c.name: [m.label for m in c.methods] for c in cases}, [s.label for s in steady]


MINE = [
    "baseline loop (a)",
    "tuned loop (a')",
    "engine copier, no Spark (c)",
    "mirror EOS (b)",
    "mirror ALO (b')",
]
PEER_ROWS = [
    "mirror EOS tasks.max=1 (b1)",
    "mirror EOS tasks.max=4 (b'')",
    "MM2 defaults, tasks.max=1 (m)",
    "MM2 tasks.max=4 (m'')",
    "MM2 EOS tasks.max=1 (m-eos)",
    "Spark Kafka connector (s)",
]
STEADY_ALO = "at least once (`mirror.delivery = at_least_once`), as MM2's default"
STEADY_MINE = [
    "default: all queries of `mirror run`",
    "replication query only (checkpoints, heartbeats off)",
    STEADY_ALO,
]
# ours at MM2's tasks.max, run only beside MM2
STEADY_AT_MM2_TASKS = ["exactly once, tasks.max=1", "at least once, tasks.max=1"]


def test_full_run_has_every_method_and_both_peers_in_both_cases() -> None:
    cases, steady = labels([])
    assert cases["200B"] == cases["10KB"] == MINE + PEER_ROWS
    assert steady == [
        *STEADY_MINE,
        *STEADY_AT_MM2_TASKS,
        "MM2 defaults, tasks.max=1",
        "MM2 EOS, tasks.max=1",
        "Spark Kafka connector, processingTime 0.5 s",
    ]
    assert parse_args([]).cases.split(",") == ["200B", "10KB", "steady", "idle", "failover"]


def test_without_peers_the_plan_is_the_mirrors_own_and_tasks4_only_for_200_bytes() -> None:
    for argv in (["--no-mm2", "--no-spark-kafka"], ["--peers", ""]):
        cases, steady = labels(argv)
        assert cases["200B"] == [*MINE, "mirror EOS tasks.max=4 (b'')"]
        assert cases["10KB"] == MINE
        assert steady == STEADY_MINE


def test_one_peer_brings_only_its_rows() -> None:
    cases, steady = labels(["--peers", "spark-kafka", "--cases", "200B,steady"])
    assert cases["200B"] == [*MINE, "mirror EOS tasks.max=4 (b'')", "Spark Kafka connector (s)"]
    assert steady == [*STEADY_MINE, "Spark Kafka connector, processingTime 0.5 s"]
    cases, _ = labels(["--no-spark-kafka", "--no-tasks4", "--cases", "10KB"])
    assert cases["10KB"] == [*MINE, *PEER_ROWS[:1], *PEER_ROWS[2:3], PEER_ROWS[4]]


def test_mm2_brings_our_steady_runs_at_its_tasks_max_and_no_alo_leaves_one_out() -> None:
    mm2 = ["MM2 defaults, tasks.max=1", "MM2 EOS, tasks.max=1"]
    _, steady = labels(["--cases", "steady", "--peers", "mm2"])
    assert steady == [*STEADY_MINE, *STEADY_AT_MM2_TASKS, *mm2]
    _, steady = labels(["--cases", "steady", "--peers", "mm2", "--no-alo", "--no-steady-lean"])
    assert steady == [STEADY_MINE[0], STEADY_AT_MM2_TASKS[0], *mm2]


def test_an_unknown_peer_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--peers", "mm2,flink"])
    err = capsys.readouterr().err
    assert "--peers 'mm2,flink'" in err and "['flink']" in err and "mm2, spark-kafka" in err


def test_quick_and_no_flags_leave_out_their_methods() -> None:
    cases, _ = labels(["--quick"])
    assert cases["200B"] == [
        "baseline loop (a)",
        "tuned loop (a')",
        "engine copier, no Spark (c)",
        "mirror EOS (b)",
        "mirror EOS tasks.max=1 (b1)",
        "MM2 defaults, tasks.max=1 (m)",
        "MM2 EOS tasks.max=1 (m-eos)",
        "Spark Kafka connector (s)",
    ]
    cases, steady = labels(
        ["--cases", "10KB,steady", "--no-copier", "--no-tuned", "--no-steady-lean", "--peers", ""]
    )
    assert cases == {"10KB": ["baseline loop (a)", "mirror EOS (b)", "mirror ALO (b')"]}
    assert steady == ["default: all queries of `mirror run`", STEADY_ALO]
    _, steady = labels(["--cases", "steady", "--no-alo", "--peers", ""])
    assert steady == STEADY_MINE[:2]


def test_quick_lowers_only_unchanged_defaults() -> None:
    args = parse_args(["--quick", "--records", "1000"])
    assert (args.records, args.big_records, args.steady_seconds) == (1000, 10_000, 10)
    assert args.results is None


def test_block_has_the_table_headers_of_the_recorded_results(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(report, "facts", lambda: {"nproc": "2"})
    args = parse_args(["--quick"])
    runner = Runner(args, tmp_path)
    m = Measure(wall_s=10, machine_cpu_s=20, broker_cpu_s=2, peak_rss_mb=100, peak_pss_mb=90)
    runner.rows = [Row("200B", "baseline loop (a)", 1000, 205_000_000, m, True, {"inner_s": 9.5})]
    block = report.render(runner, args, "CMD", "now", 60)
    recorded = report.RESULTS.read_text().split(report.MARK_BEGIN)[1].split(report.MARK_END)[0]
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

    results = tmp_path / "results.md"
    results.write_text(f"# x\n\n{report.MARK_BEGIN}\nold\n{report.MARK_END}\n\n## After\n")
    report.write_block(results, block)
    text = results.read_text()
    assert "old" not in text and block in text and text.endswith("## After\n")
    new = tmp_path / "new.md"
    report.write_block(new, block)
    assert (
        new.read_text() == f"{report.RESULTS_HEAD}\n{report.MARK_BEGIN}\n{block}{report.MARK_END}\n"
    )


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


def test_block_shows_the_peers_idle_mm2_failover_and_what_the_connector_lacks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(report, "facts", lambda: {"nproc": "2"})
    runner = Runner(parse_args(["--quick"]), tmp_path)
    m = Measure(wall_s=10, machine_cpu_s=20, broker_cpu_s=2, peak_rss_mb=100, peak_pss_mb=90)
    mm2 = {"started_s": 4.0, "caught_up_s": 10.0, "steady_rps": 166}
    runner.rows = [
        Row("200B", "MM2 defaults, tasks.max=1 (m)", 1000, 205_000, m, True, mm2),
        Row("200B", "Spark Kafka connector (s)", 1000, 205_000, m, True, {"started_s": 8.0}),
    ]
    block = report.render(runner, runner.args, "CMD", "now", 60)
    assert "| 200B | MM2 defaults, tasks.max=1 (m) | 4.0 |  | 10.0 | 10.0 | 166 |  |  |  |" in block
    assert "| timestamps | not written: the copy gets new CreateTimes | the source's |" in block
    assert "Failover" not in block and "Idle MM2" not in block
    runner.idle_mm2 = {"rc": 0, "cpu_pct": 6.5, "peak_rss_mb": 400, "peak_pss_mb": 390}
    runner.idle_mm2.update(processes=1, sampled_s=25, warm_up_s=30, log="x", broker_cpu_pct=1.5)
    counts = {"reread": 0, "skipped": 0, "untranslated": 0, "partitions": 48}
    runner.failover = {"ok": True, "groups": 16, "ours": counts, "ours_rc": 0}
    runner.failover.update(mm2={**counts, "reread": 1_234}, mm2_settled=True)
    block = report.render(runner, runner.args, "CMD", "now", 60)
    assert "CPU 6.5 % of a core over 25 s (brokers meanwhile: 1.5 %)." in block
    assert "| MM2 | 1,234 | 0 | 0 | 48 |\n| mirror | 0 | 0 | 0 | 48 |" in block
    assert "| failover of 16 groups: records re-read / skipped at the translated offsets" in block


def test_the_defaults_row_sets_no_tasks_max_and_the_pairs_set_mm2s(tmp_path) -> None:
    from bench.cases import MIRROR_EOS, MIRROR_TASKS1, MIRROR_TASKS4
    from bench.methods import Site, mirror_config
    from mirror_lib.config.properties import parse_properties

    site = Site("a:1", "b:1", tmp_path)

    def written(method) -> dict[str, str]:
        path = mirror_config(site, "flow.properties", "t", method.overrides)
        return parse_properties(path.read_text())

    assert "tasks.max" not in written(MIRROR_EOS) and written(MIRROR_EOS)["topics"] == "t"
    assert written(MIRROR_TASKS1)["tasks.max"] == "1"
    assert written(MIRROR_TASKS4)["tasks.max"] == "4"


def test_only_a_whole_run_replaces_the_recorded_results():
    """A partial run (one case, a trial of an engine) prints its block; it does not overwrite
    the block of the last whole run unless --results says where."""
    assert parse_args([]).results == str(report.RESULTS)
    assert parse_args(["--cases", "fanout"]).results == str(report.RESULTS)
    assert parse_args(["--cases", "steady"]).results is None
    assert parse_args(["--cases", "steady", "--results", "/tmp/r.md"]).results == "/tmp/r.md"
    assert parse_args(["--quick"]).results is None


def test_a_flow_over_tansu_paces_its_fetches_and_one_over_kafka_does_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bench.procs import mirror_props
    from mirror_lib.testing.clusters import BROKER_ENV

    monkeypatch.setenv(BROKER_ENV, "tansu")
    assert mirror_props("a:1", "b:1", tmp_path, "t")["mirror.fetch.pace.ms"] == "50"
    monkeypatch.setenv(BROKER_ENV, "kafka")
    assert "mirror.fetch.pace.ms" not in mirror_props("a:1", "b:1", tmp_path, "t")


def test_both_tools_run_the_same_flows(tmp_path) -> None:
    """Ours and MM2 get the same flow keys: A->B only, and neither writes heartbeats into A for
    the disabled B->A (ours did, and copied them back to B, a transaction a second when idle)."""
    from bench.peers import mm2_properties
    from bench.procs import mirror_props

    ours = mirror_props("a:1", "b:1", tmp_path, "t")
    mm2 = mm2_properties("a:1", "b:1", "t")
    flow_keys = {k for k in {**ours, **mm2} if "->" in k and not k.endswith(".topics")}
    assert {k: ours.get(k) for k in flow_keys} == {k: mm2.get(k) for k in flow_keys}
    assert ours["B->A.emit.heartbeats.enabled"] == "false"


def test_the_tail_spread_tells_one_stall_from_a_broad_tail() -> None:
    stall = {n: (500.0 if 10_000 <= n < 10_300 else 5.0) for n in range(50_000)}
    assert steady.tail_spread(stall, 5_000, 100.0) == {"seconds": 1, "top": {2: 300}}
    broad = {n: (500.0 if n % 100 == 0 else 5.0) for n in range(50_000)}
    assert steady.tail_spread(broad, 5_000, 100.0)["seconds"] == 10


def test_three_brokers_add_a_rolling_restart_beside_mm2_and_write_no_results_block():
    """``--brokers 3``: the steady runs add a rolling restart of B, ours and MM2's; the recorded
    results block (single brokers) is left alone; tansu has one broker only."""
    args = parse_args(["--brokers", "3", "--cases", "200B,steady", "--peers", "mm2"])
    rolls = [s for s in plan(args)[1] if s.roll]
    assert [(s.kind, s.mm2_eos) for s in rolls] == [("mirror", False), ("mm2", True)]
    assert args.results is None
    assert not [s for s in plan(parse_args(["--cases", "steady", "--peers", "mm2"]))[1] if s.roll]
    assert not [s for s in plan(parse_args(["--brokers", "3", "--cases", "steady",
                                            "--peers", ""]))[1] if s.kind == "mm2"]  # fmt: skip
    with pytest.raises(SystemExit):
        parse_args(["--brokers", "3", "--broker", "tansu"])
