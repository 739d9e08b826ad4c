"""``agentbranch``: the command line, one module per command group
(``agentbranch.cli.<group>``). Each command imports what it runs inside its function, so
``agentbranch --help`` loads none of it."""

from __future__ import annotations

import typer

from agentbranch.cli import (
    audit,
    calibrate,
    decide,
    demo,
    deploy,
    engine,
    replay,
    verify,
)
from agentbranch.cli.common import show_flags_as_flags

app = typer.Typer(
    name="agentbranch",
    help="LangGraph agents branch on typed, measured decisions.",
    no_args_is_help=True,
    add_completion=False,
)

# The order here is the order `agentbranch --help` lists them in.
app.command()(demo.demo)
app.command()(decide.decide)
app.command()(calibrate.calibrate)
app.command()(engine.engine)
app.command(cls=verify.VerifyCommand)(verify.verify)
app.add_typer(replay.replay_app, name="replay")
app.add_typer(audit.audit_app, name="audit")
app.command("size")(deploy.size_command)
app.add_typer(deploy.deploy_app, name="deploy")
show_flags_as_flags(app)

__all__ = ["app"]
