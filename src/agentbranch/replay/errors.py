"""The error a cassette file that cannot be read raises (every replay module raises it)."""

from __future__ import annotations

from agentbranch.core.errors import AgentBranchError

__all__ = ["CassetteFormatError"]


class CassetteFormatError(AgentBranchError, ValueError):
    """A cassette file cannot be read (the message names the file, the line and the
    field), or an entry is too large to record (refused before it is written)."""
