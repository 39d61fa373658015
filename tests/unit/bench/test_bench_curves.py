"""The scale and soak benches' arithmetic: a fitted line's 30-day value, flattened samples,
topic sizes from a broker's log folder."""

from __future__ import annotations

import pytest

from bench import curves, state


def test_a_growing_series_is_extrapolated_along_its_line():
    ts = [0.0, 3600.0, 7200.0, 10800.0]
    grown = curves.at_30_days(ts, [10.0, 20.0, 30.0, 40.0], skip=0.0)
    assert grown["per_day"] == pytest.approx(240.0)
    assert grown["at_30_days"] == pytest.approx(10 + 30 * 240.0)


def test_a_bounded_series_keeps_its_peak():
    ts = [float(t) for t in range(0, 7200, 600)]
    sawtooth = [100.0 if i % 2 else 180.0 for i in range(len(ts))]
    bounded = curves.at_30_days(ts, sawtooth)
    assert abs(bounded["per_day"]) < 100 * 24  # no trend a sawtooth could be mistaken for
    assert bounded["at_30_days"] >= 180.0


def test_start_up_is_left_out_of_the_fit():
    ts = [0.0, 600.0, 1200.0, 1800.0, 2400.0]
    ramp_then_flat = [0.0, 50.0, 50.0, 50.0, 50.0]
    assert curves.at_30_days(ts, ramp_then_flat, skip=0.25)["per_day"] == pytest.approx(0.0)


def test_samples_flatten_to_numbers_only():
    sample = {"tables": {"x": {"files": 3, "name": "x"}}, "ok": True, "rss": 1.5}
    assert state.flatten(sample) == {"tables.x.files": 3.0, "rss": 1.5}


def test_a_topic_is_its_log_segments_not_its_preallocated_indexes(tmp_path):
    part = tmp_path / "mm2-metrics.A.internal-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(b"x" * 1000)
    (part / "00000000000000000000.index").write_bytes(b"\0" * 10_000)
    (tmp_path / "mm2-metrics.A.internal-extra-0").mkdir()  # another topic, same prefix
    sizes = state.topic_sizes([tmp_path], ["mm2-metrics.A.internal", "heartbeats"])
    assert sizes == {"mm2-metrics.A.internal": 1000, "heartbeats": 0}


def test_a_series_with_a_retention_grows_only_for_its_window():
    ts = [0.0, 3600.0, 7200.0, 10800.0]
    kept_a_day = curves.at_30_days(ts, [10.0, 20.0, 30.0, 40.0], skip=0.0, window_s=86_400.0)
    assert kept_a_day["per_day"] == pytest.approx(240.0)
    assert kept_a_day["at_30_days"] == pytest.approx(10 + 240.0)
    shorter_than_the_run = curves.at_30_days(ts, [10.0, 20.0, 30.0, 40.0], skip=0.0, window_s=60)
    assert shorter_than_the_run["at_30_days"] == 40.0  # the peak it already reached


def test_each_kind_of_state_is_bounded_by_its_own_setting():
    from bench import soak

    bounds = soak.windows(soak.parse_args(["--history-hours", "2", "--batch-seconds", "60"]))
    assert soak.window_of("state.tables.offset_syncs.log_bytes", bounds)[1] == 2 * 3600
    assert soak.window_of("state.tables.offset_syncs.replaced_bytes", bounds)[1] == 2 * 3600
    assert soak.window_of("state.tables.offset_syncs.bytes", bounds)[1] == 7 * 86_400
    checkpoint = soak.window_of("state.spark_checkpoints.flows/A_to_B/replication.files", bounds)
    assert checkpoint[1] == 100 * 60
    assert soak.window_of("processes.driver.rss_mb", bounds) == ("", None)  # a leak: no bound


def test_our_state_at_30_days_sums_the_parts_the_budget_counts():
    from bench import soak

    fits = {
        "state.tables.t.bytes": {"at_30_days": 2.0},  # live files, kept the rows' 7 days
        "state.tables.t.replaced_bytes": {"at_30_days": 1.0},  # kept the history's day
        "state.tables.t.disk_bytes": {"at_30_days": 30.0},  # both, on one line: not added
        "state.tables.t.log_bytes": {"at_30_days": 1.0},
        "state.tables.t.files": {"at_30_days": 100.0},  # a count, not bytes
        "state.spark_checkpoints.flows/A_to_B/replication.bytes": {"at_30_days": 2.0},
        "state.files.flows/A_to_B/checkpoint-segments.json": {"at_30_days": 0.5},
        "state.state_bytes": {"at_30_days": 99.0},  # the whole folder: not added twice
        "topics.mm2-metrics.A.internal": {"at_30_days": 50.0},  # on the brokers
    }
    assert soak.our_state_at_30_days(fits) == 6.5
