"""The ``mirror`` command line: parse arguments, make one library call.

Exit codes: 0 success; 2 invalid input (config, arguments); 1 runtime failure.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib.metadata
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import mirror_lib
from mirror_lib.app.cli_help import EPILOGS, MAIN, USAGE_HINT, completion_script, subcommands
from mirror_lib.app.cli_migrate import add_commands, add_translate_options, cmd_translate_offsets
from mirror_lib.app.status import (
    STATUS_WINDOW_S,
    Thresholds,
    alerts,
    flow_status,
    format_status,
    never_ran,
)
from mirror_lib.app.tracking import MlflowRun
from mirror_lib.config.describe import copy_first, describe_config, format_description
from mirror_lib.config.model import CopyWarning, MirrorConfig
from mirror_lib.config.parse import load_config
from mirror_lib.errors import ConfigError, MirrorError
from mirror_lib.kafka.client_check import BuildReport, check_client_builds
from mirror_lib.kafka.clients import check_clients, routed_librdkafka_logs
from mirror_lib.kafka.reach import diverted_clients
from mirror_lib.spark.jvm import finish_archive_dump

_VERBOSE = "also show librdkafka's own log lines (connection failures, retries) on stderr"


class ArgumentsError(ConfigError):
    """Arguments argparse refuses: its message and where the help is (exit 2, as argparse's)."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(prog, None, message)

    def __str__(self) -> str:
        return f"{self.expected} (see {self.key} --help)"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep one message format
        self.print_usage(sys.stderr)
        raise ArgumentsError(self.prog, message)


def _check_file(config: MirrorConfig) -> tuple[dict[str, Any], BuildReport | None]:
    """What ``validate`` and ``run`` say about a file: :func:`describe_config` with every
    warning (those that change what is copied first, then the settings clients ignore and what
    the offline build of every client notes) and that build (None without confluent-kafka)."""
    description = describe_config(config, client_warnings=check_clients(config))
    try:
        built = check_client_builds(config)  # librdkafka's own refusals, offline (no connection)
    except ImportError:  # the optional "kafka" extra is not installed here
        built = None
    description["warnings"] = copy_first(
        [*description["warnings"], *(built.notes if built else ())]
    )
    return description, built


def _cmd_validate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    description, built = _check_file(config)
    not_built = "clients: not built (confluent-kafka is not installed here)"
    diverted = [d.note() for d in diverted_clients(config)]
    if args.json:
        description["clients"] = (
            {"built": 0, "note": not_built}
            if built is None
            else {
                "built": built.built,
                "elapsed_ms": round(built.elapsed_ms, 1),
                "unresolved": list(built.unresolved),
                "absent": list(built.absent),
                "warnings": list(built.notes),
            }
        )
        description["clients"]["own_bootstrap"] = diverted
        print(json.dumps(description, indent=2, default=str))
    else:
        print(format_description(description))
        for note in diverted:
            print(f"note: {note}")
        print(not_built if built is None else built.summary())
        if description["copy_warnings"] and not args.strict:
            print(
                f"{len(description['copy_warnings'])} warning(s) at the top change what is "
                "copied (mirror validate --strict exits 2 on any warning)"
            )
    if args.strict and description["warnings"]:
        print(
            f"mirror: --strict: {len(description['warnings'])} warning(s), "
            f"{len(description['copy_warnings'])} of them change what is copied",
            file=sys.stderr,
        )
        return 2
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    description, _built = _check_file(config)  # refuses what no client could be built from
    for warning in description["warnings"]:  # as validate says them, copy-changing first
        tag = "warning, changes what is copied" if isinstance(warning, CopyWarning) else "warning"
        print(f"mirror: {tag}: {warning}", file=sys.stderr)
    if args.json and not args.once:
        raise ConfigError("--json", True, "--once with it: the summary is printed at the end")
    flows: dict[str, Any] = {}
    started, outcome, error = time.monotonic(), "caught up", None
    try:
        from mirror_lib.spark.runner import run_flows  # lazy: pyspark

        # with --json, stdout is the summary alone: what the run says goes to stderr
        report = (lambda line: print(line, file=sys.stderr)) if args.json else print
        # logged to MLflow with --mlflow or mirror.mlflow.enabled = true
        mlflow = MlflowRun.when_enabled(config, args.mlflow or None, report=report)
        run_flows(
            None,
            config,
            args.flow,
            report=report,
            observer=mlflow,
            once=args.once,
            duration_s=args.duration,
            timeout_s=args.timeout,
            show_progress=True,
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
            on_summary=flows.update if args.json else None,
        )
    except BaseException as exc:
        outcome = "invalid input" if isinstance(exc, ConfigError) else "failed"
        outcome = "interrupted" if isinstance(exc, KeyboardInterrupt) else outcome
        error = str(exc) or type(exc).__name__
        raise
    finally:
        if args.json:
            seconds = round(time.monotonic() - started, 1)
            summary = {"config": str(args.config), "outcome": outcome, "error": error,
                       "seconds": seconds, "flows": flows}  # fmt: skip
            print(json.dumps(summary, indent=2))
    return 0


def _print_offsets(rows: list, as_json: bool, with_current: bool = False) -> None:
    if as_json:
        extra = ("current", "action") if with_current else ()
        print(json.dumps([{**r.as_dict(), **{k: getattr(r, k) for k in extra}} for r in rows]))
        return
    head = f"{'topic':<40} {'partition':>9} {'offset':>12}"
    print(head + (f" {'current':>12}  action" if with_current else ""))
    for r in rows:
        line = f"{r.topic:<40} {r.partition:>9} {r.offset:>12}"
        if with_current:
            line += f" {'-' if r.current is None else r.current:>12}  {r.action}"
        print(line)


def _cmd_translate(args: argparse.Namespace) -> int:
    # lazy: confluent-kafka, needed by the Kafka commands only
    from mirror_lib.replication.migration.failover import translate_group

    if args.spark_checkpoint or args.offsets_json:
        return cmd_translate_offsets(args)
    if not args.group:
        raise ConfigError("--group", None, "a consumer group id (or --spark-checkpoint PATH)")
    config = load_config(args.config)
    _print_offsets(translate_group(config, args.group, args.source, args.target), args.json)
    return 0


def _cmd_failover(args: argparse.Namespace) -> int:
    # lazy: confluent-kafka, needed by the Kafka commands only
    from mirror_lib.replication.companions.protection import lift_flow_protection
    from mirror_lib.replication.migration.failover import failover_group, format_failover

    config = load_config(args.config)
    rows = failover_group(
        config, args.group, args.source, args.target, apply=args.apply, rewind=args.rewind
    )
    # the flow's remote topics become B's own: other principals may write them
    lift = lift_flow_protection(config, f"{args.source}->{args.target}", apply=args.apply)
    _print_offsets(rows, args.json, with_current=True)
    if not args.json:
        print(format_failover(rows, args.group, args.target, args.apply))
    if lift is not None:
        print(lift.describe(), file=sys.stderr if args.json else sys.stdout)
    return 0


#: ``mirror status``'s exit code when a figure is past a --max-* threshold (or has no value).
ALERT_EXIT = 3


def _window(text: str) -> float:
    """``--window``: seconds, or a number with s, m or h (``300``, ``90s``, ``5m``, ``1h``)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    seconds = float(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[match[2]] if match else 0
    if seconds <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a positive duration such as 300, 90s, 5m or 1h"
        )
    return seconds


def _cmd_status(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    rows = flow_status(config, window_s=args.window)
    limits = Thresholds(args.max_lag, args.max_age, args.max_p99)
    alerted = {r.flow: alerts(r, limits) for r in rows} if limits.any() else {}
    if args.json:
        as_json = {
            r.flow: r.as_dict() | ({"alerts": alerted[r.flow]} if alerted else {}) for r in rows
        }
        print(json.dumps(as_json, indent=2))
    elif rows and not any(r.has_data for r in rows):
        print(never_ran(config))
        for flow, said in alerted.items():
            print(f"{flow}: ALERT: {'; '.join(said)}")
    else:
        print(format_status(rows, limits))
    return ALERT_EXIT if any(alerted.values()) else 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from mirror_lib.app.dashboard import write_dashboard  # lazy: plotly is an extra

    print(write_dashboard(None, load_config(args.config), args.out))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mirror_lib.app.demo import run_demo  # lazy: the demo needs Kafka and Spark

    if args.duration <= 0:
        raise ConfigError("--duration", args.duration, "a positive number of seconds")
    run_demo(args.duration, Path(args.workdir) if args.workdir else None, broker=args.broker)
    return 0


def version() -> str:
    """The installed version (a bundle's wheel adds ``+<timestamp>``), else the source's."""
    try:
        return importlib.metadata.version("mirror_lib")
    except importlib.metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
        return mirror_lib.__version__


def _cmd_completion(args: argparse.Namespace) -> int:
    print(completion_script(build_parser(), args.shell), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand, with examples and exit codes in each help."""
    parser = _Parser(
        prog="mirror",
        description="MirrorMaker-2-compatible replication on Spark.",
        epilog=MAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND"
    )
    validate = sub.add_parser("validate", help="parse and validate a config; print the flows")
    validate.add_argument("config", help="mm2.properties file")
    validate.add_argument("--json", action="store_true", help="machine-readable output")
    validate.add_argument(
        "--strict", action="store_true", help="exit 2 when there is any warning (e.g. in CI)"
    )
    validate.set_defaults(func=_cmd_validate)
    run = sub.add_parser("run", help="run the flows' streaming queries")
    run.add_argument("config", help="mm2.properties file")
    run.add_argument("--flow", action="append", help="A->B (repeatable; default: all enabled)")
    run.add_argument("--once", action="store_true", help="replicate what is there now, then exit")
    run.add_argument(
        "--duration", type=float, help="stop after this many seconds (default: run until stopped)"
    )
    run.add_argument(
        "--timeout",
        type=float,
        help="with --once: give up after this many seconds (default: no limit while it copies)",
    )
    run.add_argument(
        "--json",
        action="store_true",
        help="with --once: print a JSON summary at the end (per flow the topics and source "
        "offsets copied, the time taken, the outcome); what the run says goes to stderr",
    )
    run.add_argument(
        "--mlflow", action="store_true", help="log an MLflow run (or mirror.mlflow.enabled = true)"
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        metavar="N",
        help="serve Prometheus metrics on http://HOST:N/metrics while running (0: off; or "
        "mirror.metrics.port)",
    )
    run.add_argument(
        "--metrics-host",
        metavar="HOST",
        help="address of the metrics endpoint (default 127.0.0.1, or mirror.metrics.host)",
    )
    run.set_defaults(func=_cmd_run)
    for name, func, text in (
        ("translate", _cmd_translate, "translated target offsets of a consumer group"),
        ("failover", _cmd_failover, "show or commit a group's translated offsets on the target"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("config", help="mm2.properties file")
        cmd.add_argument("--group", required=name == "failover", help="consumer group id")
        cmd.add_argument("--source", required=True, help="cluster alias the group consumed on")
        cmd.add_argument("--target", required=True, help="cluster alias to fail over to")
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "failover":
            cmd.add_argument("--apply", action="store_true", help="commit the offsets")
            cmd.add_argument(
                "--rewind",
                action="store_true",
                help="also move back offsets the target has past the translated ones (their "
                "records are read again); without it they are kept",
            )
        else:
            add_translate_options(cmd)
        cmd.set_defaults(func=func)
    add_commands(sub)  # verify, cutover
    status = sub.add_parser("status", help="per flow: last batch, lag, latency, ages")
    status.add_argument("config", help="mm2.properties file")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument(
        "--window",
        type=_window,
        default=STATUS_WINDOW_S,
        metavar="DURATION",
        help="the window of records, rec/s and p50/p99, ending now: seconds, or 90s, 5m, 1h "
        "(default: 5m)",
    )
    status.add_argument(
        "--max-lag",
        type=int,
        metavar="N",
        help=f"exit {ALERT_EXIT} when a flow is more than N records behind (or has no lag yet)",
    )
    status.add_argument(
        "--max-age",
        type=float,
        metavar="SECONDS",
        help=f"exit {ALERT_EXIT} when a flow's "
        "newest checkpoint or heartbeat is older (or there is none)",
    )
    status.add_argument(
        "--max-p99",
        type=float,
        metavar="MS",
        help=f"exit {ALERT_EXIT} when a flow's latency "
        "p99 over the window is above MS milliseconds (or it copied nothing in it)",
    )
    status.set_defaults(func=_cmd_status)
    dashboard = sub.add_parser("dashboard", help="static plotly dashboard from the Delta tables")
    dashboard.add_argument("config", help="mm2.properties file")
    dashboard.add_argument("--out", required=True, help="HTML file to write (self-contained)")
    dashboard.set_defaults(func=_cmd_dashboard)
    demo = sub.add_parser("demo", help="the embedded default end to end (two local brokers)")
    demo.add_argument(
        "--duration",
        type=float,
        default=45,
        help="seconds of live replication (default: %(default)s)",
    )
    demo.add_argument(
        "--workdir", help="folder for brokers' logs, state and tables (default: ./mirror-demo)"
    )
    demo.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        default="tansu",
        help="tansu: embedded, starts in milliseconds (default); kafka: Apache Kafka, "
        "fetched once from Maven Central (needs mvn and java)",
    )
    demo.set_defaults(func=_cmd_demo)
    completion = sub.add_parser("completion", help="print a shell completion script")
    completion.add_argument("shell", choices=("bash", "zsh"), help="the shell it is for")
    completion.set_defaults(func=_cmd_completion)
    parser.add_argument("-v", "--verbose", action="store_true", help=_VERBOSE)
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name, cmd in sub.choices.items():  # SUPPRESS: `mirror --verbose run` and `mirror run -v`
        cmd.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE
        )
        cmd.description = cmd.description or helps.get(name)
        cmd.epilog = EPILOGS.get(name)
        cmd.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def exit_code(call: Callable[[], Any], prog: str = "mirror") -> int:
    """Run ``call``; print a failure in one line and map it to the exit codes above."""
    try:
        result = call()
        return result if isinstance(result, int) else 0
    except ConfigError as exc:
        print(f"{prog}: invalid input: {exc}", file=sys.stderr)
        return 2
    except MirrorError as exc:
        print(f"{prog}: failed: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; everything started was stopped", file=sys.stderr)
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mirror`` console script."""
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # bare `mirror`: how to use it, one line
        commands = ", ".join(subcommands(parser))
        print(f"usage: mirror COMMAND ...: COMMAND is one of {commands}; {USAGE_HINT}",
              file=sys.stderr)  # fmt: skip
        return 2

    def call() -> int:
        args = parser.parse_args(argv)
        with routed_librdkafka_logs(verbose=args.verbose):  # librdkafka's lines: --verbose only
            return int(args.func(args))

    return exit_code(call)


def entry_point() -> None:
    """Console script: run, flush, and exit without interpreter finalization.

    Native runtimes (delta-rs' Tokio threads, librdkafka) can abort the process while Python
    tears them down ("terminate called without an active exception") after the command already
    succeeded; os._exit keeps the command's real exit code. It skips ``atexit`` too, so a JVM
    writing its class-data archive is waited for here.

    A native crash (a segmentation fault in librdkafka, delta-rs or pyarrow) prints every
    thread's Python stack to stderr first, so the run's log names the call that crashed.
    """
    faulthandler.enable()
    code = main()
    finish_archive_dump()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry_point()
