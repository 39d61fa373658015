"""A flow under a steady load between two multi-broker clusters, for fault tests.

:class:`FaultFlow` creates a topic on A, starts a :class:`~mirror_lib.testing.load.SteadyLoad`
into it (a process of its own) and a continuous ``mirror run`` (exactly once, four slots by
default) that reaches both clusters through their client listeners, so a cut broker is cut for
the flow too. A :class:`Tail` consumer follows the remote topic on B (``read_committed``) and
keeps every record's CreateTime and arrival time, which gives the time from a fault to copying
again. :meth:`FaultFlow.finish` stops the load, waits until B holds every record and asserts
exactly once per partition, in order, in the raw committed view and the broker's
``read_committed``; :meth:`FaultFlow.check_checkpoints` asserts that consumer groups committed on
A translate exactly.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from mirror_lib.config.parse import load_config
from mirror_lib.replication.migration.failover import translate_group
from mirror_lib.testing.kafka_cluster import KafkaCluster
from mirror_lib.testing.kafka_io import commit_group, consume_all, create_topic
from mirror_lib.testing.load import SteadyLoad
from tests.helpers.exactly_once import committed_count, wait_exactly_once
from tests.helpers.mirror_cli import kill_group, start_mirror
from tests.helpers.waiting import process_alive, wait_for
from tests.integration.conftest import metrics_events, write_properties

PARTITIONS = 8
#: The one-slot variant of a fault test whose four slots run in ``make test``: in
#: ``make fault-matrix`` only, to keep ``make test`` within CI's hour.
ONE_SLOT = pytest.param(1, marks=pytest.mark.fault_matrix)
FIGURES_ENV = "MIRROR_FAULT_FIGURES"
RATE = 400  # records a second: steady, and light enough for nine JVMs and Spark on 2 cores


def three_broker_properties(a: KafkaCluster, b: KafkaCluster, state: Path) -> dict[str, str]:
    """mm2.properties of A->B between multi-broker clusters: replication factor 3 for every
    topic the flow creates, and what the fault tests read (checkpoints, groups, events)."""
    return {
        "clusters": "A, B",
        "A.bootstrap.servers": a.client_bootstrap,
        "B.bootstrap.servers": b.client_bootstrap,
        "A->B.enabled": "true",
        "replication.factor": "3",
        "offset-syncs.topic.replication.factor": "3",
        "checkpoints.topic.replication.factor": "3",
        "heartbeats.topic.replication.factor": "3",
        "mirror.state.dir": str(state),
        "mirror.tables.enabled": "false",
        "emit.checkpoints.interval.seconds": "2",
        "refresh.groups.interval.seconds": "5",
    }


class Tail:
    """Follows a topic (the remote one on B, or the source on A) with a ``read_committed``
    consumer in a thread: per partition, each record's value, CreateTime (ms) and arrival time
    (epoch ms)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.seen: dict[int, list[tuple[bytes, float, float]]] = {p: [] for p in range(partitions)}
        self._stop = threading.Event()
        self._consumer = ck.Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": f"tail-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 20,
            # a broker cut off still answers fetches for partitions it no longer leads, with
            # nothing new: librdkafka's 5-minute metadata refresh left the tail there for 295 s
            # while the copy had resumed after 20 s
            "topic.metadata.refresh.interval.ms": 2000,
            "log_level": 0,
        })  # fmt: skip
        self._thread = threading.Thread(target=self._run, daemon=True, name="tail")

    def start(self) -> Tail:
        self._thread.start()
        return self

    def _run(self) -> None:
        c = self._consumer
        c.assign(
            [ck.TopicPartition(self.topic, p, ck.OFFSET_BEGINNING) for p in range(self.partitions)]
        )
        while not self._stop.is_set():
            for m in c.consume(1000, 0.2):
                if m.error() is None:
                    now = time.time() * 1000
                    self.seen[m.partition()].append((m.value(), float(m.timestamp()[1]), now))
        c.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def recovery_s(self, fault_ms: float) -> float | None:
        """Seconds from the fault until the first record created after it arrived, in the
        partition where that took longest (None: no record created after it arrived yet)."""
        worst = 0.0
        for records in self.seen.values():
            after = [arrived for _v, created, arrived in records if created >= fault_ms]
            if not after:
                return None
            worst = max(worst, (min(after) - fault_ms) / 1000)
        return worst

    def latencies_ms(self, start_ms: float, end_ms: float) -> list[float]:
        """Arrival minus CreateTime of the records created in [start_ms, end_ms)."""
        return sorted(
            arrived - created
            for records in self.seen.values()
            for _v, created, arrived in records
            if start_ms <= created < end_ms
        )


@dataclass
class FaultFlow:
    """One topic, one load and one ``mirror run`` over clusters A and B (see module doc)."""

    a: KafkaCluster
    b: KafkaCluster
    workdir: Path
    topic: str
    env: dict[str, str]
    slots: int = 4
    rate: float = RATE
    partitions: int = PARTITIONS
    extra: dict[str, str] = field(default_factory=dict)
    load: SteadyLoad | None = None
    tail: Tail | None = None
    source_tail: Tail | None = None
    proc: Any = None
    figures: dict[str, Any] = field(default_factory=dict)
    faults: list[float] = field(default_factory=list)  # when each fault began (ms)

    @property
    def remote(self) -> str:
        return f"A.{self.topic}"

    @property
    def log(self) -> Path:
        return self.workdir / "run.log"

    def tail_log(self) -> str:
        try:
            text = self.log.read_text(errors="replace")[-4000:]
        except OSError:
            text = "<no output>"
        cores = sorted(str(p) for p in self.workdir.glob("core*"))
        return text + (f"\ncore dumped: {', '.join(cores)}" if cores else "")

    def alive(self) -> None:
        process_alive(self.proc, detail=self.tail_log)()

    def start(self) -> FaultFlow:
        """Topic, load, run; returns once the run copies."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        create_topic(self.a.bootstrap_servers, self.topic, self.partitions)
        props = three_broker_properties(self.a, self.b, self.workdir / "state")
        props |= {"A->B.topics": self.topic, "A->B.groups": f"{self.topic}-.*"}
        props |= {"tasks.max": str(self.slots), **self.extra}
        config = write_properties(self.workdir / "mm2.properties", props)
        self.load = SteadyLoad(
            self.a.bootstrap_servers, self.topic, self.partitions, self.rate, self.workdir
        ).start()
        self.proc = start_mirror(config, self.env, log=self.log, cwd=self.workdir, core_dumps=True)
        wait_for(
            lambda: committed_count(self.b.bootstrap_servers, self.remote, self.partitions) > 0,
            300,
            "the first copied records",
            self.alive,
            detail=self.tail_log,
        )
        self.tail = Tail(self.b.bootstrap_servers, self.remote, self.partitions).start()
        self.source_tail = Tail(self.a.bootstrap_servers, self.topic, self.partitions).start()
        return self

    def steady(self, seconds: float) -> None:
        """Let the load and the copy run ``seconds`` (the load is the point, not a guess)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.alive()
            time.sleep(1)

    def recovered(self, fault_ms: float, timeout_s: float = 300) -> float:
        """Wait until every partition copies records created after the fault; the seconds it
        took in the slowest partition (also kept in :attr:`figures`)."""
        assert self.tail is not None
        took = wait_for(
            lambda: self.tail.recovery_s(fault_ms) if self.tail else None,
            timeout_s,
            "copying records created after the fault",
            self.alive,
            detail=self.tail_log,
        )
        self.figures.setdefault("recovery_s", []).append(round(took, 2))
        # the part A and the load took: when such a record could be read on A itself
        on_a = self.source_tail.recovery_s(fault_ms) if self.source_tail else None
        self.figures.setdefault("source_s", []).append(None if on_a is None else round(on_a, 2))
        return took

    def fault(self, do: Callable[[], object], timeout_s: float = 300) -> float:
        """Do a fault now and wait until the copy goes on (:meth:`recovered`); its seconds.
        :meth:`conclude` holds each fault's time against the flow's events."""
        self.faults.append(time.time() * 1000)
        do()
        return self.recovered(self.faults[-1], timeout_s)

    def kill(self, cluster: KafkaCluster, node: int, settle_s: float = 10) -> float:
        """SIGKILL ``node`` of ``cluster``; once the copy goes on and ``settle_s`` passed, start
        it again on its data and wait until its replicas are in sync. The recovery's seconds."""
        took = self.fault(lambda: cluster.kill_node(node))
        self.steady(settle_s)
        cluster.start_node(node)
        cluster.wait_in_sync()
        return took

    def roll(self, cluster: KafkaCluster, down_s: float = 5) -> None:
        """Restart ``cluster`` broker by broker, each down ``down_s``; each stop is a fault."""

        def stopped(_node: object) -> None:
            self.fault(lambda: None)

        cluster.rolling_restart(down_s=down_s, on_stop=stopped)

    def conclude(self) -> None:
        """After the faults: copy a little more, then every record exactly once in both views,
        exact checkpoints, and every fault that held the copy up told by a ``resumed`` event."""
        self.steady(5)
        self.finish()
        self.check_checkpoints()
        for fault, took in zip(self.faults, self.figures["recovery_s"], strict=True):
            assert_told(self, fault, took)

    def finish(self, timeout_s: float = 600) -> None:
        """Stop the load; wait for every record on B; exactly once in both views."""
        assert self.load is not None
        self.load.stop()
        result = self.load.result()
        assert result["failed"] == 0, f"the load lost records on A: {result}"
        self.figures["records"] = result["acked"]
        wait_exactly_once(
            self.a.bootstrap_servers,
            self.topic,
            self.b.bootstrap_servers,
            self.remote,
            self.partitions,
            timeout_s,
            alive=self.alive,
        )

    def check_checkpoints(self, timeout_s: float = 180) -> None:
        """Groups committed on A at a quarter, half and three quarters of each partition: their
        checkpoints on B point exactly at the copies of their next records."""
        source = consume_all(self.a.bootstrap_servers, self.topic, timeout_s=120)
        by_part: dict[int, list[Any]] = {p: [] for p in range(self.partitions)}
        for r in source:
            by_part[r.partition].append(r)
        groups = {}
        for i, share in enumerate((0.25, 0.5, 0.75)):
            group = f"{self.topic}-g{i}"
            offsets = {p: recs[int(len(recs) * share)].offset for p, recs in by_part.items()}
            tps = [ck.TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())]
            commit_group(self.a.bootstrap_servers, group, tps)
            groups[group] = offsets
        target = {
            (r.partition, r.offset): r.value
            for r in consume_all(self.b.bootstrap_servers, self.remote, timeout_s=120)
        }
        config = load_config(self.workdir / "mm2.properties")
        for group, offsets in groups.items():

            def translated(g: str = group) -> list[Any]:
                rows = translate_group(config, g, "A", "B")
                return rows if len(rows) == self.partitions else []

            rows = wait_for(
                translated, timeout_s, f"checkpoints of {group}", self.alive, detail=self.tail_log
            )
            for row in rows:
                want = next(
                    r.value for r in by_part[row.partition] if r.offset == offsets[row.partition]
                )
                got = target.get((row.partition, row.offset))
                assert got == want, (
                    f"{group}: A.{self.topic}[{row.partition}] translated to {row.offset}, which "
                    f"holds {got!r}, not the group's next record {want!r}"
                )

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The flow's events of ``kind`` on B's metrics topic."""
        return [e for e in metrics_events(self.b.bootstrap_servers) if e.get("type") == kind]

    def stop(self) -> None:
        for tail in (self.tail, self.source_tail):
            if tail is not None:
                tail.stop()
        if self.load is not None and self.load.is_running():
            self.load.stop()
        if self.proc is not None:
            kill_group(self.proc)

    def report(self, name: str) -> None:
        """Append this fault's figures to ``$MIRROR_FAULT_FIGURES`` (``make fault-matrix``),
        else to ``fault-figures.jsonl`` beside the run."""
        path = Path(os.environ.get(FIGURES_ENV) or self.workdir.parent / "fault-figures.jsonl")
        with path.open("a") as out:
            out.write(json.dumps({"fault": name, **self.figures}) + "\n")


#: A fault that held the copy up this long must be in the flow's events.
TOLD_FROM_S = 2.0
SLACK_MS = 5000.0  # between the events' clock of a commit and the tail's of an arrival


def assert_told(flow: FaultFlow, fault_ms: float, took_s: float, timeout_s: float = 120) -> None:
    """The copy held up ``took_s`` by a fault at ``fault_ms`` is in the flow's events: a
    ``resumed`` event whose wait covers it (within :data:`SLACK_MS`)."""
    if took_s < TOLD_FROM_S:
        return
    stalled_until = fault_ms + took_s * 1000

    def covering() -> list[dict[str, Any]]:
        return [
            e
            for e in flow.events("resumed")
            if e["since_ms"] <= fault_ms + SLACK_MS
            and e["since_ms"] + e["waited_s"] * 1000 >= stalled_until - SLACK_MS
        ]

    found = wait_for(
        covering,
        timeout_s,
        f"a resumed event for the {took_s:.1f}s the copy stopped after the fault",
        flow.alive,
        detail=lambda: str(flow.events("resumed")),
    )
    kept = ("waited_s", "source_s", "reason", "outage_id")
    told = {k: found[0][k] for k in kept if k in found[0]}
    flow.figures.setdefault("told", []).append(told)
