"""What ``mirror --help`` and ``mirror COMMAND --help`` say beyond the options (examples, exit
codes), and the shell completion scripts of ``mirror completion``, generated from the parser so
that they name exactly the commands and options it has.

Kept apart from :mod:`mirror_lib.app.cli`, which builds the parser and runs the commands.
"""

from __future__ import annotations

import argparse
import shlex

EXIT_CODES = """\
exit codes:
  0    success
  1    a runtime failure (a cluster unreachable, a step refused); the message says what
       failed and what was kept
  2    invalid input: a config key or an argument, named with its value and the valid form
       (mirror validate --strict: also any warning)
  3    mirror status: a flow past --max-lag, --max-age or --max-p99
  130  interrupted (Ctrl-C); everything started was stopped"""

USAGE_HINT = "mirror COMMAND --help describes a command; mirror --help lists them all"

MAIN = f"""\
examples:
  mirror validate mm2.properties             check a config, print what each flow would do
  mirror run mm2.properties --once           copy what is there now, then exit
  mirror status mm2.properties               lag, latency and ages per flow
  mirror demo                                two local brokers, end to end

{EXIT_CODES}

-v/--verbose (before or after the command) also shows librdkafka's own log lines.
{USAGE_HINT}."""

#: command -> its examples and exit codes (the epilog of ``mirror COMMAND --help``).
EPILOGS = {
    "validate": """\
examples:
  mirror validate mm2.properties             flows, topic naming, internal topics, warnings
  mirror validate mm2.properties --strict    exit 2 on any warning too (for CI)
  mirror validate mm2.properties --json      the same as JSON (copy_warnings: the first ones)

Warnings that change what is copied (a typo in `topics`, a flow naming a cluster that
`clusters` does not list) come first. Nothing connects to a cluster.
exit codes: 0 valid; 2 invalid input (with --strict: also a warning)""",
    "run": """\
examples:
  mirror run mm2.properties --once                    copy what is there now, then exit
  mirror run mm2.properties --once --json > run.json  and a summary of what was copied
  mirror run mm2.properties --once --timeout 900      exit 1 if not caught up by then
  mirror run mm2.properties                           continuously; Ctrl-C stops cleanly
  mirror run mm2.properties --flow 'A->B' --duration 600

Each cluster is checked first: an unreachable one is one line within about 10 s.
exit codes: 0 done; 1 failed (a cluster unreachable, not caught up in time: what was
committed is kept); 2 invalid input; 130 interrupted""",
    "translate": """\
examples:
  mirror translate mm2.properties --group orders-app --source A --target B
  mirror translate mm2.properties --group orders-app --source A --target B --json
  mirror translate mm2.properties --spark-checkpoint /chk/q1 --source A --target B

Reads the target only (the checkpoints are there), so it answers while the source is down.
exit codes: 0 translated; 1 failed (the target unreachable); 2 invalid input""",
    "failover": """\
examples:
  mirror failover mm2.properties --group orders-app --source A --target B          dry run
  mirror failover mm2.properties --group orders-app --source A --target B --apply  commit

The dry run's `action` column says what --apply does per partition: `would commit`,
`kept (...)` where the target is already at or past the translated offset, `would rewind`
(only with --rewind). Stop the group's consumers before --apply.
exit codes: 0 shown or committed; 1 refused (active members, no checkpoints, the target
unreachable): nothing was changed; 2 invalid input""",
    "verify": """\
examples:
  mirror verify mm2.properties --flow 'A->B'
  mirror verify mm2.properties --flow 'A->B' --topics orders --require-complete --json
exit codes: 0 no partition differs; 1 a partition differs or holds strays (with
--require-complete: or is behind), or a cluster is unreachable; 2 invalid input""",
    "cutover": """\
examples:
  mirror cutover mm2.properties --flow 'A->B'                      dry run: what would happen
  mirror cutover mm2.properties --flow 'A->B' --producers-stopped --apply
exit codes: 0 every step asked for is done (dry run: allowed); 1 a step refused or waiting;
2 invalid input""",
    "hand-back": """\
examples:
  mirror hand-back mm2.properties --flow 'A->B'            dry run: MM2's positions
  mirror hand-back mm2.properties --flow 'A->B' --apply    write them; then start MM2
exit codes: 0 shown or written; 1 failed; 2 invalid input""",
    "status": """\
examples:
  mirror status mm2.properties                   figures over the last 5 minutes
  mirror status mm2.properties --window 1h --json
  mirror status mm2.properties --max-lag 10000 --max-age 300 --max-p99 2000   for alerting

records, rec/s and p50/p99 are over the window (its length is in the headers); lag and the
checkpoint and heartbeat ages are the latest. Reads the Delta tables, not Kafka.
exit codes: 0 fine (or a config that never ran, without --max-*); 3 a flow past a --max-*
threshold, or without the figure it asks about; 2 invalid input""",
    "dashboard": """\
examples:
  mirror dashboard mm2.properties --out health.html
exit codes: 0 written; 1 no tables to read yet; 2 invalid input""",
    "demo": """\
examples:
  mirror demo                                   45 s on two embedded tansu brokers
  mirror demo --duration 20 --workdir /tmp/demo
  mirror demo --broker kafka                    on Apache Kafka (needs java and mvn)
exit codes: 0 done; 1 failed""",
    "completion": """\
examples:
  source <(mirror completion bash)              in ~/.bashrc
  source <(mirror completion zsh)               in ~/.zshrc
exit codes: 0 printed; 2 another shell""",
}

#: options whose value is a file or folder (completed as paths); others take free text
_PATH_OPTIONS = ("--out", "--workdir", "--spark-checkpoint", "--offsets-json")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--")]


def _takes_text(parser: argparse.ArgumentParser) -> set[str]:
    """Options that take a value that is neither a choice nor a path (a group id, a number)."""
    return {
        s
        for a in parser._actions
        if a.option_strings and a.nargs != 0 and not a.choices
        for s in a.option_strings
        if s.startswith("--") and s not in _PATH_OPTIONS and a.dest != "help"
    }


def _choices(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    return {
        s: [str(c) for c in a.choices]
        for a in parser._actions
        if a.choices and a.option_strings
        for s in a.option_strings
    }


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``mirror``'s commands and their parsers, in the order of its help."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``mirror`` for ``shell`` (bash, or zsh through its bash
    completion layer): command names, each command's options and their choices, and paths for
    the config file and the options that take one."""
    commands = subcommands(parser)
    cases = []
    for name, cmd in commands.items():
        cases.append(f"        {shlex.quote(name)}) opts={shlex.quote(' '.join(_options(cmd)))} ;;")
    choices = {k: v for cmd in commands.values() for k, v in _choices(cmd).items()}
    choice_cases = [
        f'        {opt}) COMPREPLY=($(compgen -W {shlex.quote(" ".join(v))} -- "$cur")); return ;;'
        for opt, v in sorted(choices.items())
    ]
    top = " ".join(_options(parser))
    text = sorted({s for cmd in commands.values() for s in _takes_text(cmd)})
    body = f"""\
# {shell} completion of mirror, generated by `mirror completion {shell}`
_mirror() {{
    # $2: the word being completed, $3: the one before (bash, and zsh's bashcompinit); the
    # words between the program and it are sliced, which counts from 0 in both shells
    local cur="$2" prev="$3" cmd="" word opts
    for word in "${{COMP_WORDS[@]:1:$((COMP_CWORD - 1))}}"; do
        case "$word" in -*) ;; *) cmd="$word"; break ;; esac
    done
    if [[ -z "$cmd" ]]; then
        COMPREPLY=($(compgen -W {shlex.quote(" ".join(commands) + " " + top)} -- "$cur"))
        return
    fi
    case "$prev" in
{chr(10).join(choice_cases)}
        {"|".join(_PATH_OPTIONS)}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        {"|".join(text)}) COMPREPLY=(); return ;;
    esac
    case "$cmd" in
{chr(10).join(cases)}
        *) opts="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
"""
    if shell == "zsh":
        body += "autoload -U +X bashcompinit && bashcompinit\n"  # zsh reads bash's completion
    return body + "complete -o filenames -F _mirror mirror\n"
