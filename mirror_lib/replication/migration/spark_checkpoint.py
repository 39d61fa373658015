"""Move consumers that keep their offsets outside Kafka, Spark Structured Streaming first.

A Spark query reading Kafka stores its positions in its checkpoint, not in a consumer group:
``offsets/<batch>`` holds, after a ``v1`` line and a metadata JSON line, one JSON line per source
such as ``{"orders":{"0":123,"1":456}}`` (the next offsets to read once the batch is done), and
``commits/<batch>`` exists once the batch's output is committed. The last committed batch's
offsets are what the query has fully processed; translated through the flow's exact segments
they are the ``startingOffsets`` of the same query restarted on the target with a fresh
checkpoint. ``--offsets-json`` takes the same JSON from consumers that store offsets themselves.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError, MirrorRuntimeError
from mirror_lib.replication.context import FlowContext

Offsets = dict[str, dict[int, int]]


def _fs(path: str) -> tuple[Any, str]:
    from pyarrow import fs  # lazy: optional extra "delta/spark"

    if "://" in path:
        return fs.FileSystem.from_uri(path)
    return fs.LocalFileSystem(), os.path.abspath(path)


def _batch_ids(filesystem: Any, folder: str) -> list[int]:
    from pyarrow import fs  # lazy: optional extra "delta/spark"

    try:
        infos = filesystem.get_file_info(fs.FileSelector(folder))
    except (FileNotFoundError, OSError):
        return []
    return sorted(int(i.base_name) for i in infos if i.base_name.isdigit())


def parse_offset_log(text: str, where: str = "<offset log>") -> Offsets:
    """Kafka source offsets of one Spark offset-log file (every source line merged)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("v"):
        raise ConfigError(where, lines[0] if lines else "", "a Spark offset log starting with v1")
    out: Offsets = {}
    for line in lines[2:]:  # lines[1]: batch metadata (watermark, timestamp, conf)
        if line.strip() == "-":  # a source without offsets in this batch
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ConfigError(where, line[:80], "one JSON object per source line") from exc
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            continue  # not a Kafka source (e.g. a file or rate source of the same query)
        for topic, parts in value.items():
            out.setdefault(topic, {}).update(_partitions(parts, where))
    return out


def _partitions(parts: dict[str, Any], where: str) -> dict[int, int]:
    try:
        return {int(p): int(o) for p, o in parts.items()}
    except (TypeError, ValueError) as exc:
        raise ConfigError(where, parts, 'partition -> offset, e.g. {"0": 123}') from exc


def parse_offsets_json(text: str) -> Offsets:
    """``{"topic": {"0": 123}}`` given inline or as the path of a file holding it."""
    raw = text.strip()
    if not raw.startswith("{"):
        try:
            with open(raw, encoding="utf-8") as f:
                raw = f.read()
        except OSError as exc:
            raise ConfigError("--offsets-json", text, "a JSON object or a file with one") from exc
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigError("--offsets-json", text[:80], '{"topic": {"0": 123}}') from exc
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError("--offsets-json", text[:80], '{"topic": {"0": 123}}')
    return {t: _partitions(p, "--offsets-json") for t, p in value.items()}


@dataclass(frozen=True)
class CheckpointOffsets:
    """The offsets a query has fully processed: those of its last committed batch."""

    path: str
    batch_id: int
    offsets: Offsets


def read_spark_checkpoint(path: str) -> CheckpointOffsets:
    """Offsets of the latest batch id present in ``<path>/commits`` (from ``<path>/offsets``)."""
    filesystem, root = _fs(path)
    commits = _batch_ids(filesystem, f"{root}/commits")
    if not commits:
        raise ConfigError(
            "--spark-checkpoint", path, "a Spark checkpoint folder with a committed batch "
            "(commits/<batch id>); the query may not have finished a batch yet"
        )  # fmt: skip
    batch = commits[-1]
    offsets_file = f"{root}/offsets/{batch}"
    try:
        with filesystem.open_input_stream(offsets_file) as f:
            text = f.read().decode("utf-8")
    except (FileNotFoundError, OSError) as exc:
        raise MirrorRuntimeError(
            f"{offsets_file} is missing although batch {batch} is committed; nothing was read"
        ) from exc
    return CheckpointOffsets(path, batch, parse_offset_log(text, offsets_file))


@dataclass
class ConsumerRestart:
    """Where a consumer continues on the target: per partition, and as Spark options."""

    source: str
    target: str
    rows: list[dict[str, Any]]
    batch_id: int | None = None
    topics: dict[str, str] = field(default_factory=dict)  # source topic -> remote topic

    @property
    def starting_offsets(self) -> dict[str, dict[str, int]]:
        """Spark's ``startingOffsets`` for the remote topics on the target."""
        out: dict[str, dict[str, int]] = {}
        for r in self.rows:
            out.setdefault(r["remote_topic"], {})[str(r["partition"])] = r["offset"]
        return out

    @property
    def options(self) -> dict[str, str]:
        """Kafka source options of the restarted query (subscribe; assign as the alternative)."""
        return {
            "subscribe": ",".join(sorted(self.topics.values())),
            "startingOffsets": json.dumps(self.starting_offsets, sort_keys=True),
        }

    @property
    def assign(self) -> str:
        parts: dict[str, list[int]] = {}
        for r in self.rows:
            parts.setdefault(r["remote_topic"], []).append(r["partition"])
        return json.dumps({t: sorted(p) for t, p in sorted(parts.items())})

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "batch_id": self.batch_id,
            "partitions": self.rows,
            "startingOffsets": self.starting_offsets,
            "subscribe": self.options["subscribe"],
            "assign": self.assign,
            "topics": self.topics,
        }


def translate_consumer_offsets(
    config: MirrorConfig, offsets: Offsets | CheckpointOffsets, source: str, target: str
) -> ConsumerRestart:
    """Translate next-to-read offsets on ``source`` to the matching offsets on ``target``.

    Exact: each offset becomes the target offset of the first record at or after it that
    was replicated, so the consumer neither re-reads nor skips a record. Fails for a partition
    the flow has not replicated yet when its offset is past 0, for an offset older than the
    segments the metrics topic still keeps, and for one MirrorMaker 2 copied before the flow
    took the partition over.
    """
    batch = offsets.batch_id if isinstance(offsets, CheckpointOffsets) else None
    positions = offsets.offsets if isinstance(offsets, CheckpointOffsets) else offsets
    ctx = FlowContext.create(config, f"{source}->{target}")
    # lazy: confluent-kafka
    from mirror_lib.kafka.reach import check_flow_clusters
    from mirror_lib.replication.translate import copied_by_mm2, older_than_kept, scan_segments

    check_flow_clusters(config, [ctx.flow.name], ("target",), kept="nothing was read")

    needed = {(t, p): u for t, parts in positions.items() for p, u in parts.items()}
    scan = scan_segments(ctx, needed)  # back from the end, only as far as needed
    rows, topics = [], {}
    for topic, parts in sorted(positions.items()):
        topics[topic] = ctx.remote_topic(topic)
        for partition, upstream in sorted(parts.items()):
            mm2 = scan.mm2_below.get((topic, partition))
            if mm2 is not None and upstream < mm2:
                raise MirrorRuntimeError(
                    f"{topic}[{partition}] at offset {upstream}: {copied_by_mm2(mm2)}; we have "
                    "no exact translation of it"
                )
            floor = scan.floor.get((topic, partition))
            if floor is not None and upstream < floor:
                raise MirrorRuntimeError(
                    f"{topic}[{partition}] at offset {upstream}: {older_than_kept(floor)}, so "
                    f"it cannot be translated exactly ({ctx.metrics_topic})"
                )
            index = scan.indexes.get((topic, partition))
            down = None if index is None else index.translate(upstream)
            if down is None:
                if upstream > 0:
                    raise MirrorRuntimeError(
                        f"{topic}[{partition}] at offset {upstream}: nothing of it was "
                        f"replicated by {ctx.flow.name} yet; nothing to translate"
                    )
                down = 0
            rows.append({
                "topic": topic, "partition": partition, "upstream_offset": upstream,
                "remote_topic": topics[topic], "offset": down,
            })  # fmt: skip
    return ConsumerRestart(source, target, rows, batch, topics)


def spark_restart_on_target(
    config: MirrorConfig, checkpoint: str, source: str, target: str
) -> ConsumerRestart:
    """Library call for notebooks: read a query's checkpoint and translate it for ``target``."""
    return translate_consumer_offsets(config, read_spark_checkpoint(checkpoint), source, target)


def format_restart(restart: ConsumerRestart) -> str:
    """Per partition offsets, then the options to restart the query on the target."""
    lines = []
    if restart.batch_id is not None:
        lines.append(f"last committed batch: {restart.batch_id}")
    lines.append(
        f"{'topic':<32} {'partition':>9} {'offset':>10}  {'on ' + restart.target:<32} offset"
    )
    for r in restart.rows:
        lines.append(
            f"{r['topic']:<32} {r['partition']:>9} {r['upstream_offset']:>10}  "
            f"{r['remote_topic']:<32} {r['offset']}"
        )
    opts = restart.options
    lines += [
        f"restart on {restart.target} with a NEW checkpointLocation and:",
        f'  .option("subscribe", "{opts["subscribe"]}")   # was: the source topics',
        f"  .option(\"startingOffsets\", '{opts['startingOffsets']}')",
        f"  (with assign instead of subscribe: .option(\"assign\", '{restart.assign}'))",
    ]
    return "\n".join(lines)
