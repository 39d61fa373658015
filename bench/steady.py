"""What a steady-load run does while `mirror run --duration` runs: a fixed-rate load, latency.

Warm-up records (keys ``w*``) go first; once they are replicated, ``--rate`` records/s (keys
``s*``) for ``--steady-seconds``, then tail records (``t*``) that push the high watermark past the
last load batch. A read_committed consumer of the remote topic times every load record, and the
load's own producer times the source broker's acknowledgement of each: what a record spent after
that acknowledgement is the mirror's share (a broker on a busy machine can take seconds to ack).
"""

from __future__ import annotations

import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from bench.kafka_data import PARTITIONS, make_value, value_pool
from bench.measure import Meter, broker_cpu_s, machine_cpu_s
from bench.procs import log


class Receiver:
    """A read_committed consumer of the copy in a thread, the same for every tool: records per
    key kind, the receive time of every load record and then (:meth:`time_against`) its
    end-to-end latency: receive time - the source record's CreateTime (a copy's own timestamp
    need not be the source's: Spark's connector writes new ones)."""

    def __init__(self, target: str, remote: str) -> None:
        self.target, self.remote = target, remote
        self.got = {"w": 0, "s": 0, "t": 0}
        self.arrived: dict[int, float] = {}  # load record number -> receive time, epoch ms
        self.lat: list[float] = []
        self.by_seq: dict[int, float] = {}  # load record number -> end-to-end ms
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="e2e", daemon=True)

    def start(self) -> Receiver:
        """Start consuming once the remote topic exists."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and close the consumer."""
        self._stop.set()
        self._thread.join(10)

    def time_against(self, created: dict[int, float]) -> None:
        """End-to-end latency of every received load record from its source CreateTime."""
        self.by_seq = {n: t - created[n] for n, t in self.arrived.items() if n in created}
        self.lat = sorted(self.by_seq.values())

    def _run(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.target})
        while self.remote not in admin.list_topics(timeout=10).topics:
            if self._stop.wait(0.2):
                return
        c = ck.Consumer(
            {
                "bootstrap.servers": self.target,
                "group.id": f"bench-e2e-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
                "fetch.error.backoff.ms": 10,
            }
        )
        parts = range(PARTITIONS)
        c.assign([ck.TopicPartition(self.remote, p, ck.OFFSET_BEGINNING) for p in parts])
        try:
            while not self._stop.is_set():
                # consume() with a timeout waits for its whole batch: a record would be timed
                # when the batch is full, not when it arrived
                msgs = c.consume(num_messages=1000, timeout=0)
                if not msgs:
                    first = c.poll(0.05)
                    msgs = [first] if first is not None else []
                now = time.time() * 1000
                for m in msgs:
                    if m.error() is not None:
                        continue
                    kind = chr(m.key()[0])
                    self.got[kind] = self.got.get(kind, 0) + 1
                    if kind == "s":
                        self.arrived.setdefault(int(m.key()[1:]), now)
        finally:
            c.close()


def send_singles(source: str, topic: str, pool: bytes, kind: str) -> None:
    """One record per partition, each alone in its batch, keys ``<kind><partition>``."""
    p = ck.Producer(
        {"bootstrap.servers": source, "batch.num.messages": 1, "linger.ms": 0, "acks": "all"}
    )
    for part in range(PARTITIONS):
        p.produce(topic, make_value(pool, part, 200), kind.encode() + b"%d" % part, partition=part)
        p.flush(30)


def send_at_rate(
    source: str, topic: str, pool: bytes, rate: float, seconds: float, kind: str = "s"
) -> tuple[dict[int, float], dict[int, float]]:
    """``rate`` records/s of 200 B for ``seconds`` over the partitions, keys ``<kind><n>``;
    returns, per record number, its CreateTime (epoch ms) and the source broker's
    acknowledgement time - CreateTime in ms."""
    # A queue of 2 minutes of load: while a broker restarts on the same cores the source's
    # acknowledgements may fall 20 s behind, and librdkafka's default queue (100,000 records)
    # filled before any copy was measured. A record's wait in it counts in its end-to-end time.
    p = ck.Producer(
        {
            "bootstrap.servers": source,
            "linger.ms": 5,
            "acks": "all",
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": max(100_000, int(rate * 120)),
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    created: dict[int, float] = {}
    acked: dict[int, float] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            n, ts = int(msg.key()[1:]), msg.timestamp()[1]
            created[n] = ts
            acked[n] = time.time() * 1000 - ts

    total = int(rate * seconds)
    start = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - start) * rate) + 1)
        while sent < due:
            p.produce(
                topic,
                make_value(pool, sent, 200),
                kind.encode() + b"%d" % sent,
                partition=sent % PARTITIONS,
                on_delivery=on_delivery,
            )
            sent += 1
        p.poll(0)
        time.sleep(0.002)
    if p.flush(60) > 0 or len(acked) != total:
        raise RuntimeError(f"steady producer: {len(acked)} of {total} records acknowledged")
    return created, acked


@dataclass
class Load:
    """What the load phase measured."""

    receiver: Receiver
    source_ack: dict[int, float]  # per load record sent: the source broker's ack - CreateTime
    warm_s: float  # from the mirror's start until the warm-up records were replicated
    window_s: float  # from the load's start until the last record arrived (+1 s)
    machine_cpu_s: float  # over the window
    mirror_cpu_s: float  # the mirror's process tree, over the window
    start_ms: float
    end_ms: float
    broker_cpu_s: float = 0.0  # both brokers, over the window


def drive(
    source: str,
    target: str,
    topic: str,
    remote: str,
    rate: float,
    seconds: float,
    proc: subprocess.Popen,
    meter: Meter,
    t0: float,
    warm_load_s: float = 0,
    on_load: Callable[[], None] | None = None,
) -> Load:
    """Warm up, load at ``rate``, wait until every load record was received (up to 120 s).

    ``warm_load_s``: first load at ``rate`` this long (keys ``u*``), left out of the figures.
    ``on_load``: called as the measured load starts (it must not block: a fault to time)."""
    pool = value_pool()
    receiver = Receiver(target, remote).start()
    try:
        send_singles(source, topic, pool, "w")
        deadline = time.monotonic() + 240
        while receiver.got["w"] < PARTITIONS:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mirror did not replicate the warm-up records")
            time.sleep(0.1)
        warm = time.monotonic() - t0
        if warm_load_s > 0:
            log(f"warm-up replicated after {warm:.1f} s; {warm_load_s:.0f} s of warm load")
            sent = len(send_at_rate(source, topic, pool, rate, warm_load_s, "u")[0])
            deadline = time.monotonic() + 120
            while receiver.got.get("u", 0) < sent and time.monotonic() < deadline:
                time.sleep(0.1)
        log(f"warm-up replicated after {warm:.1f} s; starting the load")
        cpu0, tree0, tc0 = machine_cpu_s(), meter.sampler.cpu_total(), time.monotonic()
        brokers0 = broker_cpu_s(meter.broker_pids)
        start_ms = time.time() * 1000
        if on_load is not None:
            on_load()
        created, source_ack = send_at_rate(source, topic, pool, rate, seconds)
        end_ms = time.time() * 1000
        send_singles(source, topic, pool, "t")  # push the high watermark past the last batch
        deadline = time.monotonic() + 120
        while len(receiver.arrived) < len(source_ack) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
        window = time.monotonic() - tc0
        load_cpu = machine_cpu_s() - cpu0
        tree_cpu = meter.sampler.cpu_total() - tree0
        brokers = broker_cpu_s(meter.broker_pids) - brokers0
    finally:
        receiver.stop()
    receiver.time_against(created)
    return Load(receiver, source_ack, warm, window, load_cpu, tree_cpu, start_ms, end_ms, brokers)


def summarize(
    label: str,
    load: Load,
    metrics: list[dict[str, Any]],
    queries: int | None,
    rate: float,
    peak_rss_mb: float,
) -> dict[str, Any]:
    """The steady run's result: end-to-end latency, the metrics topic's latency, CPU, memory."""
    lat = sorted(load.receiver.lat)
    acks = sorted(load.source_ack.values())
    after = sorted(e2e - load.source_ack[n] for n, e2e in load.receiver.by_seq.items())
    received = len(load.receiver.by_seq)
    p50s = [e["latency_ms"]["p50"] for e in metrics if e.get("latency_ms")]
    p99s = [e["latency_ms"]["p99"] for e in metrics if e.get("latency_ms")]
    return {
        "label": label,
        "queries": queries,
        "rate": rate,
        "seconds": round((load.end_ms - load.start_ms) / 1000, 1),
        "sent": len(load.source_ack),
        "received": received,
        "warmup_s": round(load.warm_s, 1),
        "e2e_p50_ms": round(pct(lat, 50), 1) if lat else None,
        "e2e_p99_ms": round(pct(lat, 99), 1) if lat else None,
        "e2e_max_ms": round(lat[-1], 1) if lat else None,
        "e2e_mean_ms": round(statistics.fmean(lat), 1) if lat else None,
        "source_ack_p50_ms": round(pct(acks, 50), 1) if acks else None,
        "source_ack_p99_ms": round(pct(acks, 99), 1) if acks else None,
        "after_ack_p50_ms": round(pct(after, 50), 1) if after else None,
        "after_ack_p99_ms": round(pct(after, 99), 1) if after else None,
        "after_ack_max_ms": round(after[-1], 1) if after else None,
        "slow_seconds": slow_seconds(load.receiver.by_seq, rate),
        "tail_spread": tail_spread(load.receiver.by_seq, rate, pct(lat, 99)) if lat else None,
        "metrics_chunks": len(metrics),
        "metrics_median_p50_ms": round(statistics.median(p50s), 1) if p50s else None,
        "metrics_max_p99_ms": round(max(p99s), 1) if p99s else None,
        "machine_cpu_per_s": round(load.machine_cpu_s / load.window_s, 2),
        "mirror_cpu_per_s": round(load.mirror_cpu_s / load.window_s, 2),
        "broker_cpu_per_s": round(load.broker_cpu_s / load.window_s, 2),
        "peak_rss_mb": round(peak_rss_mb),
        "duplicates": load.receiver.got["s"] - received,
        "ok": received == len(load.source_ack) and load.receiver.got["s"] == received,
    }


def slow_seconds(by_seq: dict[int, float], rate: float, over_ms: float = 1_000) -> dict[int, int]:
    """Second of the load (record number / rate) -> how many of its records took over
    ``over_ms`` end to end: whether a tail is one stall or spread over the run."""
    slow: dict[int, int] = {}
    for n, ms in by_seq.items():
        if ms > over_ms:
            second = int(n / rate)
            slow[second] = slow.get(second, 0) + 1
    return dict(sorted(slow.items()))


def tail_spread(by_seq: dict[int, float], rate: float, over_ms: float) -> dict[str, Any]:
    """Where the records over ``over_ms`` (the p99) fell: in how many seconds of the load, and
    the three seconds with the most: one stall decides a p99 as much as a broad tail does."""
    slow = slow_seconds(by_seq, rate, over_ms)
    top = sorted(slow.items(), key=lambda kv: -kv[1])[:3]
    return {"seconds": len(slow), "top": dict(sorted(top))}


def pct(sorted_values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of sorted values."""
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]
