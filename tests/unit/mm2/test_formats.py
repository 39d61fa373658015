"""Byte-exact tests of mirror_lib.mm2.formats against the worked examples of
docs/mm2-reference.md#wire-formats."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mirror_lib
from mirror_lib.errors import DecodeError
from mirror_lib.mm2.formats import Checkpoint, Heartbeat, OffsetSync

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
# At most 4 UTF-8 bytes per code point, so 8191 characters always fit in 32767 bytes.
TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=8191)
SHORT_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
# Ill-typed field values, typed Any so the bad records below still type-check.
NONE: Any = None
TRUE: Any = True
FLOAT: Any = 1.0
BYTES: Any = b"t"

Record = OffsetSync | Checkpoint | Heartbeat
Kind = type[OffsetSync] | type[Checkpoint] | type[Heartbeat]

# --- Worked examples from docs/mm2-reference.md#wire-formats, hex copied verbatim. -----------

OFFSET_SYNC = OffsetSync("t", 0, 5, 7)
OFFSET_SYNC_KEY = bytes.fromhex("00 01 74  00 00 00 00")
OFFSET_SYNC_VALUE = bytes.fromhex("00 00 00 00 00 00 00 05  00 00 00 00 00 00 00 07")

CHECKPOINT = Checkpoint("g", "t", 0, 5, 7, "")
CHECKPOINT_KEY = bytes.fromhex("00 01 67  00 01 74  00 00 00 00")
CHECKPOINT_VALUE = bytes.fromhex("00 00  00 00 00 00 00 00 00 05  00 00 00 00 00 00 00 07  00 00")

CHECKPOINT_LARGE = Checkpoint("consumer-group-1", "primary.test-topic-1", 3, 1000, 998, "")
CHECKPOINT_LARGE_KEY = bytes.fromhex(
    "00 10 63 6f 6e 73 75 6d 65 72 2d 67 72 6f 75 70 2d 31"
    " 00 14 70 72 69 6d 61 72 79 2e 74 65 73 74 2d 74 6f 70 69 63 2d 31"
    " 00 00 00 03"
)
CHECKPOINT_LARGE_VALUE = bytes.fromhex(
    "00 00  00 00 00 00 00 00 03 e8  00 00 00 00 00 00 03 e6  00 00"
)

HEARTBEAT = Heartbeat("A", "B", 1700000000000)
HEARTBEAT_KEY = bytes.fromhex("00 01 41  00 01 42")
HEARTBEAT_VALUE = bytes.fromhex("00 00  00 00 01 8b cf e5 68 00")

EXAMPLES = [
    pytest.param(OFFSET_SYNC, OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE, id="offset-sync"),
    pytest.param(CHECKPOINT, CHECKPOINT_KEY, CHECKPOINT_VALUE, id="checkpoint"),
    pytest.param(CHECKPOINT_LARGE, CHECKPOINT_LARGE_KEY, CHECKPOINT_LARGE_VALUE, id="cp-large"),
    pytest.param(HEARTBEAT, HEARTBEAT_KEY, HEARTBEAT_VALUE, id="heartbeat"),
]


def test_example_sizes_match_reference() -> None:
    assert (len(OFFSET_SYNC_KEY), len(OFFSET_SYNC_VALUE)) == (7, 16)
    assert (len(CHECKPOINT_KEY), len(CHECKPOINT_VALUE)) == (10, 20)
    assert (len(CHECKPOINT_LARGE_KEY), len(CHECKPOINT_LARGE_VALUE)) == (44, 20)
    assert (len(HEARTBEAT_KEY), len(HEARTBEAT_VALUE)) == (6, 10)


@pytest.mark.parametrize(("record", "key", "value"), EXAMPLES)
def test_encode_matches_reference(record: Record, key: bytes, value: bytes) -> None:
    assert record.key() == key
    assert record.value() == value


@pytest.mark.parametrize(("record", "key", "value"), EXAMPLES)
def test_decode_matches_reference(record: Record, key: bytes, value: bytes) -> None:
    assert type(record).decode(key, value) == record


@pytest.mark.parametrize(("record", "key", "value"), EXAMPLES)
def test_trailing_bytes_ignored_on_read(record: Record, key: bytes, value: bytes) -> None:
    assert type(record).decode(key + b"\xff\x00", value + b"\x01\x02\x03") == record


def test_checkpoint_metadata_defaults_to_empty_string() -> None:
    assert Checkpoint("g", "t", 0, 5, 7).value() == CHECKPOINT_VALUE


def test_decode_accepts_bytearray_and_memoryview() -> None:
    assert OffsetSync.decode(bytearray(OFFSET_SYNC_KEY), memoryview(OFFSET_SYNC_VALUE)) == (
        OFFSET_SYNC
    )


# --- Round trips. -----------------------------------------------------------------------------


@given(topic=TEXT, partition=INT32, upstream=INT64, downstream=INT64)
def test_offset_sync_round_trip(topic: str, partition: int, upstream: int, downstream: int) -> None:
    sync = OffsetSync(topic, partition, upstream, downstream)
    key, value = sync.key(), sync.value()
    assert len(value) == 16
    assert OffsetSync.decode(key, value) == sync


@given(group=TEXT, topic=TEXT, partition=INT32, upstream=INT64, downstream=INT64, metadata=TEXT)
def test_checkpoint_round_trip(
    group: str, topic: str, partition: int, upstream: int, downstream: int, metadata: str
) -> None:
    cp = Checkpoint(group, topic, partition, upstream, downstream, metadata)
    key, value = cp.key(), cp.value()
    assert value[:2] == b"\x00\x00"
    assert Checkpoint.decode(key, value) == cp


@given(source=SHORT_TEXT, target=SHORT_TEXT, timestamp=INT64)
def test_heartbeat_round_trip(source: str, target: str, timestamp: int) -> None:
    hb = Heartbeat(source, target, timestamp)
    key, value = hb.key(), hb.value()
    assert len(value) == 10
    assert Heartbeat.decode(key, value) == hb


def test_round_trip_max_length_non_ascii_string() -> None:
    topic = "é" * 16383 + "x"  # 32767 UTF-8 bytes exactly
    sync = OffsetSync(topic, 1, 2, 3)
    assert sync.key()[:2] == b"\x7f\xff"
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


# --- Bad bytes. -------------------------------------------------------------------------------

TRUNCATIONS = [
    (kind, part, good_key, good_value, cut)
    for kind, good_key, good_value in [
        (OffsetSync, OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE),
        (Checkpoint, CHECKPOINT_LARGE_KEY, CHECKPOINT_LARGE_VALUE),
        (Checkpoint, CHECKPOINT_KEY, CHECKPOINT_VALUE[:-2] + b"\x00\x02hi"),  # metadata="hi"
        (Heartbeat, HEARTBEAT_KEY, HEARTBEAT_VALUE),
    ]
    for part, whole in [("key", good_key), ("value", good_value)]
    for cut in range(len(whole))
]


@pytest.mark.parametrize(("kind", "part", "key", "value", "cut"), TRUNCATIONS)
def test_truncated_bytes_raise(kind: Kind, part: str, key: bytes, value: bytes, cut: int) -> None:
    if part == "key":
        key = key[:cut]
    else:
        value = value[:cut]
    with pytest.raises(DecodeError, match=rf"^{kind.__name__} {part}: field '\w+' truncated"):
        kind.decode(key, value)


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [
        (OffsetSync, None, OFFSET_SYNC_VALUE),
        (OffsetSync, OFFSET_SYNC_KEY, None),
        (Checkpoint, None, CHECKPOINT_VALUE),
        (Checkpoint, CHECKPOINT_KEY, None),
        (Heartbeat, None, HEARTBEAT_VALUE),
        (Heartbeat, HEARTBEAT_KEY, None),
    ],
)
def test_none_key_or_value_raises(kind: Kind, key: bytes | None, value: bytes | None) -> None:
    part = "key" if key is None else "value"
    with pytest.raises(DecodeError, match=rf"^{kind.__name__} {part}: is None"):
        kind.decode(key, value)


@pytest.mark.parametrize(
    ("kind", "key", "value", "field"),
    [
        (OffsetSync, b"\xff\xff" + OFFSET_SYNC_KEY[3:], OFFSET_SYNC_VALUE, "topic"),
        (Checkpoint, b"\x80\x00" + CHECKPOINT_KEY[3:], CHECKPOINT_VALUE, "group"),
        (Checkpoint, CHECKPOINT_KEY[:3] + b"\xff\xfe" + b"t" * 6, CHECKPOINT_VALUE, "topic"),
        (Checkpoint, CHECKPOINT_KEY, CHECKPOINT_VALUE[:-2] + b"\xff\xff", "metadata"),
        (Heartbeat, b"\xff\xff\x00\x01B", HEARTBEAT_VALUE, "sourceClusterAlias"),
        (Heartbeat, b"\x00\x01A\xff\xff", HEARTBEAT_VALUE, "targetClusterAlias"),
    ],
)
def test_negative_string_length_raises(kind: Kind, key: bytes, value: bytes, field: str) -> None:
    with pytest.raises(DecodeError, match=rf"^{kind.__name__} \w+: field '{field}' has negative"):
        kind.decode(key, value)


@pytest.mark.parametrize("version", [1, -1, 0x7FFF, 0x0100])
@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [(Checkpoint, CHECKPOINT_KEY, CHECKPOINT_VALUE), (Heartbeat, HEARTBEAT_KEY, HEARTBEAT_VALUE)],
)
def test_unknown_version_raises(kind: Kind, key: bytes, value: bytes, version: int) -> None:
    bad = struct.pack(">h", version) + value[2:]
    with pytest.raises(DecodeError, match=rf"^{kind.__name__} value: unknown version {version}"):
        kind.decode(key, bad)


@pytest.mark.parametrize(
    ("kind", "key", "value", "where"),
    [
        (OffsetSync, b"\x00\x01\xff\x00\x00\x00\x00", OFFSET_SYNC_VALUE, "key: field 'topic'"),
        (
            Checkpoint,
            b"\x00\x02\xc3\x28" + CHECKPOINT_KEY[3:],
            CHECKPOINT_VALUE,
            "key: field 'group'",
        ),
        (
            Checkpoint,
            CHECKPOINT_KEY,
            CHECKPOINT_VALUE[:-2] + b"\x00\x01\x80",
            "value: field 'metadata'",
        ),
        (
            Heartbeat,
            b"\x00\x01A\x00\x03\xed\xa0\x80",
            HEARTBEAT_VALUE,
            "key: field 'targetClusterAlias'",
        ),
    ],
)
def test_invalid_utf8_raises(kind: Kind, key: bytes, value: bytes, where: str) -> None:
    with pytest.raises(DecodeError, match=rf"^{kind.__name__} {where} is not valid UTF-8"):
        kind.decode(key, value)


def test_decode_error_is_not_transient_runtime_error() -> None:
    with pytest.raises(DecodeError) as info:
        OffsetSync.decode(b"", OFFSET_SYNC_VALUE)
    assert not info.value.transient


# --- Encode validation. -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "method", "field"),
    [
        (OffsetSync("t", 2**31, 0, 0), "key", "OffsetSync.partition"),
        (OffsetSync("t", -(2**31) - 1, 0, 0), "key", "OffsetSync.partition"),
        (OffsetSync("t", 0, 2**63, 0), "value", "OffsetSync.upstream_offset"),
        (OffsetSync("t", 0, 0, -(2**63) - 1), "value", "OffsetSync.downstream_offset"),
        (OffsetSync("t", TRUE, 0, 0), "key", "OffsetSync.partition"),
        (OffsetSync("t", 0, FLOAT, 0), "value", "OffsetSync.upstream_offset"),
        (OffsetSync(NONE, 0, 0, 0), "key", "OffsetSync.topic"),
        (OffsetSync(BYTES, 0, 0, 0), "key", "OffsetSync.topic"),
        (OffsetSync("x" * 32768, 0, 0, 0), "key", "OffsetSync.topic"),
        (OffsetSync("é" * 16384, 0, 0, 0), "key", "OffsetSync.topic"),  # 32768 bytes
        (OffsetSync("\ud800", 0, 0, 0), "key", "OffsetSync.topic"),  # lone surrogate
        (Checkpoint(NONE, "t", 0, 0, 0), "key", "Checkpoint.group"),
        (Checkpoint("g", NONE, 0, 0, 0), "key", "Checkpoint.topic"),
        (Checkpoint("g", "t", 2**31, 0, 0), "key", "Checkpoint.partition"),
        (Checkpoint("g", "t", 0, 2**63, 0), "value", "Checkpoint.upstream_offset"),
        (Checkpoint("g", "t", 0, 0, 2**63), "value", "Checkpoint.downstream_offset"),
        (Checkpoint("g", "t", 0, 0, 0, NONE), "value", "Checkpoint.metadata"),
        (Checkpoint("g", "t", 0, 0, 0, "m" * 32768), "value", "Checkpoint.metadata"),
        (Heartbeat(NONE, "B", 0), "key", "Heartbeat.source_cluster_alias"),
        (Heartbeat("A", "b" * 32768, 0), "key", "Heartbeat.target_cluster_alias"),
        (Heartbeat("A", "B", 2**63), "value", "Heartbeat.timestamp_ms"),
        (Heartbeat("A", "B", -(2**63) - 1), "value", "Heartbeat.timestamp_ms"),
    ],
)
def test_encode_validation_raises_value_error(record: Record, method: str, field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field}: "):
        getattr(record, method)()


def test_encode_accepts_range_limits() -> None:
    sync = OffsetSync("x" * 32767, -(2**31), -(2**63), 2**63 - 1)
    assert OffsetSync.decode(sync.key(), sync.value()) == sync
    assert OffsetSync("t", 2**31 - 1, 0, 0).key() == b"\x00\x01t\x7f\xff\xff\xff"


def test_one_partition_type() -> None:
    """``mm2.formats.TP`` is the only (topic, partition) type: no module defines its own."""
    root = Path(mirror_lib.__file__).parent
    own = re.compile(r"^\w+(: TypeAlias)? = tuple\[str, int\]$", re.M)
    defined = sorted(
        str(path.relative_to(root)) for path in root.rglob("*.py") if own.search(path.read_text())
    )
    assert defined == ["mm2/formats.py"]
