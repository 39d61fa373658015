"""MirrorMaker 2's own Java code as the judge: small programs compiled at test time against the
``mm2`` jar set (tests/helpers/java), run in a JVM each, answering in JSON.

* :meth:`Mm2Java.translate`: ``RemoteClusterUtils.translateOffsets(props, alias, group, timeout)``
  for each group.
* :meth:`Mm2Java.decode`: every record of a topic through ``OffsetSync``, ``Checkpoint`` or
  ``Heartbeat.deserializeRecord``.
* :meth:`Mm2Java.replay`: an offset-syncs topic replayed into MM2's own ``OffsetSyncStore``, and
  its translation of upstream offsets.
* :meth:`Mm2Java.names`: the aliases and topic names MM2's dedicated mode gives each flow of an
  mm2.properties file (no broker needed).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mirror_lib.testing import kafka_jars
from mirror_lib.testing.kafka_jvm import java_binary

SOURCES = Path(__file__).parent / "java"
_LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
"""


class Mm2Java:
    """The compiled helpers in ``folder`` (compiled on construction)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "log4j2.properties").write_text(_LOG4J)
        javac = str(Path(java_binary()).with_name("javac"))
        sources = sorted(str(p) for p in SOURCES.rglob("*.java"))
        done = subprocess.run(
            [javac, "-d", str(self.folder), "-cp", kafka_jars.classpath("mm2"), *sources],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"javac failed:\n{done.stdout}{done.stderr}")

    def _run(self, main: str, *args: str, client: Mapping[str, str] | None = None) -> Any:
        cmd = [
            java_binary(),
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
            *(f"-Dmm2client.{k}={v}" for k, v in (client or {}).items()),
            "-cp",
            f"{self.folder}:{kafka_jars.classpath('mm2')}",
            main,
            *args,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
        if done.returncode != 0:
            raise AssertionError(f"{main} {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def translate(
        self,
        bootstrap: str,
        remote_alias: str,
        groups: Sequence[str],
        client: Mapping[str, str] | None = None,
    ) -> dict[str, dict[tuple[str, int], int]]:
        """``{group: {(topic, partition): offset}}`` as ``RemoteClusterUtils.translateOffsets``
        answers on ``bootstrap`` for checkpoints from ``remote_alias``."""
        rows = self._run("Mm2Translate", bootstrap, remote_alias, *groups, client=client)
        out: dict[str, dict[tuple[str, int], int]] = {g: {} for g in groups}
        for row in rows:
            out[row["group"]][(row["topic"], row["partition"])] = row["offset"]
        return out

    def decode(self, bootstrap: str, topic: str, kind: str) -> dict[str, Any]:
        """``{"records": n, "failed": [...], "decoded": [...]}`` of every record of ``topic``;
        ``kind``: offset-sync, checkpoint or heartbeat."""
        return self._run("Mm2Decode", bootstrap, topic, kind)

    def replay(
        self, bootstrap: str, syncs_topic: str, queries: list[tuple[str, int, int]]
    ) -> dict[tuple[str, int, int], int | None]:
        """``{(topic, partition, upstream): downstream}`` from MM2's ``OffsetSyncStore`` fed
        every record of ``syncs_topic`` (-1: too old; None: no sync for the partition)."""
        args = [f"{t}:{p}:{u}" for t, p, u in queries]
        rows = self._run("org.apache.kafka.connect.mirror.Mm2SyncReplay", bootstrap, syncs_topic,
                         *args)  # fmt: skip
        return {(r["topic"], r["partition"], r["upstream"]): r["downstream"] for r in rows}

    def names(self, properties: Path, topic: str = "orders") -> dict[str, dict[str, Any]]:
        """``{flow: {"enabled", "source_alias", "target_alias", "offset_syncs", "checkpoints",
        "remote_topic", "remote_heartbeats"}}`` as MM2's own connector configurations name them
        for the flows of ``properties`` (``remote_topic``: the remote name of ``topic``)."""
        rows = self._run("org.apache.kafka.connect.mirror.Mm2Names", str(properties), topic)
        return {r.pop("flow"): r for r in rows}
