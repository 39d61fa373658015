"""The latency bench's arithmetic: percentiles, median and spread over repetitions, the tail's
stages, transaction markers in a log segment, the copy task's timing log."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
from typing import Any

import pytest

from bench import latency, measure, probe, tail


def test_a_percentile_is_the_nearest_rank():
    values = [float(v) for v in range(101)]  # 0..100: the q-th percentile is q
    assert probe.pct(values, 50) == 50.0
    assert probe.pct(values, 99) == 99.0
    assert probe.pct(values, 100) == 100.0
    assert probe.pct([1.0, 2.0, 3.0, 4.0], 99) == 4.0  # a value of the run, never between two
    assert probe.pct([7.0], 99) == 7.0


def test_the_warm_up_is_left_out_and_lost_records_are_counted():
    created = [1000.0, 1000.0, 2000.0, 2000.0]
    acked = [1002.0, 1002.0, 2003.0, 2005.0]
    arrived = {0: 5000.0, 1: 5000.0, 2: 2010.0}  # record 3 never arrived
    r = probe.Result(created, acked, arrived, warm=2)
    s = r.summary()
    assert s["records"] == 2 and s["received"] == 1
    assert s["p50_ms"] == 10.0 and s["max_ms"] == 10.0  # the slow warm-up records are not in it
    assert s["source_ack_p99_ms"] == 5.0
    assert s["after_ack_p50_ms"] == 7.0  # the copy's share: arrival - acknowledgement


def test_a_roll_and_a_loaded_floor_need_three_brokers_and_a_roll_a_window_that_holds_it(capsys):
    for argv, named in (
        (["--brokers", "2"], "--brokers 2"),
        (["--roll", "--seconds", "120"], "--roll needs --brokers 3"),
        (["--floor-loaded"], "--floor-loaded needs --brokers 3"),
        (["--brokers", "3", "--roll", "--seconds", "60"], "--seconds 60 with --roll"),
    ):
        with pytest.raises(SystemExit):
            latency.parse_args(argv)
        assert named in capsys.readouterr().err
    args = latency.parse_args(["--brokers", "3", "--roll", "--seconds", "120"])
    assert (args.brokers, args.roll) == (3, True)


def test_repetitions_give_their_median_and_range():
    assert latency.spread([30.0, 10.0, 20.0, None]) == {"median": 20.0, "min": 10.0, "max": 30.0}
    assert latency.spread([None]) == {"median": None, "min": None, "max": None}
    assert latency.cell({"median": 20.0, "min": 10.0, "max": 30.0}) == "20.0 (10.0-30.0)"


def test_the_summary_is_per_contestant_with_its_tail_pooled_over_repetitions():
    def run(name: str, p99: float, stages: list[dict]) -> dict:
        return {
            "contestant": name, "label": name, "records": 10, "received": 10,
            "p50_ms": 1.0, "p99_ms": p99, "max_ms": p99, "machine_cores": 1.0,
            "source_ack_p50_ms": 1.0, "source_ack_p99_ms": 2.0, "tail_stages": stages,
        }  # fmt: skip

    runs = [
        run("ours", 100.0, [{"commit": 10.0}]),
        run("mm2", 50.0, []),
        run("ours", 300.0, [{"commit": 30.0}, {"commit": 20.0}]),
    ]
    runs[0]["sample_stages"] = [{"txn_wait": 4.0}, {"txn_wait": 6.0}, {"txn_wait": 20.0}]
    s = latency.summarize(runs)
    assert list(s) == ["ours", "mm2"]
    assert s["ours"]["p99_ms"] == {"median": 200.0, "min": 100.0, "max": 300.0}
    assert s["ours"]["tail"]["commit"] == {"records": 3, "mean": 20.0, "median": 20.0, "p90": 30.0}
    assert s["ours"]["sample"]["txn_wait"] == {
        "records": 3,
        "mean": 10.0,
        "median": 6.0,
        "p90": 20.0,
    }
    assert "tail" not in s["mm2"] and "sample" not in s["mm2"]


def test_the_sample_is_every_nth_record_in_the_order_they_were_sent():
    lat = {n: float(n % 7) for n in range(10, 20)}
    assert tail.every(lat, 3) == [10, 13, 16, 19]
    assert tail.over_p99(lat, 5.0) == [13]


def test_an_unknown_contestant_is_refused_with_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as exc:
        latency.parse_args(["--contestants", "ours,mm3"])
    assert exc.value.code == 2
    assert "mm3" in capsys.readouterr().err


def test_a_records_consume_time_is_found_through_runs_and_batches():
    # upstream offsets 10..14 then 20..22 (a gap), consumed in batches of 4 and 4
    txn = tail.Txn(100.0, 120.0, [(10, 0), (20, 5)], 8, [(50.0, 4), (60.0, 4)])
    assert txn.consumed_at(10) == 50.0
    assert txn.consumed_at(13) == 50.0
    assert txn.consumed_at(14) == 60.0  # the fifth record came in the second batch
    assert txn.consumed_at(21) == 60.0
    assert txn.consumed_at(15) is None and txn.consumed_at(23) is None


def test_the_stages_add_up_to_the_latency():
    txn = tail.Txn(130.0, 150.0, [(0, 0)], 1, [(110.0, 1)])
    s = tail.stages(100.0, 105.0, 190.0, 110.0, txn, 170.0)
    assert s["source_ack"] == 5.0 and s["fetch"] == 5.0 and s["txn_wait"] == 20.0
    assert s["commit"] == 20.0 and s["lso"] == 20.0 and s["consumer_fetch"] == 20.0
    assert sum(v for v in s.values() if v is not None) == 190.0 - 100.0
    alo = tail.stages(100.0, 105.0, 190.0, 110.0, None, None)  # no transaction gates it
    assert alo["copy_to_consumer"] == 80.0 and alo["commit"] is None


def _batch(offset: int, records: int, max_ts: int, control: bool) -> bytes:
    body = struct.pack(
        ">ibIhiqqqhii", 0, 2, 0, 0x30 if control else 0x10, records - 1, max_ts, max_ts, 7, 0, 0,
        records,
    ) + b"x" * 9 * records  # fmt: skip
    return struct.pack(">qi", offset, len(body)) + body


def test_commit_markers_are_read_from_a_segment_and_matched_to_records(tmp_path):
    segment = (
        _batch(0, 3, 1_000, False)
        + _batch(3, 1, 1_050, True)
        + _batch(4, 2, 1_100, False)
        + _batch(6, 1, 1_180, True)
        + b"\0" * 64  # a preallocated end
    )
    assert tail.parse_markers(segment) == [(3, 1_050), (6, 1_180)]
    folder = tmp_path / "A.probe-0"
    folder.mkdir()
    (folder / "00000000000000000000.log").write_bytes(segment)
    markers = tail.commit_markers(tmp_path, "A.probe", 0)
    assert tail.marker_after(markers, 2) == 1_050
    assert tail.marker_after(markers, 5) == 1_180
    assert tail.marker_after(markers, 7) is None


def test_a_tail_record_is_broken_down_from_the_probe_the_log_and_the_markers():
    result = probe.Result(
        created=[0.0, 100.0], acked=[1.0, 104.0], arrived={0: 10.0, 1: 300.0}, warm=0,
        offsets=[5, 8], landed={0: (0, 3), 1: (1, 2)},
    )  # fmt: skip
    txns = {("A.probe", 1): [tail.Txn(150.0, 200.0, [(8, 0)], 1, [(110.0, 1)])]}
    markers = {1: [(3, 260)]}
    assert tail.over_p99(result.by_record(), 10.0) == [1]
    (row,) = tail.breakdown([1], result, txns, markers, "A.probe", 2)
    assert row["fetch"] == 6.0 and row["txn_wait"] == 40.0 and row["commit"] == 50.0
    assert row["lso"] == 60.0 and row["consumer_fetch"] == 40.0


def test_the_timing_log_is_read_per_partition(tmp_path):
    line = {
        "slot": 0, "commit_start_ms": 3.0, "acked_ms": 4.0, "commit_end_ms": 5.0,
        "parts": [{"remote": "A.T", "partition": 1, "n": 2, "runs": [[7, 0]],
                   "consumed": [[1.0, 1], [2.0, 1]]}],
    }  # fmt: skip
    (tmp_path / "txn-1.jsonl").write_text(json.dumps(line) + "\n")
    (txn,) = tail.read_txn_log(tmp_path)[("A.T", 1)]
    assert (txn.commit_start_ms, txn.commit_end_ms) == (3.0, 5.0)
    assert txn.consumed_at(8) == 2.0


def test_the_markdown_gives_cpu_against_mm2_the_hosts_steal_its_canary_and_the_stages():
    def run(name: str, cores: float, stages: list[dict]) -> dict:
        return {
            "contestant": name, "label": f"label {name}", "records": 10, "received": 10,
            "p50_ms": 5.0, "p99_ms": 9.0, "max_ms": 12.0, "machine_cores": cores,
            "own_cores": cores / 2, "target_cores": cores / 4, "commits_per_s": 50 * cores,
            "source_ack_p50_ms": 1.0, "source_ack_p99_ms": 2.0, "steal_cores": cores / 10,
            "canary_ms": 100 * cores, "tail_stages": stages,
        }  # fmt: skip

    runs = [run("mm2", 1.0, []), run("ours", 1.5, [{"fetch": 2.0, "commit": 4.0}])]
    runs[1]["sample_stages"] = [{"txn_wait": 3.0}, {"txn_wait": 5.0}]
    args = latency.parse_args(["--reps", "1"])
    text = latency.markdown(latency.summarize(runs), args)
    row = (
        "| label ours | 5.0 | 9.0 | 12 | 1.50 | 0.75 | 0.38 | 75.0 | 1.50x | 1.0 / 2.0 | - / - "
        "| 0.15 | 150.0 | 1/1 |"
    )
    assert row in text and "| CPU canary (ms) |" in text
    assert "| records above the p99 | fetch | commit | records |" in text
    assert "| every 100th record | txn_wait | records |" in text
    assert "| label ours | 4.0 / 3.0 | 2 |" in text  # mean / median
    assert text.index("every 100th record") < text.index("above the p99")
    assert latency.markdown({}, args) == "No run completed.\n"
    assert "one broker a cluster" in text and "roll of B" not in text


def test_a_rolls_events_are_listed_per_run_after_the_figures():
    runs = [
        {
            "contestant": "ours", "label": "ours eos", "records": 10, "received": 10,
            "p50_ms": 5.0, "p99_ms": 900.0, "max_ms": 1200.0, "machine_cores": 1.8,
            "after_ack_p50_ms": 4.0, "after_ack_p99_ms": 800.0,
            "roll": {"events": [["down", 1, 12.5], ["back", 1, 30.0]], "error": None},
        }
    ]  # fmt: skip
    args = latency.parse_args(["--brokers", "3", "--roll", "--seconds", "120", "--reps", "1"])
    text = latency.markdown(latency.summarize(runs), args)
    assert "three brokers a cluster" in text and "restarted broker by broker" in text
    assert "| 4.0 / 800.0 |" in text  # after the source's ack
    assert "- ours eos, run 1: down 1 12.5, back 1 30" in text


def test_the_cpu_window_gives_cores_and_the_hosts_steal_over_its_span():
    window = latency.CpuWindow(None, [], lead_s=0, seconds=1)
    window.marks = [(10.0, 100.0, 0.0, 5.0, 7.0), (12.0, 103.0, 0.0, 6.0, 7.5)]
    out = window.result()
    assert (out["machine_cores"], out["broker_cores"], out["steal_cores"]) == (1.5, 0.5, 0.25)
    assert out["tool_cores"] is None
    assert "target_cores" not in out  # no target broker named (the floor)
    window = latency.CpuWindow(None, [], lead_s=0, seconds=1, target_pids=[1])
    window.marks = [(10.0, 100.0, 0.0, 5.0, 7.0), (12.0, 103.0, 0.0, 6.0, 7.5)]
    window.targets = [2.0, 2.8]
    assert window.result()["target_cores"] == 0.4


def test_commits_are_counted_per_partition_from_the_markers_in_the_window():
    # partition p has markers at 1,000 ms steps from p ms on: 2 of each in [1,000, 3,000)
    markers = {p: [(i, p + 1000 * i) for i in range(5)] for p in range(latency.PARTITIONS)}
    assert latency.commits_per_s(markers, [1000.0, 3000.0]) == 1.0
    assert latency.commits_per_s(markers, [1000.0]) is None


def test_each_attempt_carries_the_cpu_canary_taken_before_it(tmp_path, monkeypatch):
    speeds = iter([120.0, 340.0])
    monkeypatch.setattr(latency, "cpu_canary_ms", lambda: next(speeds))

    tries: list[int] = []

    def step(_work, rep):
        tries.append(rep)
        if len(tries) == 1:
            raise RuntimeError("a broker missed its start-up deadline")
        return {"contestant": "ours"}

    run = latency.attempt("ours", step, tmp_path / "w", 0)
    assert (run["attempts"], run["canary_ms"]) == (2, 340.0)


def test_the_canary_times_its_loop_in_milliseconds(monkeypatch):
    # long enough to round above 0.0 ms on a fast core (1,000 steps once took 0.04 ms)
    monkeypatch.setattr(measure, "CANARY_ITERATIONS", 100_000)
    assert 0 < measure.cpu_canary_ms(tries=2) < 1000


def test_set_puts_properties_over_every_contestants_and_refuses_what_is_not_one():
    args = latency.parse_args(["--set", "mirror.commit.interval.ms=50", "--set", "tasks.max = 1"])
    assert args.props == {"mirror.commit.interval.ms": "50", "tasks.max": "1"}
    with pytest.raises(SystemExit):
        latency.parse_args(["--set", "mirror.commit.interval.ms"])


def test_a_clusters_brokers_are_found_on_one_node_or_on_three():
    from types import SimpleNamespace as NS

    one = NS(clusters={}, handles=[NS(alias="source", pid=1), NS(alias="target", pid=2)])
    assert latency.pids_of(one) == [1, 2] and latency.pids_of(one, "target") == [2]
    nodes = {a: [NS(pid=10 * i + n) for n in range(3)] for i, a in enumerate(("source", "target"))}
    three = NS(
        clusters={a: NS(nodes=ns) for a, ns in nodes.items()},
        handles=[n for ns in nodes.values() for n in ns],
    )
    assert latency.pids_of(three) == [0, 1, 2, 10, 11, 12]
    assert latency.pids_of(three, "target") == [10, 11, 12]


def test_the_transactional_loop_runs_as_the_benchs_eos_loop_subcommand(tmp_path):
    from bench import cli

    args = latency.parse_args(["--contestants", "loop-eos1"])
    cmd, stop = latency.contestant_command(args.chosen[0], args, "A:1", "B:2", tmp_path)
    assert cmd[2:] == [
        "eos-loop", "--source", "A:1", "--target", "B:2", "--topic", "probe", "--dest", "A.probe"
    ]  # fmt: skip
    assert stop == signal.SIGTERM
    parsed = cli.parse_args(cmd[2:])
    assert (parsed.command, parsed.txn_ms) == ("eos-loop", 20)


def test_a_loaded_floor_loads_and_reads_the_other_cluster_from_when_the_load_starts(
    monkeypatch, tmp_path
):
    started: list[list[str]] = []

    class Proc:
        def __init__(self, cmd: list[str], cwd: object) -> None:
            started.append(cmd)

        def poll(self) -> int:
            return 0

    def run(source, target, remote, load, workdir, on_load):
        assert (source, target, remote) == ("B:1", "B:1", "probe")
        on_load()
        return "result"

    monkeypatch.setattr(probe.subprocess, "Popen", Proc)
    monkeypatch.setattr(probe, "run", run)
    told: list[int] = []
    load = probe.Load("probe", 4, 5000, 60, 15)
    got = probe.floor("B:1", load, tmp_path, lambda: told.append(len(started)), beside="A:1")
    assert got == "result"
    assert [(c[3], c[5], c[7]) for c in started] == [
        ("measure", "A:1", "probe"),
        ("load", "A:1", "probe"),
    ]
    assert told == [2]  # the other cluster's load runs from the floor's own start


def test_a_loaded_floor_stops_both_side_processes_when_one_ignores_sigterm(monkeypatch, tmp_path):
    """The other cluster's reader and load each get SIGTERM before either is waited for, and one
    that outlives its wait is killed: neither is left running into the next measure."""
    procs: list[Any] = []

    class Proc:
        def __init__(self, cmd: list[str], cwd: object) -> None:
            self.signals: list[int] = []
            self.stubborn = not procs  # the first one ignores SIGTERM
            procs.append(self)

        def poll(self) -> int | None:
            return None

        def send_signal(self, sig: int) -> None:
            self.signals.append(sig)

        def wait(self, timeout: float | None = None) -> int:
            if self.stubborn and timeout is not None:
                raise subprocess.TimeoutExpired("proc", timeout)
            return 0

        def kill(self) -> None:
            self.signals.append(signal.SIGKILL)

    def run(source, target, remote, load, workdir, on_load):
        on_load()
        return "result"

    monkeypatch.setattr(probe.subprocess, "Popen", Proc)
    monkeypatch.setattr(probe, "run", run)
    load = probe.Load("probe", 4, 5000, 60, 15)
    assert probe.floor("B:1", load, tmp_path, beside="A:1") == "result"
    assert [p.signals for p in procs] == [[signal.SIGTERM, signal.SIGKILL], [signal.SIGTERM]]
