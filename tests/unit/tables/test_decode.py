"""Tests of mirror_lib.tables.decode: raw internal-topic records -> rows of the five Delta
tables."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror_lib.errors import ConfigError
from mirror_lib.mm2.formats import Checkpoint, Heartbeat, OffsetSync
from mirror_lib.mm2.policy import DefaultReplicationPolicy, make_policy
from mirror_lib.tables.decode import RawRecord, classify, decode_records
from mirror_lib.tables.schemas import SCHEMAS

POLICY = make_policy("DefaultReplicationPolicy")
UNDERSCORE = make_policy("DefaultReplicationPolicy", separator="__")
TS = 1_700_000_000_000

# --- Worked examples from docs/mm2-reference.md#wire-formats, hex copied verbatim. -----------

SYNC_KEY = bytes.fromhex("00 01 74  00 00 00 00")
SYNC_VALUE = bytes.fromhex("00 00 00 00 00 00 00 05  00 00 00 00 00 00 00 07")
CP_SMALL_KEY = bytes.fromhex("00 01 67  00 01 74  00 00 00 00")
CP_SMALL_VALUE = bytes.fromhex("00 00  00 00 00 00 00 00 00 05  00 00 00 00 00 00 00 07  00 00")
CP_KEY = bytes.fromhex(
    "00 10 63 6f 6e 73 75 6d 65 72 2d 67 72 6f 75 70 2d 31"
    "00 14 70 72 69 6d 61 72 79 2e 74 65 73 74 2d 74 6f 70 69 63 2d 31"
    "00 00 00 03"
)
CP_VALUE = bytes.fromhex("00 00  00 00 00 00 00 00 03 e8  00 00 00 00 00 00 03 e6  00 00")
HB_KEY = bytes.fromhex("00 01 41  00 01 42")
HB_VALUE = bytes.fromhex("00 00  00 00 01 8b cf e5 68 00")


def rec(topic: str, key: bytes | None, value: bytes | None, offset: int = 0) -> RawRecord:
    return RawRecord(topic, 0, offset, key, value, TS)


def jrec(event: dict[str, Any], offset: int = 0) -> RawRecord:
    value = json.dumps(event).encode()
    return rec("mm2-metrics.A.internal", b"A.orders:1", value, offset)


def decode(*records: RawRecord, policy: Any = POLICY, **kw: Any) -> tuple[dict[str, Any], int]:
    tables, errors = decode_records(records, cluster="B", policy=policy, **kw)
    assert set(tables) == set(SCHEMAS)
    for name, table in tables.items():
        assert table.schema.equals(SCHEMAS[name]), name
    return {name: t.to_pylist() for name, t in tables.items()}, errors


def ts(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def origin(topic: str, offset: int = 0) -> dict[str, Any]:
    return {
        "cluster": "B",
        "kafka_topic": topic,
        "kafka_partition": 0,
        "kafka_offset": offset,
        "record_ts": ts(TS),
    }


# --- classify -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "kind"),
    [
        ("mm2-offset-syncs.A.internal", "offset_syncs"),
        ("A.checkpoints.internal", "checkpoints"),
        ("heartbeats", "heartbeats"),
        ("A.heartbeats", "heartbeats"),
        ("B.A.heartbeats", "heartbeats"),
        ("mm2-metrics.A.internal", "metrics"),
        ("orders", None),
        ("A.orders", None),
        ("mm2-offsets.A.internal", None),
        ("mm2-offset-syncs__A__internal", None),
        ("A__checkpoints__internal", None),
    ],
)
def test_classify(topic: str, kind: str | None) -> None:
    assert classify(topic, POLICY) == kind


@pytest.mark.parametrize(
    ("topic", "kind"),
    [
        ("mm2-offset-syncs__B__internal", "offset_syncs"),
        ("A__checkpoints__internal", "checkpoints"),
        ("A__heartbeats", "heartbeats"),
        ("mm2-metrics.A.internal", "metrics"),
        ("mm2-offset-syncs.B.internal", None),
        ("A.checkpoints.internal", None),
    ],
)
def test_classify_custom_separator(topic: str, kind: str | None) -> None:
    assert classify(topic, UNDERSCORE) == kind


# --- MM2 records ----------------------------------------------------------------------------


def test_offset_sync_example_location_target() -> None:
    rows, errors = decode(rec("mm2-offset-syncs.A.internal", SYNC_KEY, SYNC_VALUE))
    assert errors == 0
    assert rows["offset_syncs"] == [
        {
            "flow": "A->B",
            "source": "A",
            "target": "B",
            "topic": "t",
            "remote_topic": "A.t",
            "partition": 0,
            "upstream_start": 5,
            "upstream_end": 5,
            "downstream_start": 7,
            "downstream_end": 7,
            "kind": "point",
            "batch_id": None,
            **origin("mm2-offset-syncs.A.internal"),
        }
    ]
    assert all(not v for k, v in rows.items() if k != "offset_syncs")


def test_offset_sync_location_source() -> None:
    rows, _ = decode(
        rec("mm2-offset-syncs.C.internal", SYNC_KEY, SYNC_VALUE), syncs_location="source"
    )
    row = rows["offset_syncs"][0]
    got = (row["flow"], row["source"], row["target"], row["remote_topic"])
    assert got == ("B->C", "B", "C", "B.t")


def test_bad_syncs_location_raises() -> None:
    with pytest.raises(ConfigError):
        decode_records([], cluster="B", policy=POLICY, syncs_location="middle")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (CP_SMALL_KEY, CP_SMALL_VALUE),
        (CP_KEY, CP_VALUE),
    ],
)
def test_checkpoint_examples(key: bytes, value: bytes) -> None:
    rows, errors = decode(rec("primary.checkpoints.internal", key, value))
    assert errors == 0
    cp = Checkpoint.decode(key, value)
    assert rows["checkpoints"] == [
        {
            "source": "primary",
            "target": "B",
            "group_id": cp.group,
            "topic": cp.topic,
            "partition": cp.partition,
            "upstream_offset": cp.upstream_offset,
            "downstream_offset": cp.downstream_offset,
            "metadata": "",
            **origin("primary.checkpoints.internal"),
        }
    ]


def test_checkpoint_larger_example() -> None:
    rows, _ = decode(rec("primary.checkpoints.internal", CP_KEY, CP_VALUE))
    row = rows["checkpoints"][0]
    assert row["group_id"] == "consumer-group-1"
    assert row["topic"] == "primary.test-topic-1"
    assert (row["partition"], row["upstream_offset"], row["downstream_offset"]) == (3, 1000, 998)
    assert (row["source"], row["target"]) == ("primary", "B")


def test_checkpoint_alias_with_separator() -> None:
    rows, _ = decode(rec("x.y.checkpoints.internal", CP_KEY, CP_VALUE))
    assert rows["checkpoints"][0]["source"] == "x.y"


@pytest.mark.parametrize(
    ("topic", "hops"), [("heartbeats", 0), ("A.heartbeats", 1), ("B.A.heartbeats", 2)]
)
def test_heartbeat_example_and_hops(topic: str, hops: int) -> None:
    rows, errors = decode(rec(topic, HB_KEY, HB_VALUE))
    assert errors == 0
    assert rows["heartbeats"] == [
        {"source": "A", "target": "B", "heartbeat_ts": ts(TS), "hops": hops, **origin(topic)}
    ]


def test_heartbeat_hops_identity_policy() -> None:
    identity = make_policy("IdentityReplicationPolicy", source_cluster_alias="A")
    rows, _ = decode(rec("A.heartbeats", HB_KEY, HB_VALUE), policy=identity)
    assert rows["heartbeats"][0]["hops"] == 1


def test_custom_separator_policy() -> None:
    syncs = OffsetSync("orders", 2, 10, 4)
    cp = Checkpoint("g", "A__orders", 2, 10, 4, "m")
    hb = Heartbeat("X", "A", TS)
    rows, errors = decode(
        rec("mm2-offset-syncs__A__internal", syncs.key(), syncs.value()),
        rec("A__checkpoints__internal", cp.key(), cp.value()),
        rec("A__X__heartbeats", hb.key(), hb.value()),
        policy=UNDERSCORE,
    )
    assert errors == 0
    sync = rows["offset_syncs"][0]
    assert (sync["flow"], sync["source"], sync["remote_topic"]) == ("A->B", "A", "A__orders")
    assert (rows["checkpoints"][0]["source"], rows["checkpoints"][0]["metadata"]) == ("A", "m")
    assert rows["heartbeats"][0]["hops"] == 2


def test_separator_without_internal_separator() -> None:
    policy = DefaultReplicationPolicy("__", internal_separator_enabled=False)
    cp = Checkpoint("g", "A__orders", 0, 1, 1)
    rows, errors = decode(rec("A.checkpoints.internal", cp.key(), cp.value()), policy=policy)
    assert (errors, rows["checkpoints"][0]["source"]) == (0, "A")


# --- our JSON metrics records ---------------------------------------------------------------

FLOW = {"flow": "A->B", "source": "A", "target": "B", "ts_ms": TS + 5}
SUMMARY = {"min": 1.0, "avg": 2.5, "max": 9, "p50": 2.0, "p99": 8.5}


def test_batch_record() -> None:
    event = {
        "type": "batch", **FLOW, "topic": "orders", "remote_topic": "A.orders", "partition": 1,
        "batch_id": 7, "query_id": "q", "slot": 2, "records": 10, "bytes": 1000,
        "upstream_first": 100, "upstream_last": 109, "downstream_first": 50,
        "downstream_last": 59, "lag": 3, "latency_ms": SUMMARY, "age_ms": {"min": 4},
    }  # fmt: skip
    rows, errors = decode(jrec(event))
    assert errors == 0
    assert rows["replication_metrics"] == [
        {
            "flow": "A->B", "source": "A", "target": "B", "topic": "orders",
            "remote_topic": "A.orders", "partition": 1, "batch_id": 7, "query_id": "q", "slot": 2,
            "ts": ts(TS + 5), "records": 10, "bytes": 1000, "upstream_first": 100,
            "upstream_last": 109, "downstream_first": 50, "downstream_last": 59, "lag": 3,
            "latency_ms_min": 1.0, "latency_ms_avg": 2.5, "latency_ms_max": 9.0,
            "latency_ms_p50": 2.0, "latency_ms_p99": 8.5,
            "age_ms_min": 4.0, "age_ms_avg": None, "age_ms_max": None, "age_ms_p50": None,
            "age_ms_p99": None, **origin("mm2-metrics.A.internal"),
        }
    ]  # fmt: skip


def test_batch_record_empty_summaries_and_null_lag() -> None:
    event = {"type": "batch", **FLOW, "partition": 0, "latency_ms": {}, "lag": None}
    rows, errors = decode(jrec(event))
    row = rows["replication_metrics"][0]
    assert errors == 0
    assert row["lag"] is None and row["latency_ms_p99"] is None and row["age_ms_min"] is None


def test_segments_record() -> None:
    segs = [[0, 4, 10, 14], [5, 9, 16, 20], [12, 12, 21, 21]]
    event = {"type": "segments", **FLOW, "topic": "orders", "remote_topic": "A.orders",
             "partition": 3, "batch_id": 8, "segments": segs}  # fmt: skip
    rows, errors = decode(jrec(event, offset=42))
    assert errors == 0
    assert rows["offset_syncs"] == [
        {
            "flow": "A->B", "source": "A", "target": "B", "topic": "orders",
            "remote_topic": "A.orders", "partition": 3, "upstream_start": us, "upstream_end": ue,
            "downstream_start": ds, "downstream_end": de, "kind": "segment", "batch_id": 8,
            **origin("mm2-metrics.A.internal", 42),
        }
        for us, ue, ds, de in segs
    ]  # fmt: skip


def test_gap_record() -> None:
    event = {"type": "gap", **FLOW, "topic": "orders", "remote_topic": "A.orders",
             "partition": 2, "expected_offset": 5, "available_start": 9, "available_end": 20,
             "reason": "retention", "action": "skip"}  # fmt: skip
    record = jrec(event)
    rows, errors = decode(record)
    assert errors == 0
    assert rows["flow_events"] == [
        {
            "type": "gap", "flow": "A->B", "ts": ts(TS + 5), "topic": "orders", "partition": 2,
            "reason": "retention", "action": "skip", "details": record.value.decode(),
            **origin("mm2-metrics.A.internal"),
        }
    ]  # fmt: skip
    assert json.loads(rows["flow_events"][0]["details"]) == event


@pytest.mark.parametrize("kind", ["start", "stop", "error"])
def test_flow_level_events(kind: str) -> None:
    event = {"type": kind, **FLOW, **({"error": "boom"} if kind == "error" else {})}
    rows, errors = decode(jrec(event))
    row = rows["flow_events"][0]
    assert errors == 0
    assert (row["type"], row["flow"], row["topic"], row["partition"]) == (kind, "A->B", None, None)
    assert row["reason"] == ("boom" if kind == "error" else None)


def test_unknown_metrics_type_is_ignored() -> None:
    rows, errors = decode(jrec({"type": "future", **FLOW}))
    assert errors == 0 and not any(rows.values())


# --- errors, tombstones, other topics -------------------------------------------------------

BAD = [
    rec("mm2-offset-syncs.A.internal", SYNC_KEY, b"\x00\x01"),
    rec("mm2-offset-syncs.A.internal", None, SYNC_VALUE),
    rec("primary.checkpoints.internal", CP_KEY, b"\x00\x01" + CP_VALUE[2:]),  # version 1
    rec("heartbeats", b"\xff\xff", HB_VALUE),  # negative string length
    rec("heartbeats", bytes.fromhex("00 01 ff 00 01 42"), HB_VALUE),  # not UTF-8
    rec("mm2-metrics.A.internal", None, b"{not json"),
    rec("mm2-metrics.A.internal", None, b"\xff\xfe"),
    rec("mm2-metrics.A.internal", None, b"[1, 2]"),
    rec("mm2-metrics.A.internal", None, b'{"flow": "A->B"}'),
    rec("mm2-metrics.A.internal", None, None),
    jrec({"type": "batch", "partition": "one"}),
    jrec({"type": "batch", "partition": 2**31}),
    jrec({"type": "batch", "records": 2**63}),
    jrec({"type": "batch", "latency_ms": [1, 2]}),
    jrec({"type": "batch", "age_ms": {"p99": "slow"}}),
    jrec({"type": "segments", "segments": [[1, 2, 3]]}),
    jrec({"type": "segments", "segments": [[1, 2, 3, None]]}),
    jrec({"type": "segments", "segments": [[1, 2, 3, True]]}),
    jrec({"type": "segments", "segments": 5}),
    jrec({"type": "gap", "reason": 5}),
    rec("mm2-metrics.A.internal", None, b"[" * 100_000 + b"]" * 100_000),
]


def test_corrupt_records_are_counted_and_reported() -> None:
    good = rec("heartbeats", HB_KEY, HB_VALUE)
    rows, errors = decode(*BAD, good)
    assert errors == len(BAD)
    events = rows["flow_events"]
    assert len(events) == len(BAD) and {e["type"] for e in events} == {"decode_error"}
    for record, event in zip(BAD, events, strict=True):
        assert (event["topic"], event["partition"]) == (record.topic, record.partition)
        assert event["kafka_topic"] == record.topic and event["reason"]
        assert event["ts"] == ts(TS) and json.loads(event["details"])["error"] == event["reason"]
    assert len(rows["heartbeats"]) == 1
    assert not rows["offset_syncs"] and not rows["checkpoints"] and not rows["replication_metrics"]


def test_decode_error_reason_text() -> None:
    rows, _ = decode(rec("heartbeats", HB_KEY, b"\x00\x01" + HB_VALUE[2:]))
    assert "unknown version 1" in rows["flow_events"][0]["reason"]


def test_segments_record_with_one_bad_segment_adds_no_rows() -> None:
    rows, errors = decode(jrec({"type": "segments", "segments": [[1, 2, 3, 4], "x"]}))
    assert errors == 1 and not rows["offset_syncs"]


def test_tombstones_and_other_topics_are_skipped() -> None:
    records = [
        rec("mm2-offset-syncs.A.internal", SYNC_KEY, None),
        rec("A.checkpoints.internal", CP_KEY, None),
        rec("heartbeats", HB_KEY, None),
        rec("orders", b"k", b"\xff"),
        rec("mm2-offsets.A.internal", b"k", b"{}"),
    ]
    rows, errors = decode(*records)
    assert errors == 0 and not any(rows.values())


def test_unaliased_offset_syncs_topic_is_an_error() -> None:
    rows, errors = decode(rec("mm2-offset-syncs.internal", SYNC_KEY, SYNC_VALUE))
    assert errors == 1 and "alias" in rows["flow_events"][0]["reason"]


def test_negative_record_timestamp_is_null() -> None:
    record = RawRecord("heartbeats", 0, 3, HB_KEY, HB_VALUE, -1)
    rows, _ = decode(record)
    assert rows["heartbeats"][0]["record_ts"] is None


def test_empty_input_gives_empty_tables_with_exact_schemas() -> None:
    tables, errors = decode_records([], cluster="B", policy=POLICY)
    assert errors == 0
    assert list(tables) == list(SCHEMAS)
    for name, table in tables.items():
        assert table.num_rows == 0 and table.schema.equals(SCHEMAS[name])


def test_accepts_a_generator() -> None:
    gen = (rec("heartbeats", HB_KEY, HB_VALUE, i) for i in range(3))
    rows, _ = decode(*gen)
    assert [r["kafka_offset"] for r in rows["heartbeats"]] == [0, 1, 2]


TOPICS = ["mm2-offset-syncs.A.internal", "A.checkpoints.internal", "heartbeats",
          "mm2-metrics.A.internal", "orders"]  # fmt: skip
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=10,
)
KEYS = ["type", "partition", "segments", "latency_ms", "ts_ms", "reason", "batch_id", "topic"]
TYPED = st.fixed_dictionaries(
    {"type": st.sampled_from(["batch", "segments", "gap", "error"])},
    optional={k: JSONISH for k in KEYS[1:]},
).map(lambda e: json.dumps(e).encode())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(TOPICS),
            st.none() | st.binary(max_size=40),
            st.none() | st.binary(max_size=40) | TYPED,
        ),
        max_size=8,
    )
)
def test_never_raises_on_arbitrary_bytes(items: list[tuple[str, bytes | None, Any]]) -> None:
    records = [rec(t, k, v, i) for i, (t, k, v) in enumerate(items)]
    rows, errors = decode(*records)
    decode_errors = [e for e in rows["flow_events"] if e["type"] == "decode_error"]
    assert len(decode_errors) == errors
