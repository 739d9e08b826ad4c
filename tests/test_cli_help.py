"""Every command's help: a flag shows no value, an option that takes one shows its type.

typer 0.29's rich help printed ``--json <bool>``, ``--single <bool>``, ``--help <bool>``
as if they took a value (``--json true`` is an error);
agentbranch.cli.common.show_flags_as_flags fixes every command. This walks the whole command tree, so a new command is checked too.
"""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from agentbranch.cli import app

runner = CliRunner()


def _commands(command, path=()):
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def test_the_walk_finds_every_command():
    paths = {" ".join(p) for p, _ in COMMANDS}
    expected = {"", "demo", "decide", "calibrate", "engine", "verify", "size", "deploy kserve"}
    assert expected <= paths
    assert {"replay diff", "audit report"} <= paths


def _row(help_text: str, option: str) -> str:
    for line in help_text.splitlines():  # an options panel row: "│ [*] --name ..."
        if re.match(rf"│\s+(\*\s+)?{re.escape(option)}(?![\w-])", line):
            return line
    raise AssertionError(f"{option} is not in the help:\n{help_text}")


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "agentbranch" for p, _ in COMMANDS]
)
def test_help_shows_flags_without_a_value(path, command):
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text
    ctx = typer.Context(command)
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False) or param.param_type_name != "option":
            continue
        long = [o for o in param.opts if o.startswith("--")][0]
        row = _row(text, long)
        if param.is_flag:
            assert not re.search(rf"{re.escape(long)}\s+(-\w\s+)?<", row), row
        else:  # an option taking a value still says which kind (the fix blanks flags only)
            assert re.search(rf"{re.escape(long)}\s+(-\w\s+)?<", row), row


def test_a_flag_given_a_value_is_an_error_that_the_help_no_longer_invites():
    result = runner.invoke(app, ["size", "--gpu-gib", "80", "--json", "true"])
    assert result.exit_code != 0
    help_text = runner.invoke(app, ["size", "--help"], env={"COLUMNS": "200"}).output
    assert not re.search(r"--json\s+<", help_text)
