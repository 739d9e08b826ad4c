"""What the ``agentbranch`` commands share: the consoles, logging setup, the engine the
environment selects, the ``error:`` exit and number formatting."""

from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

__all__ = ["console", "err", "fail", "fmt", "load_engine", "quiet_logs", "read_questions"]

console = Console()
err = Console(stderr=True)


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
    calibration: Path | None, permutations: int = 1, reader: str | None = None
) -> tuple[Any, str]:
    """``DecisionEngine.from_env()`` and why it chose that engine; ``error:`` exit 2 when
    the environment asks for an engine that cannot be built."""
    from agentbranch.core.errors import AgentBranchError
    from agentbranch.engine.engine import DecisionEngine
    from agentbranch.engine.selection import ENV_ENGINE

    kwargs: dict[str, Any] = {"permutations": permutations}
    if calibration is not None:
        kwargs["calibration"] = str(calibration)
    # --reader NAME forces that engine, as AGENTBRANCH_ENGINE=NAME would.
    env = None if reader in (None, "auto") else {**os.environ, ENV_ENGINE: str(reader)}
    try:
        engine = DecisionEngine.from_env(env, **kwargs)
        return engine, engine.selection_reason or ""
    except AgentBranchError as e:
        raise fail(e) from None


def fail(message: object) -> typer.Exit:
    """Print ``error: message`` on stderr; raise the result (exit status 2)."""
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def read_questions(path: Path) -> dict[str, Any]:
    """``--questions FILE.json``: a JSON object ``{id: wire question}`` (docs/questions.md)."""
    from agentbranch.core.files import read_json

    data = read_json(path, "questions file")
    if not isinstance(data, dict):
        from agentbranch.core.errors import InvalidFileError

        raise InvalidFileError(
            f"questions file {path}: expected a JSON object {{id: question}}, such as "
            '{"urgent": {"type": "noul", "instructions": "Is it urgent?"}} '
            "(docs/questions.md); got "
            f"{type(data).__name__}"
        )
    if not data:
        from agentbranch.core.errors import InvalidFileError

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
