"""What the ``agentbranch`` commands share: the consoles, logging setup, the engine the
environment selects, the ``error:`` exit, number formatting, tables printed readable at
any width (``print_table``) and help that shows a flag as a flag (``show_flags_as_flags``).
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

__all__ = [
    "FlagCommand",
    "FlagGroup",
    "LabelledQuestions",
    "LineQuestion",
    "Verbose",
    "console",
    "err",
    "exit_on_error",
    "fail",
    "fmt",
    "key_value",
    "load_engine",
    "print_table",
    "quiet_logs",
    "read_questions",
    "shown_engine",
    "show_flags_as_flags",
]

console = Console()
err = Console(stderr=True)

#: The flags of the commands that read labelled JSON Lines (calibrate, verify).
LabelledQuestions = Annotated[
    Path | None,
    typer.Option(
        help="The questions file the lines refer to: JSON {id: question} (docs/questions.md)."
    ),
]
LineQuestion = Annotated[
    str | None, typer.Option(help="The question id of lines that carry only text + label.")
]
Verbose = Annotated[bool, typer.Option("--verbose", "-v")]


def quiet_logs(verbose: bool) -> None:
    """The CLI is an application: it may configure logging (the library never does).
    Warnings always, every decision with ``--verbose``, on stderr."""
    logger = logging.getLogger("agentbranch")
    for h in [h for h in logger.handlers if getattr(h, "_agentbranch_cli", False)]:
        logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler._agentbranch_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)


def load_engine(
    calibration: Path | None, permutations: int = 1, reader: str | None = None, code: int = 2
) -> tuple[Any, str]:
    """``DecisionEngine.from_env()`` and why it chose that engine; ``error:`` exit ``code``
    when the environment asks for an engine that cannot be built."""
    from agentbranch.engine.engine import DecisionEngine
    from agentbranch.engine.selection import ENV_ENGINE

    kwargs: dict[str, Any] = {"permutations": permutations}
    if calibration is not None:
        kwargs["calibration"] = str(calibration)
    # --reader NAME forces that engine, as AGENTBRANCH_ENGINE=NAME would.
    env = None if reader in (None, "auto") else {**os.environ, ENV_ENGINE: str(reader)}
    with exit_on_error(code):
        engine = DecisionEngine.from_env(env, **kwargs)
    return engine, engine.selection_reason or ""


def shown_engine(calibration: Path | None, permutations: int = 1, reader: str | None = None) -> Any:
    """``load_engine`` under a status line, then which reader it is and why, on stderr."""
    with err.status("loading the engine…"):
        engine, reason = load_engine(calibration, permutations, reader)
    err.print(
        f"[dim]engine:[/dim] {engine.reader.name} ({engine.reader.model}) — {reason}",
        soft_wrap=True,
    )
    return engine


def fail(message: object, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on stderr; raise the result (exit status ``code``)."""
    err.print(f"[red]error:[/red] {escape(str(message))}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def exit_on_error(code: int = 2, also: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """Run the block; an ``AgentBranchError`` (or one of ``also``) it raises becomes
    ``error: ...`` on stderr and exit status ``code``."""
    from agentbranch.core.errors import AgentBranchError

    try:
        yield
    except (AgentBranchError, *also) as e:
        raise fail(e, code) from None


def read_questions(path: Path) -> dict[str, Any]:
    """``--questions FILE.json``: a JSON object ``{id: wire question}`` (docs/questions.md)."""
    from agentbranch.core.errors import InvalidFileError
    from agentbranch.core.files import read_json

    data = read_json(path, "questions file")
    if not isinstance(data, dict):
        raise InvalidFileError(
            f"questions file {path}: expected a JSON object {{id: question}}, such as "
            '{"urgent": {"type": "noul", "instructions": "Is it urgent?"}} '
            "(docs/questions.md); got "
            f"{type(data).__name__}"
        )
    if not data:
        raise InvalidFileError(
            f"questions file {path} asks nothing: it is an empty object; give it one entry "
            'per question, such as {"urgent": {"type": "noul", "instructions": "Is it '
            'urgent?"}} (docs/questions.md)'
        )
    return data


def fmt(x: float | None, digits: int = 3) -> str:
    """``x`` to ``digits`` decimals; ``-`` for None and NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def print_table(
    console: Console,
    table: Table,
    folded: Callable[[], Iterable[RenderableType]] | None = None,
) -> None:
    """Print ``table`` whole: at its natural width when the console is not a terminal (rich
    takes a pipe, a file or CI logs to be 80 columns, and would split every number of a
    wide table over two lines); on a terminal narrower than it, ``folded()`` instead when
    given (else rich wraps the cells)."""
    need = console.measure(table, options=console.options.update_width(10_000)).maximum
    if not console.is_terminal:
        # print(width=) cannot exceed the console's width: widen the console itself.
        width = console.width
        console.width = max(width, need)
        try:
            console.print(table)
        finally:
            console.width = width
    elif need > console.width and folded is not None:
        for part in folded():
            console.print(part)
    else:
        console.print(table)


def key_value(title: str, rows: Iterable[tuple[str, str]]) -> Table:
    """A two-column table (a name, its value) titled ``title``."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("what", style="cyan", no_wrap=True)
    table.add_column("value")
    for name, value in rows:
        table.add_row(name, value)
    return table


class _FlagsTakeNoValue:
    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False):
                param.display_type_rich = lambda ctx: None
        return params


class FlagCommand(_FlagsTakeNoValue, TyperCommand):
    """A typer command whose help shows no value for a flag."""


class FlagGroup(_FlagsTakeNoValue, TyperGroup):
    """A typer group whose help shows no value for a flag."""


def _default(cls: Any, typer_class: type) -> bool:
    # typer fills in its own class, or a placeholder for "the default", when none is given.
    return cls is None or cls is typer_class or isinstance(cls, DefaultPlaceholder)


def show_flags_as_flags(app: typer.Typer) -> None:
    """Every command and sub-group of ``app``, at any depth, built with the classes above
    (a command or group declared with a ``cls`` of its own keeps it). typer 0.29's rich help
    prints a type for every option (``--json <bool>``), as if a flag took a value; these
    classes blank that column for flags (older typers never read ``display_type_rich``)."""
    if _default(app.info.cls, TyperGroup):
        app.info.cls = FlagGroup
    for command in app.registered_commands:
        if _default(command.cls, TyperCommand):
            command.cls = FlagCommand
    for group in app.registered_groups:  # a group takes its class from its own app
        if group.typer_instance is not None:
            show_flags_as_flags(group.typer_instance)
