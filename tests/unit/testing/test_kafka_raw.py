"""The raw record-batch parser and committed view, on batches built by hand."""

from __future__ import annotations

import gzip
import struct

import google_crc32c
import pytest

from tests.helpers import kafka_raw
from tests.helpers.kafka_raw import (
    ABORT,
    COMMIT,
    RawKafkaError,
    committed_view,
    parse_batch,
    parse_batches,
    zigzag,
)


def record(offset_delta: int, key: bytes | None, value: bytes | None, headers=()) -> bytes:
    def field(b: bytes | None) -> bytes:
        return zigzag(-1) if b is None else zigzag(len(b)) + b

    body = b"\x00" + zigzag(offset_delta * 10) + zigzag(offset_delta) + field(key) + field(value)
    body += zigzag(len(headers)) + b"".join(field(k.encode()) + field(v) for k, v in headers)
    return zigzag(len(body)) + body


def batch(
    base: int,
    records: list[bytes],
    *,
    pid: int = -1,
    epoch: int = -1,
    txn: bool = False,
    control: bool = False,
    gzip_body: bool = False,
    magic: int = 2,
) -> bytes:
    attributes = (0x10 if txn else 0) | (0x20 if control else 0) | (1 if gzip_body else 0)
    body = b"".join(records)
    if gzip_body:
        body = gzip.compress(body)
    after_crc = (
        struct.pack(
            ">hiqqqhii", attributes, len(records) - 1, 1000, 1000, pid, epoch, 0, len(records)
        )
        + body
    )
    head = (
        struct.pack(">iB", 0, magic) + struct.pack(">I", google_crc32c.value(after_crc)) + after_crc
    )
    return struct.pack(">qi", base, len(head)) + head


def marker(base: int, pid: int, kind: int) -> bytes:
    key = struct.pack(">hh", 0, kind)
    return batch(base, [record(0, key, struct.pack(">hi", 0, 0))], pid=pid, epoch=0, txn=True,
                 control=True)  # fmt: skip


def test_the_batch_checksum_is_crc32c_with_its_published_check_value():
    assert google_crc32c.value(b"123456789") == 0xE3069283


def test_a_plain_batch_parses_keys_values_headers_and_offsets():
    data = batch(5, [record(0, b"k0", b"v0", [("h", b"x")]), record(1, None, b"v1")])
    b = parse_batch(data)
    assert (b.base_offset, b.last_offset, b.transactional, b.control) == (5, 6, False, False)
    assert [(r.offset, r.key, r.value) for r in b.records] == [(5, b"k0", b"v0"), (6, None, b"v1")]
    assert b.records[0].headers == (("h", b"x"),)
    assert b.records[1].timestamp == 1010


def test_gzip_batches_are_decompressed():
    b = parse_batch(batch(0, [record(0, b"k", b"v")], gzip_body=True))
    assert [r.value for r in b.records] == [b"v"]


def test_a_corrupt_batch_and_other_magics_are_refused():
    data = bytearray(batch(0, [record(0, b"k", b"v")]))
    data[-1] ^= 0xFF
    with pytest.raises(RawKafkaError, match="CRC"):
        parse_batch(bytes(data))
    with pytest.raises(RawKafkaError, match="magic 1"):
        parse_batch(batch(0, [record(0, b"k", b"v")], magic=1))


def test_a_truncated_last_batch_is_ignored():
    data = batch(0, [record(0, b"a", b"1")]) + batch(1, [record(0, b"b", b"2")])
    assert [b.base_offset for b in parse_batches(data[:-3])] == [0]


def test_committed_view_drops_aborted_and_open_transactions_and_keeps_committed_ones():
    data = b"".join([
        batch(0, [record(0, None, b"c0"), record(1, None, b"c1")], pid=7, epoch=0, txn=True),
        batch(2, [record(0, None, b"p0")]),  # not transactional: always visible
        batch(3, [record(0, None, b"a0")], pid=8, epoch=0, txn=True),
        marker(4, 7, COMMIT),
        marker(5, 8, ABORT),
        batch(6, [record(0, None, b"x0")], pid=8, epoch=1, txn=True),
        marker(7, 8, COMMIT),
        batch(8, [record(0, None, b"open")], pid=7, epoch=0, txn=True),
    ])  # fmt: skip
    batches = parse_batches(data)
    assert [m.kind for b in batches for m in b.markers] == [COMMIT, ABORT, COMMIT]
    view = committed_view(batches)
    assert [(r.offset, r.value) for r in view] == [(0, b"c0"), (1, b"c1"), (2, b"p0"), (6, b"x0")]


def test_an_unknown_control_type_is_an_error():
    with pytest.raises(RawKafkaError, match="unknown type"):
        committed_view(parse_batches(batch(0, [record(0, None, b"a")], pid=1, txn=True) +
                                     marker(1, 1, 5)))  # fmt: skip


class ScriptedConnection:
    """Stands in for kafka_raw.Connection: one partition, leader 0, fetches answered in turn."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        self.answers, self.offsets = answers, []

    def __call__(self, host: str, port: int, timeout_s: float) -> ScriptedConnection:
        return self

    def __enter__(self) -> ScriptedConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return {kafka_raw.API_FETCH: (0, 11)}

    def metadata(self, topic: str) -> tuple[dict, dict]:
        return {0: ("127.0.0.1", 9)}, {0: 0}

    def fetch(self, topic: str, partition: int, offset: int) -> tuple[int, bytes]:
        self.offsets.append(offset)
        return self.answers.pop(0) if self.answers else (3, b"")


def test_an_empty_fetch_below_the_high_watermark_is_asked_again(monkeypatch):
    conn = ScriptedConnection([
        (3, batch(0, [record(0, None, b"a"), record(1, None, b"b")])),
        (3, b""),  # a busy broker answered with nothing
        (3, batch(2, [record(0, None, b"c")])),
    ])  # fmt: skip
    monkeypatch.setattr(kafka_raw, "Connection", conn)
    got = kafka_raw.read_batches("127.0.0.1:9", "t", 0)
    assert [r.value for b in got for r in b.records] == [b"a", b"b", b"c"]
    assert conn.offsets == [0, 2, 2]


def test_a_partition_that_stays_empty_below_its_high_watermark_is_an_error(monkeypatch):
    monkeypatch.setattr(kafka_raw, "Connection", ScriptedConnection([]))
    with pytest.raises(RawKafkaError, match=r"t\[0\]: no batch at 0 below 3"):
        kafka_raw.read_batches("127.0.0.1:9", "t", 0, timeout_s=0.3)
