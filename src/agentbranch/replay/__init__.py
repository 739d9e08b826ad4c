"""Record an agent run once, replay it offline (CI without a GPU or an API key; docs/replay.md).

* ``cassette`` (``Cassette``, the shared store), ``readers``, ``chat``, ``teachers``: what
  records into it and replays from it
* ``schema``, ``entries``, ``format``: what a cassette holds; ``files``: the file on disk
* ``keys``, ``misses``: keys, summaries and what a miss says; ``modes``: record modes
* ``pytest_plugin``: the ``decision_cassette`` fixture; ``diff``, ``cli``: drift reports
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
