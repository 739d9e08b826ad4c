"""The error a cassette file that cannot be read raises (every replay module raises it)."""

from __future__ import annotations

from agentbranch.core.errors import AgentBranchError

__all__ = ["CassetteFormatError"]


class CassetteFormatError(AgentBranchError, ValueError):
    """A cassette file cannot be read: not found, not a regular file, not UTF-8, corrupt,
    truncated, a field of the wrong type or out of range, written by a newer agentbranch,
    or in the pre-v1 format that cannot be upgraded; or an entry too large to record
    (refused before it is written, so the file stays loadable). The message names the
    file, the line and the field."""
