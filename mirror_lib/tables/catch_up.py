"""Materialization on the driver: internal topics -> delta-rs tables, without a Spark query.

Over delta-rs, a continuous ``mirror run`` calls :func:`materialize_once` every 30 s on a driver
thread (:class:`~mirror_lib.replication.companions.threads.TablesJob`) and ``--once`` calls it
once at its end. Each call reads the internal topics from where the tables stand to their
current end, decodes them (:mod:`mirror_lib.tables.decode`) and appends them with
:func:`~mirror_lib.tables.positions.append_unseen` in chunks. A Spark query instead cost a
``--once`` run 5-11 CPU-s and 5-9 s (bench/journal/2026-11-24-once-tables-without-spark.md).

Where to start reading, per partition: the later of the saved positions
(``<state>/clusters/<cluster>/materialize-once.json``, written after each chunk's commits) and
the last committed batch of a materialization query (:mod:`mirror_lib.spark.materialize`, run
by earlier versions). Both are points every table is committed through. Whatever is read again
(after a crash, or what the other path already wrote) is filtered out by the tables' positions,
so no row is written twice.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import BrokerError, MirrorRuntimeError
from mirror_lib.kafka.admin import admin_client
from mirror_lib.kafka.clients import client_config
from mirror_lib.kafka.lookups import list_topic_partitions, positions, settled_bounds
from mirror_lib.kafka.reader import read_ranges
from mirror_lib.mm2.formats import TP
from mirror_lib.tables.decode import RawRecord, decode_records
from mirror_lib.tables.delta_rs import ensure_tables
from mirror_lib.tables.location import tables_root
from mirror_lib.tables.positions import append_unseen

#: Topics a materialization reads; decode.classify drops anything else that matches.
INTERNAL_PATTERN = r".*(mm2-offset-syncs|checkpoints|heartbeats|mm2-metrics).*"
#: Records decoded and committed together (bounds the driver's memory on a long backlog).
CHUNK_RECORDS = 50_000
#: How long a materialization waits for the markers of transactions that committed just
#: before it (:func:`~mirror_lib.kafka.lookups.settled_bounds`): a run's last metrics.
SETTLE_S = 5.0


def policy_and_location(config: MirrorConfig, cluster: str) -> tuple[Any, str]:
    """The replication policy and offset-syncs location that decode ``cluster``'s topics."""
    flows = [f for f in config.enabled_flows() if f.target == cluster] or list(config.flows)
    flow = flows[0]
    return flow.policy(), flow.settings.offset_syncs_location


def spark_query_folder(config: MirrorConfig, cluster: str) -> Path:
    """The checkpoint folder of the materialization query of ``cluster``."""
    return (Path(config.state_dir) / "clusters" / cluster / "materialize").resolve()


def positions_file(config: MirrorConfig, cluster: str) -> Path:
    """Where the driver's materialization of ``cluster`` saves its positions."""
    return (Path(config.state_dir) / "clusters" / cluster / "materialize-once.json").resolve()


def spark_query_positions(folder: Path) -> dict[TP, int]:
    """Next offsets after the last batch the Spark query committed (none: ``{}``).

    ``offsets/<n>`` is a ``v1`` line, a metadata line and the source's offset
    ``{"topics": {...}}``; ``commits/<n>`` exists once batch n's output is committed.
    """

    def ids(sub: str) -> set[int]:
        names = os.listdir(folder / sub) if (folder / sub).is_dir() else []
        return {int(n) for n in names if n.isdigit()}

    done = ids("commits") & ids("offsets")
    if not done:
        return {}
    lines = (folder / "offsets" / str(max(done))).read_text().splitlines()
    return positions(json.loads(lines[2])) if len(lines) > 2 else {}


def _load(path: Path) -> dict[TP, int]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {(t, int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}


def _save(path: Path, done: dict[TP, int]) -> None:
    data: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(done.items()):
        data.setdefault(topic, {})[str(partition)] = offset
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)  # atomic: a crash leaves the old or the new positions


def materialize_once(
    config: MirrorConfig,
    cluster: str,
    timeout_s: float | None = 300,
    stopping: Callable[[], bool] | None = None,
) -> int:
    """Materialize everything ``cluster``'s internal topics hold now; returns the records read.

    ``stopping()`` true ends the read after the chunk being committed (a run that stops).
    Raises :class:`MirrorRuntimeError` when the topics cannot be read to their end within
    ``timeout_s``; every chunk committed before stays in the tables.
    """
    conf = client_config(config.cluster(cluster), "admin")
    admin = admin_client(conf, f"cluster {cluster}")
    pattern = re.compile(INTERNAL_PATTERN)
    counts = list_topic_partitions(admin)
    tps = [(t, p) for t, n in counts.items() if pattern.fullmatch(t) for p in range(n)]
    bounds = settled_bounds(admin, tps, SETTLE_S)
    path = positions_file(config, cluster)
    done = _load(path)
    for tp, pos in spark_query_positions(spark_query_folder(config, cluster)).items():
        done[tp] = max(done.get(tp, pos), pos)
    ranges: list[tuple[str, int, int, int]] = []
    restarted: set[tuple[str, str, int]] = set()
    for tp, (lo, hi) in sorted(bounds.items()):
        begin = done.get(tp)
        if begin is not None and begin > hi:  # deleted and created again: offsets start over
            restarted.add((cluster, *tp))
        begin = lo if begin is None or begin < lo or begin > hi else begin
        if hi > begin:
            ranges.append((tp[0], tp[1], begin, hi))
    if not ranges:
        return 0
    root = tables_root(config)
    ensure_tables(root)
    policy, location = policy_and_location(config, cluster)
    consumer = client_config(config.cluster(cluster), "consumer", client_id="mirror|tables")
    consumer["group.id"] = "__mirror_records"
    chunk: list[RawRecord] = []
    read = 0

    def commit() -> None:
        tables, _bad = decode_records(chunk, cluster=cluster, policy=policy,
                                      syncs_location=location)  # fmt: skip
        prefix = f"part-once-{cluster}-{int(time.time() * 1000)}"
        append_unseen(root, tables, prefix, restarted=restarted)
        for rec in chunk:
            done[(rec.topic, rec.partition)] = rec.offset + 1
        _save(path, done)
        chunk.clear()

    try:
        for msg in read_ranges(consumer, ranges, timeout_s):
            ts_type, ts = msg.timestamp()
            chunk.append(RawRecord(msg.topic(), msg.partition(), msg.offset(), msg.key(),
                                   msg.value(), ts if ts_type else -1))  # fmt: skip
            read += 1
            if len(chunk) >= CHUNK_RECORDS:
                commit()
                if stopping is not None and stopping():
                    return read
    except BrokerError as exc:
        raise MirrorRuntimeError(
            f"materialization of {cluster} did not catch up: {exc}; "
            "the tables keep every committed chunk",
            transient=True,
        ) from exc
    commit()
    done.update({(t, p): stop for t, p, _start, stop in ranges})
    _save(path, done)
    return read
