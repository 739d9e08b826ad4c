"""``agentbranch engine``: which engine the environment selects, and why."""

from __future__ import annotations

from typing import Annotated

import typer

from agentbranch.cli.common import console, exit_on_error, load_engine, quiet_logs

__all__ = ["engine"]


def engine(
    load: Annotated[bool, typer.Option(help="Also build the engine (loads the model).")] = False,
) -> None:
    """Print which engine the environment selects, and why."""
    import os

    from rich.markup import escape

    from agentbranch.core.redact import redact_url
    from agentbranch.engine import selection as sel

    quiet_logs(False)
    with exit_on_error():
        choice = sel.select()
    # soft_wrap: one line per sentence, wrapped by the terminal, not cut mid-phrase by rich.
    console.print(f"[bold]{choice.kind}[/bold]: {escape(choice.reason)}", soft_wrap=True)
    for key in (
        sel.ENV_ENGINE,
        sel.ENV_VLLM_MODEL,
        sel.ENV_REMOTE_URL,
        sel.ENV_REMOTE_MODEL,
        sel.ENV_REMOTE_API_KEY,
        sel.ENV_CALIBRATION,
    ):
        value = os.environ.get(key)
        if not value or key == sel.ENV_REMOTE_API_KEY:
            console.print(f"  {key} ({'set' if value else 'unset'})")
        else:  # a URL's user:password@ and ?token= masked
            shown = redact_url(value) if key == sel.ENV_REMOTE_URL else value
            console.print(f"  {key}={shown}", markup=False, highlight=False)
    if load:
        built, _ = load_engine(None)
        console.print(f"built: {built.reader.name} ({built.reader.model})", soft_wrap=True)
