"""``python -m agentbranch.cli``: the ``agentbranch`` command."""

from agentbranch.cli.main import app

app()
