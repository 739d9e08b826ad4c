"""Record an agent run once, replay it offline (CI without a GPU or an API key; docs/replay.md).

``Cassette`` is the shared store; its reader, chat cache and teacher calls record into it
and replay from it; ``pytest_plugin`` is the ``decision_cassette`` fixture.
"""

from agentbranch.replay.cassette import Cassette, ReplayMissError, cassette_reader
from agentbranch.replay.chat import CassetteCache
from agentbranch.replay.format import FORMAT_VERSION, CassetteFormatError
from agentbranch.replay.keys import request_key
from agentbranch.replay.modes import MODES, RecordMode, default_mode
from agentbranch.replay.readers import CassetteReader

__all__ = [
    "FORMAT_VERSION",
    "MODES",
    "Cassette",
    "CassetteCache",
    "CassetteFormatError",
    "CassetteReader",
    "RecordMode",
    "ReplayMissError",
    "cassette_reader",
    "default_mode",
    "request_key",
]
