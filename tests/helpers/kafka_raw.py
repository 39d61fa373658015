"""A small raw Kafka reader for exactly-once checks that do not trust the broker's read_committed.

It speaks the wire protocol over a socket (ApiVersions v0, Metadata v1, Fetch v4 with isolation
level read_uncommitted), parses record batches (magic 2) itself and computes the committed view
of a partition: records of a producer's transaction count only when that producer's next
control marker is COMMIT; transactions ended by ABORT and transactions still open are left out.
The embedded test broker returns aborted records to read_committed consumers, so every
exactly-once test reads the target with :func:`committed_records`.
"""

from __future__ import annotations

import functools
import itertools
import socket
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import google_crc32c

API_FETCH, API_METADATA, API_VERSIONS = 1, 3, 18
FETCH_VERSION = 4
READ_UNCOMMITTED = 0
ABORT, COMMIT = 0, 1
_ATTR_COMPRESSION, _ATTR_TRANSACTIONAL, _ATTR_CONTROL = 0x07, 0x10, 0x20
_BATCH_HEADER = struct.Struct(">qiiBIhiqqqhii")  # up to and including the record count
_BATCH_OVERHEAD = 12  # baseOffset + batchLength precede the counted bytes


class RawKafkaError(Exception):
    """The broker answered with an error code or bytes this reader does not understand."""


@dataclass(frozen=True)
class RawRecord:
    """One data record with the batch facts that decide whether it is committed."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]
    producer_id: int
    producer_epoch: int
    transactional: bool


@dataclass(frozen=True)
class Marker:
    """A control record: the end of a producer's transaction (COMMIT or ABORT)."""

    offset: int
    producer_id: int
    producer_epoch: int
    kind: int  # ABORT (0) or COMMIT (1)


@dataclass(frozen=True)
class Batch:
    """One parsed record batch."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: bool
    records: tuple[RawRecord, ...]
    markers: tuple[Marker, ...]
    size: int = 0  # bytes of the whole batch, as the broker checks it against max.message.bytes


# -- primitive decoding ------------------------------------------------------------------------
@functools.cache
def _struct(fmt: str) -> struct.Struct:
    return struct.Struct(">" + fmt)


class _Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def _advance(self, n: int) -> int:
        """Where the next ``n`` bytes start; the reader is then past them."""
        if n < 0 or self.pos + n > len(self.data):
            raise RawKafkaError(f"truncated: need {n} bytes at {self.pos} of {len(self.data)}")
        start = self.pos
        self.pos += n
        return start

    def take(self, n: int) -> bytes:
        start = self._advance(n)
        return self.data[start : start + n]

    def unpack(self, fmt: str) -> tuple:
        s = _struct(fmt)
        return s.unpack_from(self.data, self._advance(s.size))

    def int8(self) -> int:
        return self.unpack("b")[0]

    def int16(self) -> int:
        return self.unpack("h")[0]

    def int32(self) -> int:
        return self.unpack("i")[0]

    def int64(self) -> int:
        return self.unpack("q")[0]

    def string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self.take(n).decode()

    def bytes32(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self.take(n)

    def varint(self) -> int:
        """A zigzag varint/varlong (record fields)."""
        data, pos = self.data, self.pos
        shift = result = 0
        while True:
            if pos >= len(data):
                raise RawKafkaError(f"truncated: a varint at {self.pos} of {len(data)} bytes")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise RawKafkaError("varint longer than 10 bytes")

    def varbytes(self) -> bytes | None:
        n = self.varint()
        return None if n < 0 else self.take(n)


def zigzag(value: int) -> bytes:
    """Encode a zigzag varint (used by tests to build batches by hand)."""
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        if z & ~0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        else:
            out.append(z)
            return bytes(out)


# -- record batches ----------------------------------------------------------------------------
def parse_batches(data: bytes) -> list[Batch]:
    """Every complete magic-2 batch in ``data`` (a Fetch response's records); a truncated last
    batch (the broker cuts at max_bytes) is ignored."""
    out = []
    pos = 0
    while pos + _BATCH_OVERHEAD <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + _BATCH_OVERHEAD + length
        if end > len(data):
            break
        out.append(parse_batch(data[pos:end]))
        pos = end
    return out


def parse_batch(data: bytes) -> Batch:
    """One record batch (magic 2) with its records or control markers."""
    if len(data) < _BATCH_HEADER.size:
        raise RawKafkaError(f"record batch of {len(data)} bytes is shorter than its header")
    (base_offset, _length, _leader_epoch, magic, crc, attributes, last_delta, base_ts, _max_ts,
     producer_id, producer_epoch, _base_seq, count) = _BATCH_HEADER.unpack_from(data)  # fmt: skip
    if magic != 2:
        raise RawKafkaError(f"batch at offset {base_offset}: magic {magic}, only 2 is supported")
    if google_crc32c.value(data[21:]) != crc:
        raise RawKafkaError(f"batch at offset {base_offset}: CRC mismatch")
    body = data[_BATCH_HEADER.size :]
    codec = attributes & _ATTR_COMPRESSION
    if codec == 1:
        body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
    elif codec != 0:
        raise RawKafkaError(f"batch at offset {base_offset}: compression codec {codec} unsupported")
    transactional = bool(attributes & _ATTR_TRANSACTIONAL)
    control = bool(attributes & _ATTR_CONTROL)
    reader = _Reader(body)
    records, markers = [], []
    for _ in range(count):
        size = reader.varint()
        rec = _Reader(reader.take(size))
        rec.int8()  # record attributes (unused)
        ts_delta = rec.varint()
        offset = base_offset + rec.varint()
        key = rec.varbytes()
        value = rec.varbytes()
        headers = []
        for _h in range(rec.varint()):
            name = rec.varbytes() or b""
            headers.append((name.decode(), rec.varbytes()))
        if control:
            if key is None or len(key) < 4:
                raise RawKafkaError(f"control record at offset {offset} without a valid key")
            _version, kind = struct.unpack(">hh", key[:4])
            markers.append(Marker(offset, producer_id, producer_epoch, kind))
        else:
            records.append(
                RawRecord(offset, key, value, base_ts + ts_delta, tuple(headers), producer_id,
                          producer_epoch, transactional)
            )  # fmt: skip
    return Batch(base_offset, base_offset + last_delta, producer_id, producer_epoch,
                 transactional, control, tuple(records), tuple(markers), len(data))  # fmt: skip


def committed_view(batches: list[Batch]) -> list[RawRecord]:
    """The records a correct read_committed consumer sees, in offset order.

    A transactional record counts when the next marker of its producer after it is COMMIT; it
    is dropped when that marker is ABORT or when there is none yet (transaction still open).
    """
    ordered = sorted(batches, key=lambda b: b.base_offset)
    open_txn: dict[int, list[RawRecord]] = {}
    out: list[RawRecord] = []
    for batch in ordered:
        for marker in batch.markers:
            pending = open_txn.pop(marker.producer_id, [])
            if marker.kind == COMMIT:
                out.extend(pending)
            elif marker.kind != ABORT:
                raise RawKafkaError(
                    f"control record at {marker.offset}: unknown type {marker.kind}"
                )
        for record in batch.records:
            if record.transactional:
                open_txn.setdefault(record.producer_id, []).append(record)
            else:
                out.append(record)
    return sorted(out, key=lambda r: r.offset)


# -- the wire protocol -------------------------------------------------------------------------
def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


class Connection:
    """One blocking connection to a broker (request/response, in order)."""

    _ids = itertools.count(1)

    def __init__(self, host: str, port: int, timeout_s: float = 30) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, api_key: int, version: int, body: bytes) -> _Reader:
        corr = next(self._ids) & 0x7FFFFFFF
        header = struct.pack(">hhi", api_key, version, corr) + _string("mirror-raw-reader")
        payload = header + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv(4))[0]
        reader = _Reader(self._recv(size))
        if reader.int32() != corr:
            raise RawKafkaError("response correlation id does not match the request")
        return reader

    def _recv(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                raise RawKafkaError("connection closed by the broker")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        r = self.request(API_VERSIONS, 0, b"")
        error = r.int16()
        if error:
            raise RawKafkaError(f"ApiVersions error {error}")
        return {r.int16(): (r.int16(), r.int16()) for _ in range(r.int32())}

    def metadata(self, topic: str) -> tuple[dict[int, tuple[str, int]], dict[int, int]]:
        """(node id -> (host, port), partition -> leader id) of ``topic``."""
        r = self.request(API_METADATA, 1, struct.pack(">i", 1) + _string(topic))
        brokers = {}
        for _ in range(r.int32()):
            node, host, port = r.int32(), r.string() or "", r.int32()
            r.string()  # rack
            brokers[node] = (host, port)
        r.int32()  # controller id
        leaders = {}
        for _ in range(r.int32()):
            error, name = r.int16(), r.string()
            r.int8()  # is_internal
            for _p in range(r.int32()):
                p_error, index, leader = r.int16(), r.int32(), r.int32()
                for _list in range(2):  # replicas, isr
                    r.take(4 * max(r.int32(), 0))
                if name == topic and not p_error:
                    leaders[index] = leader
            if name == topic and error:
                raise RawKafkaError(f"Metadata for {topic}: error {error}")
        return brokers, leaders

    def fetch(self, topic: str, partition: int, offset: int) -> tuple[int, bytes]:
        """(high watermark, records bytes) of one read_uncommitted Fetch from ``offset``."""
        body = struct.pack(">iiiib", -1, 100, 1, 64 << 20, READ_UNCOMMITTED)
        body += struct.pack(">i", 1) + _string(topic)
        body += struct.pack(">iiqi", 1, partition, offset, 16 << 20)
        r = self.request(API_FETCH, FETCH_VERSION, body)
        r.int32()  # throttle
        for _ in range(r.int32()):
            name = r.string()
            for _p in range(r.int32()):
                index, error, high = r.int32(), r.int16(), r.int64()
                r.int64()  # last stable offset
                for _a in range(max(r.int32(), 0)):  # aborted transactions (not trusted)
                    r.int64(), r.int64()
                records = r.bytes32() or b""
                if name == topic and index == partition:
                    if error:
                        raise RawKafkaError(f"Fetch {topic}[{partition}]@{offset}: error {error}")
                    return high, records
        raise RawKafkaError(f"Fetch {topic}[{partition}]: partition missing from the response")


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host, int(port)


def read_batches(bootstrap: str, topic: str, partition: int, timeout_s: float = 30) -> list[Batch]:
    """Every batch of a partition from offset 0 up to its high watermark (read_uncommitted)."""
    with Connection(*_host_port(bootstrap), timeout_s) as conn:
        low, high = conn.api_versions().get(API_FETCH, (0, -1))
        if not low <= FETCH_VERSION <= high:
            raise RawKafkaError(f"broker supports Fetch v{low}-v{high}, this reader needs v4")
        brokers, leaders = conn.metadata(topic)
        if partition not in leaders:
            raise RawKafkaError(f"{topic}[{partition}] not in metadata of {bootstrap}")
        # One broker: read where we are connected (a test proxy may stand in its Metadata).
        leader = brokers.get(leaders[partition]) if len(brokers) > 1 else None
    with Connection(*(leader or _host_port(bootstrap)), timeout_s) as conn:
        batches: list[Batch] = []
        offset = 0
        deadline = time.monotonic() + timeout_s
        while True:
            high, data = conn.fetch(topic, partition, offset)
            got = parse_batches(data)
            if not got:
                if offset >= high:
                    return batches
                # A busy test broker may answer a fetch with fewer batches than it holds, even
                # none (seen below the high watermark in CI): ask again, as a consumer would.
                if time.monotonic() > deadline:
                    raise RawKafkaError(f"{topic}[{partition}]: no batch at {offset} below {high}")
                time.sleep(0.05)
                continue
            for batch in got:
                if batch.last_offset >= offset:
                    batches.append(batch)
                offset = max(offset, batch.last_offset + 1)
            if offset >= high:
                return batches


def committed_records(bootstrap: str, topic: str, partitions: int) -> dict[int, list[RawRecord]]:
    """The committed view of each partition of ``topic`` (see :func:`committed_view`)."""
    return {p: committed_view(read_batches(bootstrap, topic, p)) for p in range(partitions)}


def log_text(bootstrap: str, topic: str, partition: int, batches: int = 12) -> str:
    """The first ``batches`` batches of a partition, one line each (producer, epoch, markers,
    values): what a failed assertion about a remote topic shows, so that it can be explained."""
    lines = []
    for b in sorted(read_batches(bootstrap, topic, partition), key=lambda b: b.base_offset)[
        :batches
    ]:
        kind = "control" if b.control else "txn" if b.transactional else "plain"
        what = ["COMMIT" if m.kind == COMMIT else "ABORT" for m in b.markers] or [
            repr(r.value) for r in b.records
        ]
        lines.append(
            f"  {topic}[{partition}] {b.base_offset}-{b.last_offset} {kind} "
            f"pid={b.producer_id} epoch={b.producer_epoch}: {', '.join(what)}"
        )
    return "\n".join(lines)


def aborted_records(bootstrap: str, topic: str, partitions: int) -> int:
    """Data records in the log of ``topic`` that an ABORT marker cancelled."""
    total = 0
    for p in range(partitions):
        pending: dict[int, int] = {}
        for batch in sorted(read_batches(bootstrap, topic, p), key=lambda b: b.base_offset):
            for marker in batch.markers:
                n = pending.pop(marker.producer_id, 0)
                total += n if marker.kind == ABORT else 0
            if batch.transactional and not batch.control:
                pending[batch.producer_id] = pending.get(batch.producer_id, 0) + len(batch.records)
    return total


def iter_all(records: dict[int, list[RawRecord]]) -> Iterator[tuple[int, RawRecord]]:
    """(partition, record) pairs, partition by partition."""
    for p in sorted(records):
        for r in records[p]:
            yield p, r
