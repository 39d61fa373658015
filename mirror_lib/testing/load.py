"""A steady load on a source topic, from a process of its own, for fault tests.

Records ``k<i>`` / ``v<i>`` go to partition ``i % partitions`` at ``rate`` records a second, in
ticks of ``tick_ms``, through an idempotent producer with ``acks = all`` that retries for up to
``timeout_s`` (default 10 minutes): a rolling restart or a lost leader of the source delays
records, never loses or repeats them. :meth:`SteadyLoad.stop` (SIGTERM) ends the load, waits for
every acknowledgement and returns the counts.

Run ``python -m mirror_lib.testing.load --help`` for the command; :class:`SteadyLoad` starts it.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror_lib.testing import processes

#: What a run of the load reports at its end (``--out``): records acknowledged and failed.
RESULT_KEYS = ("acked", "failed", "sent", "seconds")


@dataclass
class SteadyLoad(processes.ChildProcess):
    """The load process: started by :meth:`start`, ended by :meth:`stop`."""

    bootstrap: str
    topic: str
    partitions: int
    rate: float
    workdir: Path
    value_bytes: int = 100

    @property
    def log_path(self) -> Path:
        return self.workdir / f"load-{self.topic}.log"

    @property
    def out_path(self) -> Path:
        return self.workdir / f"load-{self.topic}.json"

    def start(self) -> SteadyLoad:
        cmd = [
            sys.executable, "-m", "mirror_lib.testing.load",
            "--bootstrap", self.bootstrap, "--topic", self.topic,
            "--partitions", str(self.partitions), "--rate", str(self.rate),
            "--value-bytes", str(self.value_bytes), "--out", str(self.out_path),
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.adopt(proc)
        return self

    def acked(self) -> int:
        """Records acknowledged so far (the process writes its count every second)."""
        try:
            return int(json.loads(self.out_path.read_text())["acked"])
        except (OSError, ValueError, KeyError):
            return 0

    def stop(self, timeout_s: float = 180) -> None:  # type: ignore[override]
        """End the load: no new records, every record in flight acknowledged or failed."""
        super().stop(timeout_s)

    def result(self) -> dict[str, Any]:
        """The counts the process wrote at its end (after :meth:`stop`)."""
        return dict(json.loads(self.out_path.read_text()))


def record(i: int, value_bytes: int) -> tuple[bytes, bytes]:
    """Key and value of record ``i`` of a load: ``k<i>`` and ``v<i>`` padded to ``value_bytes``."""
    value = f"v{i}".encode()
    return f"k{i}".encode(), value + b"." * max(0, value_bytes - len(value))


def main(argv: list[str] | None = None) -> int:
    """The load process (see the module docstring)."""
    import confluent_kafka as ck  # lazy: optional extra "kafka"

    parser = argparse.ArgumentParser(prog="python -m mirror_lib.testing.load")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True, help="records a second")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--tick-ms", type=float, default=10)
    parser.add_argument("--linger-ms", type=float, default=20, help="the producer's linger.ms")
    parser.add_argument("--timeout-s", type=float, default=600, help="delivery timeout")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    stopping = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(now=True))
    counts = {"acked": 0, "failed": 0}

    def delivered(err: Any, _msg: Any) -> None:
        counts["failed" if err is not None else "acked"] += 1

    producer = ck.Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": args.linger_ms,
            "message.timeout.ms": int(args.timeout_s * 1000),
            "log_level": 3,
        }
    )
    started = time.monotonic()
    sent = 0
    next_report = started + 1
    tick = args.tick_ms / 1000

    def report(final: bool = False) -> None:
        data = {**counts, "sent": sent, "seconds": round(time.monotonic() - started, 3)}
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps({**data, "final": final}))
        tmp.replace(args.out)

    while not stopping["now"]:
        due = int((time.monotonic() - started) * args.rate)
        while sent < due:
            key, value = record(sent, args.value_bytes)
            try:
                producer.produce(
                    args.topic, value, key, partition=sent % args.partitions, on_delivery=delivered
                )
            except BufferError:
                break  # the queue is full (the source is away): try again next tick
            sent += 1
        producer.poll(tick)
        if time.monotonic() >= next_report:
            report()
            next_report += 1
    producer.flush(args.timeout_s)
    report(final=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
