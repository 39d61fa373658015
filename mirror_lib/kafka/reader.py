"""Read a topic to its end: the committed records of every partition, or a transient error.

Shared by translation (segments), checkpoints, cutover and MirrorClient.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError


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
