"""Stand-ins for confluent-kafka's cluster metadata (``list_topics``), for unit tests of what
the target's metadata says about writes: leaders, in-sync replicas and brokers that left."""

from __future__ import annotations

import confluent_kafka


class FakePartition:
    """A partition's leader, in-sync replicas and replicas (brokers 1, 2, 3 unless given)."""

    def __init__(self, leader: int, isrs: list[int], replicas: list[int] | None = None) -> None:
        self.leader, self.isrs = leader, isrs
        self.replicas = [1, 2, 3] if replicas is None else replicas


class FakeTopic:
    def __init__(self, parts: dict[int, FakePartition]) -> None:
        self.partitions = parts


def topics_of(**topics: dict[int, tuple[int, list[int]]]) -> dict[str, FakeTopic]:
    """Topic metadata from ``topic = {partition: (leader, in-sync replicas)}``."""
    return {
        name: FakeTopic({p: FakePartition(lead, isrs) for p, (lead, isrs) in parts.items()})
        for name, parts in topics.items()
    }


class FakeCluster:
    """``list_topics``' answer: the topics and the live brokers (1, 2, 3 unless given)."""

    def __init__(self, topics: dict[str, FakeTopic], live: tuple[int, ...] = (1, 2, 3)) -> None:
        self.topics = topics
        self.brokers = dict.fromkeys(live)


class FakeMetaProducer:
    """A producer whose ``list_topics`` answers ``meta``, or times out when it is None."""

    def __init__(self, meta: FakeCluster | None) -> None:
        self.meta = meta

    def list_topics(self, timeout: float = 0) -> FakeCluster:
        if self.meta is None:
            raise confluent_kafka.KafkaException(
                confluent_kafka.KafkaError(confluent_kafka.KafkaError._TIMED_OUT)
            )
        return self.meta
