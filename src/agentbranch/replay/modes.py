"""Record modes, as vcrpy and pytest-recording users know them: ``all`` (re-record),
``new`` (replay, record misses), ``none`` (replay only), ``passthrough`` (live); the
default is ``none`` when ``CI`` is set, else ``new`` (docs/replay.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, cast

from agentbranch.core.errors import ConfigurationError

RecordMode = Literal["all", "new", "none", "passthrough"]
MODES: tuple[RecordMode, ...] = ("all", "new", "none", "passthrough")


def default_mode(env: Mapping[str, str] | None = None) -> RecordMode:
    """``none`` when ``CI`` is set (to anything but ``""``, ``0`` or ``false``), else
    ``new``. Reads ``os.environ`` unless ``env`` is given; never writes it."""
    ci = (os.environ if env is None else env).get("CI", "")
    return "none" if ci.strip().lower() not in ("", "0", "false", "no") else "new"


def resolve_mode(mode: str | None, env: Mapping[str, str] | None = None) -> RecordMode:
    """``mode`` checked, or the default for this environment when ``None``."""
    if mode is None:
        return default_mode(env)
    if mode not in MODES:
        raise ConfigurationError(
            f"unknown record mode {mode!r}; use one of {', '.join(MODES)} "
            "(all: re-record, new: record misses, none: replay only, passthrough: live)"
        )
    return cast(RecordMode, mode)


__all__ = ["MODES", "RecordMode", "default_mode", "resolve_mode"]
