"""`mirror`'s help (examples, defaults, exit codes), its usage line, its argument errors and its
shell completion, which real bash (and zsh, where installed) runs."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from mirror_lib.app.cli import build_parser, main
from mirror_lib.app.cli_help import EPILOGS, completion_script, subcommands

COMMANDS = [
    "validate", "run", "translate", "failover", "verify", "cutover", "hand-back", "status",
    "dashboard", "demo", "completion",
]  # fmt: skip


def commands() -> dict:
    return subcommands(build_parser())


def test_bare_mirror_prints_one_usage_sentence(capsys):
    assert main([]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == (
        f"usage: mirror COMMAND ...: COMMAND is one of {', '.join(COMMANDS)}; mirror COMMAND "
        "--help describes a command; mirror --help lists them all\n"
    )


def test_the_console_script_says_the_same_with_no_arguments():
    out = subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    assert out.stderr.startswith("usage: mirror COMMAND ...: COMMAND is one of validate, run,")
    assert len(out.stderr.splitlines()) == 1


def test_an_argument_error_names_where_the_help_is(capsys):
    assert main(["run"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "mirror: invalid input: the following arguments are required: config "
        "(see mirror run --help)"
    )


def test_every_command_has_examples_and_exit_codes_in_its_help():
    found = commands()
    assert list(found) == COMMANDS == list(EPILOGS)
    for name, cmd in found.items():
        text = cmd.format_help()
        assert "examples:\n  " in text and f"mirror {name}" in text.split("examples:")[1], name
        assert "exit codes: 0 " in text, name
        assert cmd.description, name
    top = build_parser().format_help()
    for code in ("0 ", "1 ", "2 ", "3 ", "130 "):
        assert f"\n  {code}" in top
    assert "examples:\n  mirror validate mm2.properties" in top


@pytest.mark.parametrize(
    ("command", "option", "default"),
    [("status", "--window", "(default: 5m)"), ("demo", "--duration", "(default: 45)"),
     ("cutover", "--max-lag", "(default: 10000)"), ("cutover", "--wait", "(default: 300")],
)  # fmt: skip
def test_options_with_a_default_say_it(command, option, default):
    text = " ".join(commands()[command].format_help().split())
    assert default in text[text.index(option) :], (command, option)


def complete(shell: str, script: str, *words: str) -> list[str]:
    """What ``_mirror`` offers for ``words`` (the last one is being completed), called as the
    shell's completion calls it: command, current word, previous word."""
    call = (
        'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
        '_mirror mirror "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"'
        if shell == "bash"
        else 'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _mirror mirror "${@[-1]}" "${@[-2]}"'
    )
    setup = "autoload -U compinit && compinit -u\n" if shell == "zsh" else ""
    program = f'{setup}{script}\nt() {{ {call}; printf "%s\\n" "${{COMPREPLY[@]}}"; }}\nt "$@"\n'
    args = [shell, "-f"] if shell == "zsh" else [shell]
    out = subprocess.run(
        [*args, "-c", program, shell, *words], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.splitlines() if w]


def test_bash_completes_commands_options_and_choices(tmp_path):
    script = completion_script(build_parser(), "bash")
    assert script.rstrip().endswith("complete -o filenames -F _mirror mirror")
    assert complete("bash", script, "mirror", "va") == ["validate"]
    assert complete("bash", script, "mirror", "--verbose", "st") == ["status"]
    assert complete("bash", script, "mirror", "status", "my.properties", "--max") == [
        "--max-lag", "--max-age", "--max-p99",
    ]  # fmt: skip
    assert complete("bash", script, "mirror", "demo", "--broker", "") == ["tansu", "kafka"]
    assert complete("bash", script, "mirror", "failover", "c", "--group", "") == []
    (tmp_path / "mm2.properties").write_text("")
    assert complete("bash", script, "mirror", "run", str(tmp_path / "mm2")) == [
        str(tmp_path / "mm2.properties")
    ]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed here")
def test_zsh_runs_the_same_completion_through_bashcompinit():
    script = completion_script(build_parser(), "zsh")
    assert "bashcompinit" in script
    # zsh matches the words itself: the function offers every candidate of the position
    assert "validate" in complete("zsh", script, "mirror", "va")
    assert "--max-p99" in complete("zsh", script, "mirror", "status", "x", "--max")
    assert complete("zsh", script, "mirror", "demo", "--broker", "") == ["tansu", "kafka"]


def test_completion_prints_the_script_and_refuses_another_shell(capsys):
    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out == completion_script(build_parser(), "bash")
    assert main(["completion", "fish"]) == 2
