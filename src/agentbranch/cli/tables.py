"""Printing the CLI's rich tables so they stay readable at any width.

Rich lays a table out to the console's width, and a console that is not a terminal (a
pipe, a file, CI logs, ``CliRunner``) is 80 columns: an eight-column table then splits
every number over two lines. Here a table printed anywhere but a terminal gets its
natural width (nothing there wraps at 80), and a table wider than the terminal it is
printed on is shown as ``folded()`` gives it: one narrow table per row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.console import Console, RenderableType
from rich.table import Table

__all__ = ["key_value", "natural_width", "print_table"]


def natural_width(console: Console, table: Table) -> int:
    """The width ``table`` takes when nothing makes it wrap."""
    return console.measure(table, options=console.options.update_width(10_000)).maximum


def print_table(
    console: Console,
    table: Table,
    folded: Callable[[], Iterable[RenderableType]] | None = None,
) -> None:
    """Print ``table`` whole: at its natural width when the console is not a terminal;
    on a terminal narrower than it, ``folded()`` instead when given (else rich wraps
    the cells)."""
    need = natural_width(console, table)
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
