"""A latency probe that cannot be the bottleneck: the load and the measuring consumer each run
in a process of their own (``python -m bench.probe load|measure``).

``load`` produces ``--rate`` records a second of ``--size`` bytes in 5 ms ticks, round-robin over
the partitions, keys ``<sequence number>``; it keeps each record's CreateTime and the time the
source broker acknowledged it, and its source offset. ``measure`` follows the copy with one
``read_committed`` consumer that takes records one at a time (``poll``: a batched
``consume(n, timeout)`` holds the first records back until the batch is full or the timeout
ends) and keeps each one's arrival time and its partition and offset on the target; records
whose keys are not numbers (a bench's own warm-up records) are passed over.
Latency is arrival minus CreateTime, on one machine's clock; the first ``--warm`` seconds of the
load are left out. :func:`floor` measures the probe itself: load and consumer on one broker's
topic, nothing copied in between.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TICK_S = 0.005
_PY = [sys.executable, "-m", "bench.probe"]
_ROOT = Path(__file__).resolve().parent.parent  # where `-m bench.probe` is found


def _load(args: argparse.Namespace) -> int:
    import confluent_kafka as ck

    producer = ck.Producer({
        "bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": args.linger_ms,
        "enable.idempotence": True, "batch.size": 1_000_000, "log_level": 3,
    })  # fmt: skip
    total = int(args.rate * args.seconds)
    created = [0.0] * total
    acked = [0.0] * total
    offsets = [-1] * total
    value = b"." * args.size

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            n = int(msg.key())
            created[n] = float(msg.timestamp()[1])
            acked[n] = time.time() * 1000
            offsets[n] = msg.offset()

    start = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - start) * args.rate) + 1)
        while sent < due:
            producer.produce(
                args.topic, value, b"%d" % sent, partition=sent % args.partitions,
                on_delivery=delivered,
            )  # fmt: skip
            sent += 1
        producer.poll(0)
        next_tick = start + (int((time.monotonic() - start) / TICK_S) + 1) * TICK_S
        time.sleep(max(0.0, next_tick - time.monotonic()))
    producer.flush(120)
    Path(args.out).write_text(json.dumps({"created": created, "acked": acked, "offsets": offsets}))
    return 0


def _measure(args: argparse.Namespace) -> int:
    import confluent_kafka as ck

    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    consumer = ck.Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": f"probe-{time.time_ns()}",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "fetch.wait.max.ms": 5, "fetch.error.backoff.ms": 5, "log_level": 3,
    })  # fmt: skip
    parts = [ck.TopicPartition(args.topic, p, ck.OFFSET_BEGINNING) for p in range(args.partitions)]
    consumer.assign(parts)
    arrived: dict[int, float] = {}
    landed: dict[int, tuple[int, int]] = {}  # where each record is on the target
    ready = Path(args.out).with_suffix(".ready")
    ready.write_text("")
    deadline = time.monotonic() + args.timeout
    while not stop["now"] and len(arrived) < args.expect and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is None or msg.error() is not None or not (key := msg.key() or b"").isdigit():
            continue
        n = int(key)
        if n not in arrived:
            arrived[n] = time.time() * 1000
            landed[n] = (msg.partition() or 0, msg.offset() or 0)  # a record has both
    consumer.close()
    Path(args.out).write_text(json.dumps({"arrived": arrived, "landed": landed}))
    return 0


@dataclass
class Result:
    """One probe run: per record, CreateTime, the source's acknowledgement and the arrival."""

    created: list[float]
    acked: list[float]
    arrived: dict[int, float]
    warm: int  # records left out at the start
    offsets: list[int] = field(default_factory=list)  # each record's source offset
    landed: dict[int, tuple[int, int]] = field(default_factory=dict)  # target (partition, offset)

    def by_record(self) -> dict[int, float]:
        """Arrival minus CreateTime of every measured record, by record number (ms)."""
        return {
            n: t - self.created[n]
            for n, t in self.arrived.items()
            if n >= self.warm and self.created[n]
        }

    def latencies(self) -> list[float]:
        """Arrival minus CreateTime of every measured record, sorted (ms)."""
        return sorted(self.by_record().values())

    def summary(self) -> dict[str, Any]:
        lat = self.latencies()
        sent = len(self.created) - self.warm
        acks = sorted(
            a - c
            for a, c in zip(self.acked[self.warm :], self.created[self.warm :], strict=True)
            if c
        )
        # the copy's share: what a record spent after the source acknowledged it
        after = sorted(
            t - self.acked[n] for n, t in self.arrived.items() if n >= self.warm and self.acked[n]
        )
        return {
            "records": sent,
            "received": len(lat),
            "p50_ms": round(pct(lat, 50), 1) if lat else None,
            "p99_ms": round(pct(lat, 99), 1) if lat else None,
            "max_ms": round(lat[-1], 1) if lat else None,
            "source_ack_p50_ms": round(pct(acks, 50), 1) if acks else None,
            "source_ack_p99_ms": round(pct(acks, 99), 1) if acks else None,
            "after_ack_p50_ms": round(pct(after, 50), 1) if after else None,
            "after_ack_p99_ms": round(pct(after, 99), 1) if after else None,
        }


@dataclass(frozen=True)
class Load:
    """What the load process produces: ``rate`` records a second of ``size`` bytes to
    ``partitions`` partitions of ``topic``, ``warm_s`` left out and then ``seconds`` measured."""

    topic: str
    partitions: int
    rate: float
    seconds: float
    warm_s: float
    size: int = 200

    @property
    def total_s(self) -> float:
        return self.warm_s + self.seconds


def run(
    source: str,
    target: str,
    remote: str,
    load: Load,
    workdir: Path,
    on_load: Callable[[], None] | None = None,
) -> Result:
    """Produce ``load`` on ``source`` and measure ``remote`` on ``target``; both in processes
    of their own. ``on_load`` is called as the load starts."""
    workdir.mkdir(parents=True, exist_ok=True)
    measured = workdir / f"probe-{load.topic}-measure.json"
    loaded = workdir / f"probe-{load.topic}-load.json"
    measure = subprocess.Popen(_measure_cmd(target, remote, load, measured), cwd=_ROOT)
    try:
        ready = measured.with_suffix(".ready")
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline and measure.poll() is None:
            time.sleep(0.05)
        if on_load is not None:
            on_load()
        subprocess.run(
            _load_cmd(source, load, loaded), check=True, timeout=load.total_s + 300, cwd=_ROOT
        )
        measure.wait(load.total_s + 240)
    finally:
        if measure.poll() is None:
            measure.send_signal(signal.SIGTERM)
            measure.wait(30)
    data = json.loads(loaded.read_text())
    got = json.loads(measured.read_text())
    arrived = {int(k): v for k, v in got["arrived"].items()}
    landed = {int(k): (p, o) for k, (p, o) in got["landed"].items()}
    warm = int(load.rate * load.warm_s)
    return Result(data["created"], data["acked"], arrived, warm, data["offsets"], landed)


def _measure_cmd(bootstrap: str, topic: str, load: Load, out: Path) -> list[str]:
    """The ``measure`` process that follows ``topic`` through ``load``."""
    total = int(load.rate * load.total_s)
    return [
        *_PY, "measure", "--bootstrap", bootstrap, "--topic", topic, "--partitions",
        str(load.partitions), "--expect", str(total), "--timeout", str(load.total_s + 180),
        "--out", str(out),
    ]  # fmt: skip


def _load_cmd(bootstrap: str, load: Load, out: Path) -> list[str]:
    """The ``load`` process that produces ``load``."""
    return [
        *_PY, "load", "--bootstrap", bootstrap, "--topic", load.topic, "--partitions",
        str(load.partitions), "--rate", str(load.rate), "--seconds", str(load.total_s),
        "--size", str(load.size), "--out", str(out),
    ]  # fmt: skip


def floor(
    bootstrap: str,
    load: Load,
    workdir: Path,
    on_load: Callable[[], None] | None = None,
    beside: str | None = None,
) -> Result:
    """The probe's own floor: the load and the consumer on one topic of one cluster. With
    ``beside``, another cluster takes the same load meanwhile and a consumer of its own reads
    it, as a copy's source and reader would: the machine as a copy's run has it."""
    if beside is None:
        return run(bootstrap, bootstrap, load.topic, load, workdir, on_load)
    side: list[subprocess.Popen[bytes]] = []
    out = workdir / "beside"

    def start() -> None:
        out.mkdir(parents=True, exist_ok=True)
        side.append(
            subprocess.Popen(
                _measure_cmd(beside, load.topic, load, out / "measure.json"), cwd=_ROOT
            )
        )
        side.append(subprocess.Popen(_load_cmd(beside, load, out / "load.json"), cwd=_ROOT))
        if on_load is not None:
            on_load()

    try:
        return run(bootstrap, bootstrap, load.topic, load, workdir, start)
    finally:
        running = [proc for proc in side if proc.poll() is None]
        for proc in running:  # all told first, so that one slow to stop cannot spare another
            proc.send_signal(signal.SIGTERM)
        for proc in running:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def pct(sorted_values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of sorted values."""
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probe")
    sub = parser.add_subparsers(dest="command", required=True)
    load = sub.add_parser("load", help="produce at a steady rate, keep CreateTime and acks")
    measure = sub.add_parser("measure", help="follow a topic read_committed, one record a poll")
    for p in (load, measure):
        p.add_argument("--bootstrap", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--partitions", type=int, required=True)
        p.add_argument("--out", required=True)
    load.add_argument("--rate", type=float, required=True)
    load.add_argument("--seconds", type=float, required=True)
    load.add_argument("--size", type=int, default=200)
    load.add_argument("--linger-ms", type=float, default=0)
    measure.add_argument("--expect", type=int, required=True)
    measure.add_argument("--timeout", type=float, required=True)
    args = parser.parse_args(argv)
    return _load(args) if args.command == "load" else _measure(args)


if __name__ == "__main__":
    sys.exit(main())
