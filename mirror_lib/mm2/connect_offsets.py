"""MirrorMaker 2's replication position: the Connect source offsets of its MirrorSourceConnector.

In dedicated mode each flow A->B runs a Connect worker on the target cluster whose offsets topic
(``mm2-offsets.A.internal`` on B, unless ``offset.storage.topic`` says otherwise) holds, per
source partition, the offset of the last record MM2 copied *and committed*: Connect commits
them every ``offset.flush.interval.ms`` (60 s by default) and when a task stops cleanly. Keys
and values are Connect's JSON (schemas off), as real MM2 4.3 writes them::

    key   ["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]
    value {"offset":149}

A null value (a tombstone) is a reset of that partition's position (KIP-875). Connect finds a
partition's offset by the exact key bytes, and the Java producer puts a key on partition
``murmur2(key) % partitions`` of the offsets topic; :func:`source_offset_record` writes the
bytes MM2 writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mirror_lib.mm2.formats import TP

SOURCE_CONNECTOR = "MirrorSourceConnector"


def offsets_topic(properties: Mapping[str, str], source: str, target: str) -> str:
    """The Connect offsets topic of flow ``source->target`` in dedicated mode.

    As MM2's worker config: the top-level ``offset.storage.topic``, else the target cluster's
    (``<target>.offset.storage.topic``), else ``mm2-offsets.<source>.internal``.
    """
    for key in ("offset.storage.topic", f"{target}.offset.storage.topic"):
        value = str(properties.get(key, "")).strip()
        if value:
            return value
    return f"mm2-offsets.{source}.internal"


def worker_group(properties: Mapping[str, str], source: str, target: str) -> str:
    """The Connect group of the flow's MM2 workers on the target: ``<target>.group.id``, else
    ``<source>-mm2``."""
    return str(properties.get(f"{target}.group.id", "")).strip() or f"{source}-mm2"


def parse_source_offset(
    key: bytes | None, value: bytes | None, source: str
) -> tuple[TP, int | None] | None:
    """``((topic, partition), offset)`` of one offsets-topic record of the MirrorSourceConnector
    replicating from cluster ``source``; offset None for a tombstone (a reset). None for any
    other record (another connector or cluster, or bytes that are not Connect's JSON)."""
    try:
        name, part = json.loads(key or b"")
        if name != SOURCE_CONNECTOR or part.get("cluster") != source:
            return None
        tp = (str(part["topic"]), int(part["partition"]))
        if value is None:
            return tp, None
        offset: Any = json.loads(value).get("offset")
        return tp, int(offset)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def source_offset_record(
    source: str, topic: str, partition: int, offset: int
) -> tuple[bytes, bytes]:
    """Key and value bytes, as MM2 writes them, saying that MM2 replicated ``topic[partition]``
    of cluster ``source`` up to and including upstream ``offset``."""
    part = {"cluster": source, "partition": partition, "topic": topic}  # MM2's field order
    key = json.dumps([SOURCE_CONNECTOR, part], separators=(",", ":"), ensure_ascii=False)
    value = json.dumps({"offset": offset}, separators=(",", ":"))
    return key.encode(), value.encode()
