"""``agentbranch``: the command line, one module per command group.

* ``agentbranch demo`` — the support-triage graph over the shipped sample tickets
  (``agentbranch.cli.demo``).
* ``agentbranch decide STATE --choice/--yes-no/--score ...`` — one decision
  (``agentbranch.cli.decide``).
* ``agentbranch calibrate LABELED.jsonl`` — fit temperatures, report, save, diagram
  (``agentbranch.cli.calibrate``).
* ``agentbranch engine`` — which engine the environment selects, and why
  (``agentbranch.cli.engine``).
* ``agentbranch bench`` — the read paths timed side by side (``agentbranch.cli.bench``; the
  harness is the ``agentbranch_bench`` package).
* ``agentbranch replay diff OLD NEW`` — drift between two cassettes (``agentbranch.cli.replay``).
* ``agentbranch audit report AUDITS.jsonl`` — the take band's precision vs a teacher
  (``agentbranch.cli.audit``).
* ``agentbranch size`` and ``agentbranch deploy kserve`` — capacity plans
  (``agentbranch.cli.deploy``).

Each command imports what it runs (the engine, scipy, matplotlib, the bench harness)
inside its function, so ``agentbranch --help`` loads none of it.
"""

from __future__ import annotations

import typer

from agentbranch.cli import audit, bench, calibrate, decide, demo, deploy, engine, replay
from agentbranch.cli.flags import show_flags_as_flags

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
app.command()(bench.bench)
app.add_typer(replay.replay_app, name="replay")
app.add_typer(audit.audit_app, name="audit")
deploy.register(app)  # size, deploy kserve
# Help shows --json, --single, --help ... as flags, without a value (cli/flags.py).
show_flags_as_flags(app)

__all__ = ["app"]
