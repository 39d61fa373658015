"""The peers the bench compares `mirror run` with: MirrorMaker 2 and Spark's Kafka connector.

MirrorMaker 2 is Apache Kafka's own (dedicated mode, ``mirror_lib.testing.mm2``, the jars of the
test brokers' release); it never exits by itself, so a backlog copy is over when the remote topic
holds the source's last record of every partition (``TailWatch``), and the bench then stops it by
its process group. Spark's connector is the job in ``bench/spark_kafka.py``.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from bench.engine import ROOT
from bench.procs import ONE_WAY, replication_factor

PEERS = ("mm2", "spark-kafka")
SPARK_KAFKA_SCRIPT = ROOT / "bench" / "spark_kafka.py"
MM2_TASKS_STARTED = "Starting task MirrorSourceConnector"  # MM2's log line per source task


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for MM2's internal REST server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mm2_properties(source: str, target: str, topic: str, **extra: str) -> dict[str, str]:
    """MM2 replicating ``topic`` A->B with its defaults, plus every replication factor at the
    clusters' (1 on single nodes, 3 on three brokers) and ``extra``. The topic must exist before
    MM2 starts: MM2 looks for new topics only every ``refresh.topics.interval.seconds`` (600 s)."""
    from mirror_lib.testing.mm2 import single_node_settings  # the engine's, after --engine-ref

    factor = {k: replication_factor() for k in single_node_settings()}

    return {
        "clusters": "A, B",
        "A.bootstrap.servers": source,
        "B.bootstrap.servers": target,
        **ONE_WAY,
        "A->B.topics": topic,
        **factor,
        **extra,
    }


def mm2_eos() -> dict[str, str]:
    """MM2's exactly-once settings (Connect's exactly-once source support on B's worker)."""
    from mirror_lib.testing.mm2 import exactly_once_settings

    return exactly_once_settings(free_port())


def mm2_command(props: dict[str, str], workdir: Path) -> list[str]:
    """The ``java`` command of MirrorMaker 2 on ``props``, its files written into ``workdir``."""
    from mirror_lib.testing.mm2 import Mm2Process

    workdir.mkdir(parents=True, exist_ok=True)
    return Mm2Process(props, workdir).command()


def spark_kafka_command(
    source: str, target: str, topic: str, dest: str, checkpoint: Path, trigger: str
) -> list[str]:
    """``python bench/spark_kafka.py ...``: the connector's job copying ``topic`` to ``dest``
    (``trigger``: ``availableNow`` or a processing-time interval such as ``0.5 seconds``)."""
    return [
        sys.executable,
        str(SPARK_KAFKA_SCRIPT),
        "--source",
        source,
        "--target",
        target,
        "--topic",
        topic,
        "--dest",
        dest,
        "--checkpoint",
        str(checkpoint),
        "--trigger",
        trigger,
    ]
