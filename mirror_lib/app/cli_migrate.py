"""Subcommands of ``mirror`` for migrations: ``verify``, ``cutover``, ``hand-back`` (to
MirrorMaker 2), and the offsets of consumers that are not consumer groups
(``translate --spark-checkpoint`` / ``--offsets-json``).

Kept apart from :mod:`mirror_lib.app.cli`, which only registers them: argument parsing and printing
here, one library call each.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.config.parse import load_config
from mirror_lib.errors import ConfigError
from mirror_lib.replication.migration.spark_checkpoint import (
    CheckpointOffsets,
    Offsets,
    format_restart,
    parse_offsets_json,
    read_spark_checkpoint,
    translate_consumer_offsets,
)


def _names(values: list[str] | None) -> list[str] | None:
    """``--topics a b,c`` -> [a, b, c]; None when not given."""
    if not values:
        return None
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def _session(wanted: bool, config: MirrorConfig) -> Any:
    if not wanted:
        return None
    from mirror_lib.spark.session import command_session  # lazy: pyspark

    return command_session(config)


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 when no partition differs or holds stray records (and, with --require-complete,
    none is behind)."""
    from mirror_lib.kafka.reach import check_flow_clusters  # lazy: confluent-kafka
    from mirror_lib.replication.migration.verify import format_report, verify_flow

    config = load_config(args.config)
    check_flow_clusters(config, [config.flow(args.flow).name], kept="nothing was verified")
    report = verify_flow(
        config,
        args.flow,
        _names(args.topics),
        spark=_session(args.spark, config),
        resume=not args.full,
        record=not args.no_record,
    )
    print(json.dumps(report.as_dict(), indent=2) if args.json else format_report(report))
    good = report.complete if args.require_complete else report.ok
    return 0 if good else 1


def cmd_cutover(args: argparse.Namespace) -> int:
    """Exit 0 when every step asked for is done (or, dry run, would be allowed)."""
    # lazy: confluent-kafka, deltalake
    from mirror_lib.replication.migration.cutover import CutoverOptions, format_cutover, run_cutover

    config = load_config(args.config)
    options = CutoverOptions(
        groups=_names(args.groups),
        topics=_names(args.topics),
        producers_stopped=args.producers_stopped,
        apply=args.apply,
        retire=args.retire,
        max_lag=args.max_lag,
        max_age_s=args.max_age,
        wait_s=args.wait,
    )
    result = run_cutover(config, args.flow, options, spark=_session(args.spark, config))
    text = json.dumps(result.as_dict(), indent=2, default=str) if args.json else None
    print(text or format_cutover(result))
    return 0 if result.ok else 1


def cmd_hand_back(args: argparse.Namespace) -> int:
    """Exit 0 when MM2's positions were written (or, dry run, shown)."""
    # lazy: confluent-kafka
    from mirror_lib.replication.migration.mm2_handback import format_hand_back, hand_back

    config = load_config(args.config)
    rows = hand_back(config, args.flow, apply=args.apply)
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
    else:
        print(format_hand_back(rows, args.apply))
    return 0


def cmd_translate_offsets(args: argparse.Namespace) -> int:
    """``translate --spark-checkpoint`` / ``--offsets-json``: startingOffsets for the target."""
    if not (args.source and args.target):
        raise ConfigError("--source/--target", None, "both cluster aliases (e.g. A and B)")
    config = load_config(args.config)
    offsets: Offsets | CheckpointOffsets
    if args.spark_checkpoint:
        offsets = read_spark_checkpoint(args.spark_checkpoint)
    else:
        offsets = parse_offsets_json(args.offsets_json)
    restart = translate_consumer_offsets(config, offsets, args.source, args.target)
    print(json.dumps(restart.as_dict(), indent=2) if args.json else format_restart(restart))
    return 0


def add_commands(sub: Any) -> None:
    """Register ``verify``, ``cutover`` and ``hand-back`` on the ``mirror`` subparsers."""
    verify = sub.add_parser("verify", help="prove the copy of a flow complete, per partition")
    verify.add_argument("config", help="mm2.properties file")
    verify.add_argument("--flow", required=True, help="A->B")
    verify.add_argument("--topics", nargs="+", help="source topics (default: all of the flow)")
    verify.add_argument("--json", action="store_true", help="machine-readable output")
    verify.add_argument("--full", action="store_true", help="from the start, not the stored point")
    verify.add_argument("--no-record", action="store_true", help="do not write `verifications`")
    verify.add_argument("--spark", action="store_true", help="one Spark task per partition")
    verify.add_argument(
        "--require-complete", action="store_true", help="exit 1 also when a partition is behind"
    )
    verify.set_defaults(func=cmd_verify)
    cut = sub.add_parser("cutover", help="tracked move of a flow's consumers from A to B")
    cut.add_argument("config", help="mm2.properties file")
    cut.add_argument("--flow", required=True, help="A->B")
    cut.add_argument("--groups", nargs="+", help="consumer groups (default: the flow's groups)")
    cut.add_argument("--topics", nargs="+", help="source topics (default: all of the flow)")
    cut.add_argument(
        "--producers-stopped", action="store_true", help="producers now write to B, not A"
    )
    cut.add_argument("--apply", action="store_true", help="make the changes (default: dry run)")
    cut.add_argument("--retire", action="store_true", help="mark migrated partitions retired")
    cut.add_argument(
        "--max-lag",
        type=int,
        default=10_000,
        help="readiness: records behind (default: %(default)s)",
    )
    cut.add_argument(
        "--max-age",
        type=float,
        default=300,
        help="readiness: checkpoint and heartbeat age in seconds (default: %(default)s)",
    )
    cut.add_argument(
        "--wait",
        type=float,
        default=300,
        help="seconds to wait for the last copy (default: %(default)s)",
    )
    cut.add_argument("--spark", action="store_true", help="verify with Spark tasks")
    cut.add_argument("--json", action="store_true", help="machine-readable output")
    cut.set_defaults(func=cmd_cutover)
    back = sub.add_parser(
        "hand-back", help="write MirrorMaker 2's positions so that it continues where we stand"
    )
    back.add_argument("config", help="mm2.properties file (the one MirrorMaker 2 runs from)")
    back.add_argument("--flow", required=True, help="A->B")
    back.add_argument("--apply", action="store_true", help="write them (default: dry run)")
    back.add_argument("--json", action="store_true", help="machine-readable output")
    back.set_defaults(func=cmd_hand_back)


def add_translate_options(cmd: argparse.ArgumentParser) -> None:
    """``translate``'s options for consumers outside consumer groups."""
    cmd.add_argument("--spark-checkpoint", help="a Spark Structured Streaming checkpoint folder")
    cmd.add_argument("--offsets-json", help='offsets kept by the consumer: {"topic": {"0": 12}}')
