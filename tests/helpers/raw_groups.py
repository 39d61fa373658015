"""Committed group offsets over a raw connection (OffsetFetch v1), without a Kafka client.

A client learns broker addresses from Metadata, so behind a test proxy that is cut it cannot
reach the broker at all; this reads on the connection it opens (the broker's own port), e.g. a
delivery ledger on a cluster whose proxy is cut. One broker only (the test brokers).
"""

from __future__ import annotations

import struct

from tests.helpers.kafka_raw import Connection, RawKafkaError, _host_port, _string

API_OFFSET_FETCH = 9


def committed_offsets(
    bootstrap: str, group: str, topic: str, partitions: int, timeout_s: float = 30
) -> dict[int, int]:
    """Committed offset per partition of ``topic`` in ``group`` (none: partition left out)."""
    body = _string(group) + struct.pack(">i", 1) + _string(topic) + struct.pack(">i", partitions)
    body += b"".join(struct.pack(">i", p) for p in range(partitions))
    with Connection(*_host_port(bootstrap), timeout_s) as conn:
        r = conn.request(API_OFFSET_FETCH, 1, body)
        out: dict[int, int] = {}
        for _ in range(r.int32()):
            name = r.string()
            for _p in range(r.int32()):
                partition, offset = r.int32(), r.int64()
                r.string()  # metadata
                error = r.int16()
                if error:
                    raise RawKafkaError(f"OffsetFetch {group} {name}[{partition}]: error {error}")
                if name == topic and offset >= 0:
                    out[partition] = offset
        return out
