"""The copy loops without Spark, run as internal subcommands in a subprocess of their own.

``baseline``: a hand-written confluent-kafka consume->produce loop, method (a); with ``--tuned``
method (a'), the same loop with the engine's two prefetch settings and positional ``produce()``.
``copier``: the engine's copy loop ``copy_slice`` without Spark or the planner, method (c).
Each prints one JSON line ``{"records", "bytes", "seconds"}`` at the end.
``eos-loop``: a hand-written transactional consume->produce loop that runs until it is stopped,
the latency bench's reference for an exactly-once copy (``loop-eos1`` in bench/latency.py); it
prints ``{"records", "transactions", "seconds"}`` when stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka as ck

from bench.kafka_data import create_topic
from bench.procs import mirror_props


def baseline_main(args: argparse.Namespace) -> int:
    """Consume ``topic`` from the source to EOF, produce each record to ``dest`` on the target
    (same partition, key/value/headers/timestamp), idempotent producer, flush at the end.
    ``--tuned``: the consumer prefetches as the engine's does (``queued.min.messages``,
    ``fetch.queue.backoff.ms``) and ``produce()`` takes its arguments by position, as the
    engine's (keyword arguments cost about 0.9 us a record more)."""
    errors: list[Any] = []

    def on_delivery(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is not None:
            errors.append(err)

    conf = {
        "bootstrap.servers": args.source,
        "group.id": f"bench-baseline-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "fetch.wait.max.ms": 50,
        "fetch.error.backoff.ms": 50,
        "queued.max.messages.kbytes": 65536,
    }
    if getattr(args, "tuned", False):
        conf.update({"queued.min.messages": 20000, "fetch.queue.backoff.ms": 10})
    consumer = ck.Consumer(conf)
    producer = ck.Producer(
        {
            "bootstrap.servers": args.target,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "on_delivery": on_delivery,
        }
    )
    t0 = time.monotonic()
    parts = sorted(consumer.list_topics(args.topic, timeout=30).topics[args.topic].partitions)
    consumer.assign([ck.TopicPartition(args.topic, p, ck.OFFSET_BEGINNING) for p in parts])
    pending, records, nbytes = set(parts), 0, 0
    dest, produce, poll = args.dest, producer.produce, producer.poll
    tuned = getattr(args, "tuned", False)
    while pending:
        for m in consumer.consume(num_messages=10_000, timeout=0.2):
            if m.error() is not None:
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    pending.discard(m.partition())
                    continue
                raise RuntimeError(str(m.error()))
            key, value = m.key(), m.value()
            kw = {"partition": m.partition(), "timestamp": max(m.timestamp()[1], 0)}
            headers = m.headers()
            if headers:
                kw["headers"] = headers
            while True:
                try:
                    if tuned:  # positional, as the engine does: keywords cost more per record
                        part, ts = kw["partition"], kw["timestamp"]
                        produce(dest, value, key, part, None, None, ts, headers)
                    else:
                        produce(dest, value, key, **kw)
                    break
                except BufferError:
                    poll(0.05)
            records += 1
            nbytes += (len(key) if key else 0) + (len(value) if value else 0)
        poll(0)
    left = producer.flush(300)
    consumer.close()
    out = {"records": records, "bytes": nbytes, "seconds": time.monotonic() - t0}
    print(json.dumps(out), flush=True)
    return 0 if left == 0 and not errors else 1


def copier_main(args: argparse.Namespace) -> int:
    """(c) The engine's copy loop alone: ``mirror_lib.replication.copy.copier.copy_slice`` for all
    partitions in one slot up to their current end, without Spark, the planner or topic creation
    (the caller creates the topics; the start positions go into the ledger as the planner would
    write them)."""
    from mirror_lib.config.parse import parse_config
    from mirror_lib.replication.context import FlowContext
    from mirror_lib.replication.copy.copier import copy_slice
    from mirror_lib.replication.copy.ledger import LedgerView

    props = mirror_props(args.source, args.target, Path(args.state), args.topic)
    props["mirror.delivery"] = args.delivery
    props["tasks.max"] = "1"
    ctx = FlowContext.create(parse_config(props), "A->B")
    t0 = time.monotonic()
    probe = ck.Consumer({"bootstrap.servers": args.source, "group.id": "bench-hw"})
    parts = sorted(probe.list_topics(args.topic, timeout=30).topics[args.topic].partitions)
    starts, until = {}, {}
    for p in parts:
        lo, hi = probe.get_watermark_offsets(ck.TopicPartition(args.topic, p), timeout=10)
        starts[(args.topic, p)], until[(args.topic, p)] = lo, hi
    probe.close()
    ledger = LedgerView(ctx)
    ledger.commit(starts)
    ledger.close()
    result = copy_slice(ctx, "bench", 0, sorted(until), until=until, duration_s=3600)
    out = {"records": result.records, "bytes": result.bytes, "seconds": time.monotonic() - t0}
    print(json.dumps(out), flush=True)
    return 0


#: the eos-loop's transactions: one commit this often while records arrive, as our copy's default
#: ``mirror.commit.interval.ms``
EOS_LOOP_TXN_MS = 20


def _retrying(call: Any, stop: threading.Event) -> None:
    """``call`` again for as long as it fails with what librdkafka calls retriable, and the loop
    is not told to stop: then the error is raised, so that a broker that keeps refusing cannot
    hold the loop past its stop signal."""
    while True:
        try:
            call()
            return
        except ck.KafkaException as exc:
            if not exc.args[0].retriable() or stop.is_set():
                raise


@dataclass
class EosCopy:
    """What the eos-loop copies with: a ``read_committed`` reader of ``topic`` on A, a
    transactional producer to ``dest`` on B and a consumer of the loop's group on B, whose
    committed offsets say where a transaction that B aborted is read again from."""

    producer: ck.Producer
    source: ck.Consumer
    ledger: ck.Consumer
    topic: str
    dest: str
    partitions: list[int]
    stop: threading.Event

    def copy(self, messages: Iterable[ck.Message]) -> int:
        """Produce each record read with its key, value, headers and CreateTime to the same
        partition of ``dest``; how many were."""
        n = 0
        for m in messages:
            if m.error() is not None:
                if m.error().fatal():
                    raise RuntimeError(str(m.error()))
                continue  # a transient consumer event: librdkafka retries
            ts = max(m.timestamp()[1], 0)
            while True:
                try:
                    self.producer.produce(self.dest, m.value(), m.key(), m.partition(), None,
                                          None, ts, m.headers())  # fmt: skip
                    break
                except BufferError:
                    self.producer.poll(0.05)
            n += 1
        return n

    def commit(self) -> bool:
        """Commit the open transaction with ``source``'s positions, sent to ``ledger``'s group
        under ``dest``'s name (a target's group coordinator refuses offsets of a topic it does
        not have); False when it had to be aborted, ``source`` then rewound to the positions
        the group holds, so that the aborted records are read again. Retriable errors are
        retried until ``stop`` is set."""
        parts = [ck.TopicPartition(self.topic, p) for p in self.partitions]
        meta = self.ledger.consumer_group_metadata()
        producer = self.producer
        try:
            read = self.source.position(parts)
            positions = [ck.TopicPartition(self.dest, tp.partition, tp.offset) for tp in read]
            _retrying(lambda: producer.send_offsets_to_transaction(positions, meta, 60), self.stop)
            _retrying(lambda: producer.commit_transaction(60), self.stop)
            return True
        except ck.KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
        producer.abort_transaction(60)
        asked = [ck.TopicPartition(self.dest, tp.partition) for tp in parts]
        held = self.ledger.committed(asked, 60)
        for tp in held:
            self.source.seek(ck.TopicPartition(self.topic, tp.partition, max(tp.offset, 0)))
        return False


def eos_loop_main(args: argparse.Namespace) -> int:
    """Copy ``topic`` from its start to the same partitions of ``dest`` in transactions, until
    SIGINT or SIGTERM: Kafka's consume-transform-produce pattern as the simplest exactly-once
    copy written with confluent-kafka would do it. A ``read_committed`` consumer; every record
    with its key, value, headers and CreateTime; a commit every ``--txn-ms`` while records
    arrive, with the consumer's positions sent to a group on the target in the transaction (as
    the remote topic's); librdkafka's producer defaults otherwise. What a transactional client
    of B gets on the same machine, beside the tools' exactly-once copies."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    name = f"bench-eos-loop-{uuid.uuid4().hex}"
    consumer = ck.Consumer({
        "bootstrap.servers": args.source, "group.id": name, "enable.auto.commit": False,
        "isolation.level": "read_committed", "fetch.wait.max.ms": 50,
    })  # fmt: skip
    producer = ck.Producer({
        "bootstrap.servers": args.target, "transactional.id": name, "linger.ms": 5,
        "batch.size": 1_000_000,
    })  # fmt: skip
    ledger = ck.Consumer({"bootstrap.servers": args.target, "group.id": name})  # its group
    producer.init_transactions(60)
    parts = sorted(consumer.list_topics(args.topic, timeout=30).topics[args.topic].partitions)
    create_topic(args.target, args.dest, len(parts))  # as a tool creates its remote topics
    consumer.assign([ck.TopicPartition(args.topic, p, ck.OFFSET_BEGINNING) for p in parts])
    loop = EosCopy(producer, consumer, ledger, args.topic, args.dest, parts, stop)
    txn_s, t0 = args.txn_ms / 1000.0, time.monotonic()
    records = transactions = in_txn = 0
    producer.begin_transaction()
    opened = time.monotonic()
    while True:
        stopping = stop.is_set()  # then what was read is committed, and the loop ends
        wait_s = max(0.001, opened + txn_s - time.monotonic())
        in_txn += loop.copy(() if stopping else consumer.consume(10_000, wait_s))
        producer.poll(0)
        if in_txn and (stopping or time.monotonic() - opened >= txn_s):
            try:
                done = loop.commit()
            except ck.KafkaException:
                if not stop.is_set():
                    raise
                break  # told to stop while B refused the commit: it is not counted
            if done:
                records, transactions = records + in_txn, transactions + 1
            in_txn = 0
            producer.begin_transaction()
            opened = time.monotonic()
        elif not in_txn:
            opened = time.monotonic()  # a transaction's age counts from its first record
        if stopping:
            break
    with contextlib.suppress(ck.KafkaException):  # the one begun last, or one B did not commit
        producer.abort_transaction(60)
    consumer.close()
    ledger.close()
    out = {"records": records, "transactions": transactions, "seconds": time.monotonic() - t0}
    print(json.dumps(out), flush=True)
    return 0
