"""Exact upstream -> downstream offset translation from the segments our sink commits (D4).

Each transaction chunk writes, atomically with the data, a ``segments`` record per partition to
the flow's metrics topic: every contiguous run ``[upstream_start..end] -> [downstream_start..end]``.
Translation of a committed upstream offset U is the downstream offset of the first replicated
record with upstream offset >= U: exact inside a segment, the next segment's start in a gap.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError
from mirror_lib.offsets.segments import Segment, SegmentIndex
from mirror_lib.replication.context import FlowContext

TP = tuple[str, int]


def read_topic(
    conf: dict[str, Any], topic: str, timeout_s: float = 60, start: int = 0
) -> Iterable[Any]:
    """Committed records of ``topic`` (every partition) from offset ``start`` to the end.

    Yields nothing for a missing topic; not reaching the end within ``timeout_s`` raises a
    transient :class:`BrokerError` rather than returning a partial answer.
    """
    conf = {
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **conf,
        "enable.partition.eof": True,
    }
    conf.setdefault("isolation.level", "read_committed")
    consumer = Consumer(conf)
    try:
        md = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if md is None or md.error is not None:
            return
        pending = set(md.partitions)
        consumer.assign([TopicPartition(topic, p, start) for p in pending])
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise BrokerError(f"reading {topic}: no end after {timeout_s}s", transient=True)
            for msg in consumer.consume(10_000, timeout=0.1):  # consume() waits for all 10k
                err = msg.error()
                if err is None:
                    yield msg
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                else:
                    raise BrokerError(f"reading {topic}: {err.str()}", transient=True)
    except KafkaException as exc:
        raise BrokerError(f"reading {topic}: {exc}", transient=True) from exc
    finally:
        consumer.close()


def add_segments(indexes: dict[TP, SegmentIndex], value: bytes | None) -> bool:
    """Add a metrics record's segments to ``indexes``; False when it cannot be decoded.

    Records of other types are ignored (True).
    """
    try:
        event = json.loads(value or b"")
        if event.get("type") != "segments":
            return True
        index = indexes.setdefault((event["topic"], int(event["partition"])), SegmentIndex())
        for us, ue, ds, de in event["segments"]:
            index.add(Segment(us, ue, ds, de))
    except (ValueError, KeyError, TypeError):
        return False
    return True


def reader_conf(ctx: FlowContext) -> dict[str, Any]:
    """Consumer config for reading the flow's internal topics on the target."""
    return ctx.client("target", "consumer", **{"group.id": f"__mirror_reader.{ctx.flow.name}"})


def load_segments(ctx: FlowContext, timeout_s: float = 60) -> dict[TP, SegmentIndex]:
    """Read the flow's segments from the target's metrics topic (undecodable records skipped)."""
    indexes: dict[TP, SegmentIndex] = {}
    for msg in read_topic(reader_conf(ctx), ctx.metrics_topic, timeout_s):
        add_segments(indexes, msg.value())
    return indexes


def translate(indexes: dict[TP, SegmentIndex], topic: str, partition: int, upstream: int) -> int:
    """Downstream offset for upstream offset ``upstream`` of ``topic[partition]``; -1: unknown."""
    index = indexes.get((topic, partition))
    if index is None:
        return -1
    result = index.translate(upstream)
    return -1 if result is None else result
