"""transformers held quiet around the embedded reader's loading and tracing: no
progress bars and no records below ERROR from the loading thread (the library is
silent), without touching anyone else's (``agentbranch.engine.quiet_loads``)."""

from __future__ import annotations

from agentbranch.engine.quiet_loads import quiet_loads as quiet_transformers

__all__ = ["quiet_transformers"]
