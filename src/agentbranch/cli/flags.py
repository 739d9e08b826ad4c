"""Help that shows a flag as a flag.

typer 0.29's rich help prints a type for every option, flags included (``--json <bool>``,
``--help <bool>``): ``TyperOption.display_type_rich`` does not ask ``is_flag``, though its
plain-text help does. A flag takes no value (``--json true`` is an error), so its row
shows none. ``show_flags_as_flags(app)`` gives every command and group of ``app`` a class
that blanks that column for its flags, the help option included; each option object is
changed, nothing in typer itself. Older typers have no ``display_type_rich`` and print
flags right already: the extra attribute is then never read.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

__all__ = ["FlagCommand", "FlagGroup", "show_flags_as_flags"]


def _no_value(ctx: Any) -> None:
    return None


class _FlagsTakeNoValue:
    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False):
                param.display_type_rich = _no_value
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
    (a command or group declared with a ``cls`` of its own keeps it)."""
    if _default(app.info.cls, TyperGroup):
        app.info.cls = FlagGroup
    for command in app.registered_commands:
        if _default(command.cls, TyperCommand):
            command.cls = FlagCommand
    for group in app.registered_groups:
        if _default(group.cls, TyperGroup):
            group.cls = FlagGroup
        if group.typer_instance is not None:
            show_flags_as_flags(group.typer_instance)
