"""Decode raw records of the internal topics into rows of the five Delta tables (docs/tables.md).

Topics (see :func:`classify`): ``mm2-offset-syncs<isep>X<isep>internal`` (MM2 OffsetSync,
docs/mm2-reference.md#wire-formats) -> ``offset_syncs`` kind ``point``;
``<A><isep>checkpoints<isep>internal`` -> ``checkpoints``; ``heartbeats``, ``A.heartbeats``, ... ->
``heartbeats``; our JSON ``mm2-metrics.<A>.internal`` (docs/how-it-works.md#metrics-records):
``batch`` -> ``replication_metrics``, ``segments`` -> ``offset_syncs`` kind ``segment``,
``gap``/``skip``/``start``/``stop``/``error`` -> ``flow_events``, unknown types ignored. Other
topics are ignored.

Bad data never raises: each undecodable record is counted and becomes a ``decode_error`` row of
``flow_events``. Tombstones on the compacted MM2 topics are skipped; a null value on the metrics
topic (not compacted, always JSON) is undecodable. Every row carries its origin columns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mirror_lib.errors import ConfigError, DecodeError
from mirror_lib.mm2.formats import Checkpoint, Heartbeat, OffsetSync
from mirror_lib.mm2.policy import ReplicationPolicy
from mirror_lib.tables.schemas import SCHEMAS

__all__ = ["EVENT_TYPES", "RawRecord", "classify", "decode_records"]

EVENT_TYPES = (
    "gap",
    "start",
    "stop",
    "error",
    "outage_started",
    "outage_ended",
    "resumed",
    "skip",
    "takeover",
)
"""Metrics-record types that become ``flow_events`` rows (besides ``decode_error``)."""

_STATS = ("min", "avg", "max", "p50", "p99")
_BATCH_INTS: tuple[str, ...] = ("records", "bytes", "upstream_first", "upstream_last")
_BATCH_INTS += ("downstream_first", "downstream_last", "lag", "batch_id")
_HEX_PREVIEW = 256  # bytes of a bad record's key/value kept in the decode_error details
_DECODE_FAILURES = (DecodeError, ValueError, TypeError, OverflowError, RecursionError)

Row = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class RawRecord:
    """One Kafka record as a records-mode source yields it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


def classify(topic: str, policy: ReplicationPolicy) -> str | None:
    """Kind of ``topic``: offset_syncs, metrics, checkpoints, heartbeats, or None (ignored).

    The ``mm2-`` prefixed names are tested first, so a cluster aliased ``mm2-metrics`` or
    ``mm2-offset-syncs`` would not be recognised as a checkpoints source.
    """
    if topic.startswith("mm2-offset-syncs") and policy.is_mm2_internal_topic(topic):
        return "offset_syncs"
    if topic.startswith("mm2-metrics") and topic.endswith(".internal"):
        return "metrics"
    if policy.is_checkpoints_topic(topic):
        return "checkpoints"
    if policy.is_heartbeats_topic(topic):
        return "heartbeats"
    return None


def _alias(topic: str, name_of: Callable[[str], str]) -> str:
    """The alias X with ``name_of(X) == topic`` (any policy's naming), or DecodeError."""
    prefix, _, suffix = name_of("\0").partition("\0")
    alias = topic[len(prefix) : len(topic) - len(suffix)]
    fits = len(topic) > len(prefix) + len(suffix) and topic.startswith(prefix)
    if not fits or name_of(alias) != topic:
        raise DecodeError(f"cannot read a cluster alias from topic name {topic!r}")
    return alias


def _hops(topic: str, policy: ReplicationPolicy) -> int:
    """How many times ``topic`` is remote (``heartbeats`` 0, ``A.heartbeats`` 1, ...)."""
    hops, seen = 0, {topic}
    while policy.topic_source(topic) is not None:
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream in seen:  # `upstream == topic`: Identity-like policies
            break
        hops, topic = hops + 1, upstream
        seen.add(topic)
    return hops


def _int(value: Any, name: str, bits: int = 64) -> int | None:
    """A JSON integer that fits INT<bits>, or None; DecodeError otherwise."""
    if value is None:
        return None
    limit = 1 << (bits - 1)
    if isinstance(value, bool) or not isinstance(value, int) or not -limit <= value < limit:
        raise DecodeError(f"metrics record: field {name!r} is not an INT{bits}: {value!r}")
    return value


def _float(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DecodeError(f"metrics record: field {name!r} is not a number: {value!r}")
    return float(value)


def _str(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise DecodeError(f"metrics record: field {name!r} is not a string: {value!r}")
    return value


def _offset_sync(rec: RawRecord, cluster: str, policy: ReplicationPolicy, loc: str) -> list[Row]:
    sync = OffsetSync.decode(rec.key, rec.value)
    other = _alias(rec.topic, policy.offset_syncs_topic)
    # The name holds the alias of the cluster the topic is *not* on
    # (docs/mm2-reference.md#where-each-topic-lives).
    source, target = (other, cluster) if loc == "target" else (cluster, other)
    u, d = sync.upstream_offset, sync.downstream_offset
    row = {
        "flow": f"{source}->{target}", "source": source, "target": target, "topic": sync.topic,
        "remote_topic": policy.format_remote_topic(source, sync.topic),
        "partition": sync.partition, "upstream_start": u, "upstream_end": u,
        "downstream_start": d, "downstream_end": d, "kind": "point", "batch_id": None,
    }  # fmt: skip
    return [("offset_syncs", row)]


def _checkpoint(rec: RawRecord, cluster: str, policy: ReplicationPolicy, _loc: str) -> list[Row]:
    cp = Checkpoint.decode(rec.key, rec.value)
    row = {
        "source": _alias(rec.topic, policy.checkpoints_topic), "target": cluster,
        "group_id": cp.group, "topic": cp.topic, "partition": cp.partition,
        "upstream_offset": cp.upstream_offset, "downstream_offset": cp.downstream_offset,
        "metadata": cp.metadata,
    }  # fmt: skip
    return [("checkpoints", row)]


def _heartbeat(rec: RawRecord, _cluster: str, policy: ReplicationPolicy, _loc: str) -> list[Row]:
    hb = Heartbeat.decode(rec.key, rec.value)
    row = {
        "source": hb.source_cluster_alias, "target": hb.target_cluster_alias,
        "heartbeat_ts": hb.timestamp_ms, "hops": _hops(rec.topic, policy),
    }  # fmt: skip
    return [("heartbeats", row)]


def _metrics(rec: RawRecord, _cluster: str, _policy: ReplicationPolicy, _loc: str) -> list[Row]:
    """Rows of one of our JSON metrics records (docs/how-it-works.md#metrics-records)."""
    if rec.value is None:
        raise DecodeError("metrics record: value is null")
    text = rec.value.decode("utf-8")
    event = json.loads(text)
    if not isinstance(event, dict):
        raise DecodeError("metrics record: not a JSON object")
    kind = event.get("type")
    if not isinstance(kind, str):
        raise DecodeError(f"metrics record: 'type' missing or not a string: {kind!r}")
    names = ("flow", "source", "target", "topic", "remote_topic")
    flow: dict[str, Any] = {k: _str(event.get(k), k) for k in names}
    flow["partition"] = _int(event.get("partition"), "partition", 32)
    ts = _int(event.get("ts_ms"), "ts_ms")
    if kind == "batch":
        row = {**flow, "ts": ts, "query_id": _str(event.get("query_id"), "query_id")}
        row["slot"] = _int(event.get("slot"), "slot", 32)
        row.update({k: _int(event.get(k), k) for k in _BATCH_INTS})
        for stat in ("latency_ms", "age_ms"):
            summary = event.get(stat) or {}
            if not isinstance(summary, dict):
                raise DecodeError(f"metrics record: field {stat!r} is not an object")
            for q in _STATS:
                row[f"{stat}_{q}"] = _float(summary.get(q), f"{stat}.{q}")
        return [("replication_metrics", row)]
    if kind == "segments":
        segments = event.get("segments")
        if not isinstance(segments, list):
            raise DecodeError("metrics record: 'segments' is not a list")
        batch_id = _int(event.get("batch_id"), "batch_id")
        rows: list[Row] = []
        for seg in segments:
            bounds = [_int(x, "segments") for x in seg] if isinstance(seg, list) else []
            if len(bounds) != 4 or None in bounds:
                raise DecodeError(f"metrics record: bad segment {seg!r}")
            us, ue, ds, de = bounds
            row = {**flow, "upstream_start": us, "upstream_end": ue, "downstream_start": ds,
                   "downstream_end": de, "kind": "segment", "batch_id": batch_id}  # fmt: skip
            rows.append(("offset_syncs", row))
        return rows
    if kind in EVENT_TYPES:
        reasons = (_str(event.get(k), k) for k in ("reason", "error", "message"))
        row = {
            "type": kind, "flow": flow["flow"], "ts": ts, "topic": flow["topic"],
            "partition": flow["partition"], "reason": next((r for r in reasons if r), None),
            "action": _str(event.get("action"), "action"), "details": text,
        }  # fmt: skip
        return [("flow_events", row)]
    return []  # a type this version does not know: not an error


_DECODERS = {
    "offset_syncs": _offset_sync,
    "checkpoints": _checkpoint,
    "heartbeats": _heartbeat,
    "metrics": _metrics,
}


def _decode_error(rec: RawRecord, kind: str, exc: BaseException) -> Row:
    """The flow_events row that makes an undecodable record visible."""
    reason = str(exc) if isinstance(exc, DecodeError) else f"{type(exc).__name__}: {exc}"
    preview = {
        "table": kind,
        "error": reason,
        "key_hex": None if rec.key is None else rec.key[:_HEX_PREVIEW].hex(),
        "value_hex": None if rec.value is None else rec.value[:_HEX_PREVIEW].hex(),
    }
    row = {
        "type": "decode_error", "flow": None, "ts": _record_ts(rec), "topic": rec.topic,
        "partition": rec.partition, "reason": reason, "action": None,
        "details": json.dumps(preview, separators=(",", ":")),
    }  # fmt: skip
    return ("flow_events", row)


def _record_ts(rec: RawRecord) -> int | None:
    """The record's timestamp; Kafka's -1 ("no timestamp") becomes null."""
    return rec.timestamp_ms if rec.timestamp_ms >= 0 else None


def decode_records(
    records: Iterable[RawRecord],
    *,
    cluster: str,
    policy: ReplicationPolicy,
    syncs_location: str = "target",
) -> tuple[dict[str, pa.Table], int]:
    """Decode records read on ``cluster``: one Arrow table per SCHEMAS entry, and the error count.

    ``syncs_location`` is where the offset-syncs topic lives (``offset-syncs.topic.location``).
    Its name holds the *other* cluster's alias X, which the bytes alone cannot place: with
    ``target`` (ours, the default) the flow is X -> ``cluster``; with ``source`` (MM2's default)
    it is ``cluster`` -> X. ``remote_topic`` is the policy's remote name under the flow's source.
    """
    if syncs_location not in ("source", "target"):
        raise ConfigError("offset-syncs.topic.location", syncs_location, "'source' or 'target'")
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in SCHEMAS}
    errors = 0
    for rec in records:
        kind = classify(rec.topic, policy)
        if kind is None or (rec.value is None and kind != "metrics"):
            continue  # not ours, or a tombstone on a compacted topic
        try:
            out = _DECODERS[kind](rec, cluster, policy, syncs_location)
        except _DECODE_FAILURES as exc:
            errors += 1
            out = [_decode_error(rec, kind, exc)]
        origin = {
            "cluster": cluster, "kafka_topic": rec.topic, "kafka_partition": rec.partition,
            "kafka_offset": rec.offset, "record_ts": _record_ts(rec),
        }  # fmt: skip
        for name, row in out:
            rows[name].append({**row, **origin})
    tables = {name: pa.Table.from_pylist(r, schema=SCHEMAS[name]) for name, r in rows.items()}
    return tables, errors
