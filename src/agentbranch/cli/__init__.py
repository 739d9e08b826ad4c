"""The ``agentbranch`` command line (``agentbranch.cli.main``), one module per command
group. Nothing here is imported by ``import agentbranch``; ``app`` is loaded on first use
so ``agentbranch.cli.common`` and the command modules can be imported alone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typer import Typer

    app: Typer

__all__ = ["app"]


def __getattr__(name: str) -> Any:
    # The console script is `agentbranch.cli.main:app`; `agentbranch.cli:app` (older
    # installs' scripts, `from agentbranch.cli import app`) keeps working through this.
    if name == "app":
        from agentbranch.cli.main import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
