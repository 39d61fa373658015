"""The stale-data policy without Kafka: settings, per-record decisions, outage caps, events."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.config.stale import (
    PartitionSkips,
    SkipPolicy,
    TargetSkips,
    keep,
    resume,
    skip_event_fields,
    split_stale,
)
from mirror_lib.errors import ConfigError
from mirror_lib.mm2.policy import make_policy
from mirror_lib.tables.decode import RawRecord, decode_records
from mirror_lib.tables.run_metrics import skip_totals

BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
}
NOW = 1_800_000_000_000
OLD = NOW - 3_600_000  # an hour old
FRESH = NOW - 100


def settings(**props: str):
    return parse_config({**BASE, **props}).flow("A->B").settings


@dataclass
class Msg:
    """Just what the policy reads of a confluent_kafka Message."""

    off: int
    ts: int
    size: int = 10

    def offset(self) -> int:
        return self.off

    def timestamp(self) -> tuple[int, int]:
        return (1, self.ts)

    def key(self) -> bytes | None:
        return None

    def value(self) -> bytes:
        return b"x" * self.size


# --- settings ------------------------------------------------------------------------------


def test_off_by_default():
    s = settings()
    assert (s.skip_older_than_ms, s.skip_max_records, s.skip_max_bytes) == (0, 0, 0)
    assert not SkipPolicy.from_settings(s).applies_to("prices")


def test_per_flow_and_per_topic_settings():
    s = settings(**{
        "A->B.mirror.on.gap": "skip",
        "A->B.mirror.skip.older.than.ms": "60000",
        "A->B.mirror.skip.max.records": "5",
        "mirror.skip.max.bytes": "1000",
        "A->B.mirror.skip.topics": r"prices\..*, telemetry",
    })  # fmt: skip
    policy = SkipPolicy.from_settings(s)
    assert (policy.older_than_ms, policy.max_records, policy.max_bytes) == (60000, 5, 1000)
    assert policy.applies_to("prices.eu") and policy.applies_to("telemetry")
    assert not policy.applies_to("orders") and not policy.applies_to("telemetry2")
    assert "mirror.skip.older.than.ms" in s.describe()


def test_refused_with_on_gap_fail_naming_both_keys():
    with pytest.raises(ConfigError) as err:
        settings(**{"mirror.skip.older.than.ms": "60000"})
    text = str(err.value)
    assert "A->B.mirror.skip.older.than.ms = '60000'" in text
    assert "mirror.on.gap = fail (the default)" in text and "mirror.on.gap = skip" in text
    with pytest.raises(ConfigError, match=r"mirror.on.gap = fail, which promises"):
        settings(**{"mirror.skip.older.than.ms": "1", "A->B.mirror.on.gap": "fail"})


def test_a_disabled_flow_is_not_checked():
    props = {**BASE, "mirror.skip.older.than.ms": "60000", "A->B.mirror.on.gap": "skip"}
    config = parse_config(props)  # B->A is not enabled: its on.gap=fail does not matter
    assert config.flow("B->A").settings.skip_older_than_ms == 60000


@pytest.mark.parametrize("key", ["mirror.skip.max.records", "mirror.skip.max.bytes"])
def test_a_cap_without_the_policy_is_refused(key):
    with pytest.raises(ConfigError, match=f"A->B.{key} = '3'.*set mirror.skip.older.than.ms"):
        settings(**{key: "3"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mirror.skip.older.than.ms", "-1"),
        ("mirror.skip.older.than.ms", "1h"),
        ("mirror.skip.max.records", "-5"),
        ("mirror.skip.topics", "(unclosed"),
    ],
)
def test_bad_values_are_refused(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        settings(**{key: value, "mirror.on.gap": "skip"})


# --- decisions -----------------------------------------------------------------------------

POLICY = SkipPolicy(older_than_ms=60_000, topics=())


def test_stale_means_older_than_the_threshold_at_now():
    assert POLICY.is_stale(NOW - 60_001, NOW)
    assert not POLICY.is_stale(NOW - 60_000, NOW)
    assert not POLICY.is_stale(NOW + 5_000, NOW)  # a clock ahead of ours: copied
    assert not POLICY.is_stale(-1, NOW) and not POLICY.is_stale(0, NOW)  # no timestamp


def test_old_then_fresh_gives_one_range_and_the_fresh_records():
    skips = PartitionSkips(POLICY)
    msgs = [Msg(o, OLD + o) for o in range(10, 15)] + [Msg(o, FRESH) for o in range(15, 18)]
    keep, end = split_stale(skips, msgs, NOW)
    assert [m.off for m in keep] == [15, 16, 17] and end == 15
    (rng,) = skips.pending
    assert (rng.first, rng.last, rng.records, rng.bytes) == (10, 14, 5, 50)
    assert (rng.oldest_ts, rng.newest_ts) == (OLD + 10, OLD + 14)
    fields = skip_event_fields(rng, POLICY)
    assert fields["first_offset"] == 10 and fields["last_offset"] == 14
    assert fields["reason"] == "stale" and fields["older_than_ms"] == 60_000
    assert skips.commit() == [rng] and skips.pending == []


def test_ranges_span_offset_gaps_and_end_at_a_copied_record():
    skips = PartitionSkips(POLICY)
    # offset 3 is a transaction marker (never a record): the range goes on across it
    msgs = [Msg(1, OLD), Msg(2, OLD), Msg(4, OLD), Msg(5, FRESH), Msg(6, OLD)]
    keep, end = split_stale(skips, msgs, NOW)
    assert [m.off for m in keep] == [5] and end == 7
    assert [(r.first, r.last, r.records) for r in skips.pending] == [(1, 4, 3), (6, 6, 1)]
    skips.commit()
    split_stale(skips, [Msg(7, OLD)], NOW)  # a new transaction: a new range
    assert [(r.first, r.last) for r in skips.pending] == [(7, 7)]


def test_record_cap_bounds_one_outage_then_copies_until_fresh():
    skips = PartitionSkips(SkipPolicy(older_than_ms=60_000, max_records=3))
    msgs = [Msg(o, OLD) for o in range(6)]
    keep, end = split_stale(skips, msgs, NOW)
    assert [m.off for m in keep] == [3, 4, 5] and end == 3
    assert skips.capped and skips.pending[0].records == 3
    skips.commit()
    # still the same outage in the next transaction: stale records are copied
    keep, end = split_stale(skips, [Msg(6, OLD), Msg(7, FRESH)], NOW)
    assert [m.off for m in keep] == [6, 7] and end is None
    # a fresh record was copied: the outage is over, the next stale run has a full budget
    keep, end = split_stale(skips, [Msg(o, OLD) for o in range(8, 13)], NOW)
    assert [m.off for m in keep] == [11, 12] and end == 11


def test_byte_cap():
    skips = PartitionSkips(SkipPolicy(older_than_ms=60_000, max_bytes=25))
    keep, _end = split_stale(skips, [Msg(o, OLD, size=10) for o in range(4)], NOW)
    assert [m.off for m in keep] == [2, 3]  # 10 + 10 fit, the third would make 30 > 25
    assert skips.outage_bytes == 20


def test_abort_forgets_the_transaction_and_restores_the_budget():
    skips = PartitionSkips(SkipPolicy(older_than_ms=60_000, max_records=4))
    split_stale(skips, [Msg(0, OLD), Msg(1, OLD)], NOW)
    skips.commit()
    split_stale(skips, [Msg(2, OLD), Msg(3, OLD), Msg(4, OLD)], NOW)
    assert skips.capped
    skips.abort()  # records 2.. are read again after an abort
    assert skips.pending == [] and skips.outage_records == 2 and not skips.capped
    keep, end = split_stale(skips, [Msg(2, OLD), Msg(3, OLD), Msg(4, OLD)], NOW)
    assert [m.off for m in keep] == [4] and end == 4


def test_the_next_slice_goes_on_with_the_outage_only_at_the_same_position():
    policy = SkipPolicy(older_than_ms=60_000, max_records=3)
    skips = resume("flow-key", "t", 0, 100, policy)
    split_stale(skips, [Msg(o, OLD) for o in range(100, 105)], NOW)  # 3 skipped, capped
    skips.commit()
    keep("flow-key", "t", 0, 105, skips)
    carried = resume("flow-key", "t", 0, 105, policy)
    assert carried.capped and carried.outage_records == 3
    keep_copying, end = split_stale(carried, [Msg(105, OLD)], NOW)
    assert [m.off for m in keep_copying] == [105] and end is None
    # elsewhere (another position, partition or flow): a new count
    assert not resume("flow-key", "t", 0, 200, policy).capped
    assert not resume("flow-key", "t", 1, 105, policy).capped
    assert not resume("other-key", "t", 0, 105, policy).capped


def test_a_targets_skips_cover_the_policys_topics_and_carry_to_the_next_slice():
    """What a copy task's writer keeps: a budget per covered partition, resumed and kept by
    position under the writer's key."""
    policy = SkipPolicy(older_than_ms=60_000, max_records=3, topics=(re.compile("t"),))
    first = TargetSkips("writer-key", policy)
    old = [Msg(o, OLD) for o in range(100, 105)]
    assert first.split(("u", 0), 100, old, NOW) == (old, None)  # not a covered topic
    assert first.split(("t", 0), 100, [], NOW) == ([], None) and not first.by_tp
    copy, end = first.split(("t", 0), 100, old, NOW)
    assert [m.off for m in copy] == [103, 104] and end == 103
    first.commit()
    first.keep({("t", 0): 105, ("t", 1): 7})
    second = TargetSkips("writer-key", policy)
    second.split(("t", 0), 105, [Msg(105, OLD)], NOW)
    assert second.by_tp[("t", 0)].capped  # the same outage goes on


# --- accounting ----------------------------------------------------------------------------


def skip_event(records: int, ts_ms: int, flow: str = "A->B") -> dict:
    rng_fields = {
        "first_offset": 10, "last_offset": 9 + records, "records": records,
        "bytes": records * 100, "oldest_ts_ms": OLD, "newest_ts_ms": OLD + 5, "reason": "stale",
        "action": "skip", "older_than_ms": 60000,
    }  # fmt: skip
    where = {"topic": "prices", "remote_topic": "A.prices", "partition": 2}
    flow_fields = {"type": "skip", "flow": flow, "source": "A", "target": "B", "ts_ms": ts_ms}
    return {**flow_fields, **where, **rng_fields}


def test_skip_events_become_flow_events_rows():
    value = json.dumps(skip_event(5, NOW)).encode()
    record = RawRecord("mm2-metrics.A.internal", 0, 7, b"A.prices:2", value, NOW)
    policy = make_policy("DefaultReplicationPolicy")
    tables, errors = decode_records([record], cluster="B", policy=policy)
    assert errors == 0
    (row,) = tables["flow_events"].to_pylist()
    assert (row["type"], row["flow"], row["topic"], row["partition"]) == (
        "skip",
        "A->B",
        "prices",
        2,
    )
    assert (row["reason"], row["action"]) == ("stale", "skip")
    assert json.loads(row["details"])["last_offset"] == 14
    assert tables["replication_metrics"].num_rows == 0


def test_skip_totals_count_the_window_and_the_flows():
    def row(records: int, ms: int, flow: str = "A->B", kind: str = "skip") -> dict:
        ts = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
        return {"type": kind, "flow": flow, "ts": ts, "_ms": ms,
                "details": json.dumps(skip_event(records, ms, flow))}  # fmt: skip

    rows = [
        row(5, NOW),
        row(7, NOW + 1000),
        row(100, NOW - 10_000),  # before the window
        row(50, NOW, flow="B->A"),  # another flow
        row(9, NOW, kind="gap"),
    ]
    totals = skip_totals(rows, ["A->B"], NOW - 1, NOW + 2000)
    assert totals == {"records_skipped": 12.0, "bytes_skipped": 1200.0, "skips": 2.0}
