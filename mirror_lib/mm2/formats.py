"""Byte-exact encode/decode of MM2's internal records: offset syncs, checkpoints and heartbeats.

MM2 writes these with Kafka's protocol ``Schema``/``Struct`` encoding
(docs/mm2-reference.md#wire-formats): fields back to back, big-endian, no framing; STRING is an
INT16 byte length then UTF-8 bytes, never null. Real MM2 tasks and ``MirrorClient`` read what we
write, and we read what they write, so the bytes must match exactly. Checkpoint and heartbeat values
start with an INT16 version (only 0 exists); offset sync values have no version. Trailing bytes are
ignored on read, as ``Schema.read`` does, and never written.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TypeAlias

from mirror_lib.errors import DecodeError

__all__ = ["TP", "VERSION", "Checkpoint", "Heartbeat", "OffsetSync"]

TP: TypeAlias = tuple[str, int]
"""A partition of a topic, ``(topic, partition)``: the one partition type of mirror_lib. A plain
tuple, so the copy path's dict keys cost nothing and any ``(topic, partition)`` pair is one."""

VERSION = 0
"""The only value-schema version of checkpoints and heartbeats."""

_MAX_STRING_BYTES = 32767
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_BITS = {_INT16: 16, _INT32: 32, _INT64: 64}


def _int(fmt: struct.Struct, field: str, value: int) -> bytes:
    """Pack a signed integer, or raise ValueError naming the field if it does not fit."""
    bits = _BITS[fmt]
    if isinstance(value, bool) or not isinstance(value, int):
        # ValueError (not TypeError) so callers catch one exception type for every bad field.
        raise ValueError(f"{field}: expected an INT{bits} integer, got {value!r}")
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f"{field}: {value} is out of INT{bits} range")
    return fmt.pack(value)


def _string(field: str, value: str) -> bytes:
    """Pack a non-nullable STRING, or raise ValueError naming the field."""
    if not isinstance(value, str):
        raise ValueError(f"{field}: expected a str (not nullable), got {value!r}")
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{field}: not encodable as UTF-8: {exc}") from None
    if len(data) > _MAX_STRING_BYTES:
        raise ValueError(f"{field}: {len(data)} UTF-8 bytes, at most {_MAX_STRING_BYTES} allowed")
    return _INT16.pack(len(data)) + data


class _Reader:
    """Reads schema fields in order from one key or value, raising DecodeError with context."""

    def __init__(self, what: str, data: bytes | bytearray | memoryview | None) -> None:
        self.what = what
        if data is None:
            raise DecodeError(f"{what}: is None")
        self.data = bytes(data)
        self.pos = 0

    def _take(self, field: str, n: int) -> bytes:
        if self.pos + n > len(self.data):
            have = len(self.data) - self.pos
            raise DecodeError(
                f"{self.what}: field '{field}' truncated: need {n} bytes at offset {self.pos}, "
                f"have {have}"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self, field: str) -> int:
        return int(_INT16.unpack(self._take(field, 2))[0])

    def int32(self, field: str) -> int:
        return int(_INT32.unpack(self._take(field, 4))[0])

    def int64(self, field: str) -> int:
        return int(_INT64.unpack(self._take(field, 8))[0])

    def string(self, field: str) -> str:
        length = _INT16.unpack(self._take(field, 2))[0]
        if length < 0:
            raise DecodeError(f"{self.what}: field '{field}' has negative length {length}")
        raw = self._take(field, length)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"{self.what}: field '{field}' is not valid UTF-8: {exc}") from None

    def version(self) -> None:
        version = self.int16("version")
        if version != VERSION:
            raise DecodeError(f"{self.what}: unknown version {version} (only {VERSION} exists)")


@dataclass(frozen=True)
class OffsetSync:
    """Maps an upstream offset to the downstream offset of the same record
    (docs/mm2-reference.md#offsetsync).

    ``topic`` and ``partition`` are the upstream (source) names, never renamed.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        """Key bytes: STRING topic, INT32 partition."""
        return _string("OffsetSync.topic", self.topic) + _int(
            _INT32, "OffsetSync.partition", self.partition
        )

    def value(self) -> bytes:
        """Value bytes: INT64 upstreamOffset, INT64 offset; no version header."""
        return _int(_INT64, "OffsetSync.upstream_offset", self.upstream_offset) + _int(
            _INT64, "OffsetSync.downstream_offset", self.downstream_offset
        )

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        """Parse a record of the offset-syncs topic; raises DecodeError on bad bytes."""
        k = _Reader("OffsetSync key", key)
        topic, partition = k.string("topic"), k.int32("partition")
        v = _Reader("OffsetSync value", value)
        return cls(topic, partition, v.int64("upstreamOffset"), v.int64("offset"))


@dataclass(frozen=True)
class Checkpoint:
    """A consumer group's upstream committed offset and its translation
    (docs/mm2-reference.md#checkpoint).

    ``topic`` is the name on the target cluster (e.g. ``A.orders``).
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        """Key bytes: STRING group, STRING topic, INT32 partition."""
        return (
            _string("Checkpoint.group", self.group)
            + _string("Checkpoint.topic", self.topic)
            + _int(_INT32, "Checkpoint.partition", self.partition)
        )

    def value(self) -> bytes:
        """Value bytes: INT16 version 0, INT64 upstreamOffset, INT64 offset, STRING metadata."""
        return (
            _INT16.pack(VERSION)
            + _int(_INT64, "Checkpoint.upstream_offset", self.upstream_offset)
            + _int(_INT64, "Checkpoint.downstream_offset", self.downstream_offset)
            + _string("Checkpoint.metadata", self.metadata)
        )

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        """Parse a record of a checkpoints topic; raises DecodeError on bad bytes or version."""
        k = _Reader("Checkpoint key", key)
        group, topic, partition = k.string("group"), k.string("topic"), k.int32("partition")
        v = _Reader("Checkpoint value", value)
        v.version()
        upstream, downstream = v.int64("upstreamOffset"), v.int64("offset")
        return cls(group, topic, partition, upstream, downstream, v.string("metadata"))


@dataclass(frozen=True)
class Heartbeat:
    """Proof of liveness of the flow source -> target, emitted periodically
    (docs/mm2-reference.md#heartbeat)."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp_ms: int

    def key(self) -> bytes:
        """Key bytes: STRING sourceClusterAlias, STRING targetClusterAlias."""
        return _string("Heartbeat.source_cluster_alias", self.source_cluster_alias) + _string(
            "Heartbeat.target_cluster_alias", self.target_cluster_alias
        )

    def value(self) -> bytes:
        """Value bytes: INT16 version 0, INT64 timestamp (epoch millis)."""
        return _INT16.pack(VERSION) + _int(_INT64, "Heartbeat.timestamp_ms", self.timestamp_ms)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        """Parse a record of a heartbeats topic; raises DecodeError on bad bytes or version."""
        k = _Reader("Heartbeat key", key)
        source, target = k.string("sourceClusterAlias"), k.string("targetClusterAlias")
        v = _Reader("Heartbeat value", value)
        v.version()
        return cls(source, target, v.int64("timestamp"))
