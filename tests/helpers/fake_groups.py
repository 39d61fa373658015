"""Stand-ins for one cluster's consumer groups (confluent-kafka's AdminClient group calls) and
for reading its topics, for unit tests of the checkpoint job, group sync and failover."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from confluent_kafka import ConsumerGroupState, TopicPartition

from mirror_lib.mm2.formats import TP
from tests.helpers.fake_kafka import FakeMessage, FakeProducer


def _done(value: Any) -> Future:
    fut: Future = Future()
    fut.set_result(value)
    return fut


class FakeGroupAdmin:
    """Committed offsets per group, as (offset, metadata) per (topic, partition); ``members``
    per group (none: the group is EMPTY). Every altered group offset is recorded in
    :attr:`altered` as (group, topic, partition, offset, metadata) and then committed."""

    def __init__(self, offsets: dict[str, dict[TP, tuple[int, str]]] | None = None) -> None:
        self.offsets: dict[str, dict[TP, tuple[int, str]]] = {
            g: dict(c) for g, c in (offsets or {}).items()
        }
        self.members: dict[str, int] = {}
        self.altered: list[tuple[str, str, int, int, str | None]] = []
        self.calls: list[tuple[str, int]] = []  # (method, groups in the call)

    def list_consumer_groups(self, request_timeout: float | None = None) -> Future:
        return _done(SimpleNamespace(valid=[SimpleNamespace(group_id=g) for g in self.offsets]))

    def describe_consumer_groups(
        self, groups: list[str], request_timeout: float | None = None
    ) -> dict[str, Future]:
        self.calls.append(("describe_consumer_groups", len(groups)))

        def described(g: str) -> Any:
            n = self.members.get(g, 0)
            state = ConsumerGroupState.STABLE if n else ConsumerGroupState.EMPTY
            return SimpleNamespace(group_id=g, state=state, members=[object()] * n)

        return {g: _done(described(g)) for g in groups}

    def list_consumer_group_offsets(
        self, requests: list[Any], request_timeout: float | None = None
    ) -> dict[str, Future]:
        self.calls.append(("list_consumer_group_offsets", len(requests)))
        out = {}
        for req in requests:
            tps = [
                TopicPartition(t, p, off, metadata=meta)
                for (t, p), (off, meta) in sorted(self.offsets.get(req.group_id, {}).items())
            ]
            out[req.group_id] = _done(SimpleNamespace(group_id=req.group_id, topic_partitions=tps))
        return out

    def alter_consumer_group_offsets(
        self, requests: list[Any], request_timeout: float | None = None
    ) -> dict[str, Future]:
        self.calls.append(("alter_consumer_group_offsets", len(requests)))
        for req in requests:
            for tp in req.topic_partitions:
                self.altered.append((req.group_id, tp.topic, tp.partition, tp.offset, tp.metadata))
                committed = self.offsets.setdefault(req.group_id, {})
                committed[(tp.topic, tp.partition)] = (tp.offset, tp.metadata or "")
        return {req.group_id: _done(req) for req in requests}


def topic_reader(producer: FakeProducer) -> Callable[..., Iterator[FakeMessage]]:
    """A ``read_topic`` over what ``producer`` has acknowledged (its records, in order)."""

    def read_topic(
        conf: Any, topic: str, timeout_s: float = 60, start: int = 0, partition: int | None = None
    ) -> Iterator[FakeMessage]:
        offsets: dict[TP, int] = {}
        for t, p, key, value in list(producer.records):
            offset = offsets[(t, p)] = offsets.get((t, p), -1) + 1
            if t == topic and offset >= start and partition in (None, p):
                yield FakeMessage(t, p, offset, key=key, value=value)

    return read_topic
