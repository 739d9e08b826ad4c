"""Record an agent run once, replay it offline (CI without a GPU or an API key).

A **cassette** is one JSON Lines file per run (format 2, ``agentbranch.replay.format``;
its schema is ``agentbranch.replay.schema``): a header, a line declaring each reader and
chat model that recorded into it, one line per engine read (its key, a readable summary
and the raw label log-probabilities), one line per chat-model exchange (messages sent,
reply) and one per other teacher call of a policy (``teachers``: a ``Generate`` fallback
of any Runnable, an audit, a reviewer function; engines reading through the cassette
pass them all through it, so a replay calls no teacher). Every reader and chat model of a run shares it, each keyed by its identity, and
several processes may record into it at once (``agentbranch.replay.files``)::

    from agentbranch.replay import Cassette

    cassette = Cassette("tests/cassettes/triage.jsonl")   # mode: none in CI, else new
    engine = DecisionEngine(cassette.reader(lambda: TransformersReader.from_pretrained(p)))
    graph = build_triage_graph(engine, fallback_model=chat_model)  # Generate replays too
    drafter = cassette.chat_model(ChatOpenAI(model="gpt-4o-mini"))  # any chat model

Record modes (``agentbranch.replay.modes``): ``all`` re-records, ``new`` records only
misses, ``none`` replays only (a miss raises ``ReplayMissError`` showing the nearest
recorded request and which fields differ), ``passthrough`` goes live.

In pytest the plugin (registered through the ``pytest11`` entry point) gives each test a
``decision_cassette`` fixture, a ``@pytest.mark.decision_cassette("name")`` marker and
``--agentbranch-record=MODE``; ``agentbranch replay diff OLD NEW`` reports drift between
two recordings of a run. See docs/replay.md.

Modules: ``schema`` (every line, as pydantic models), ``entries`` and ``format`` (what a
cassette holds; lines, loading), ``files`` (symlinks, non-regular files, the lock,
appends and rewrites), ``keys`` (keys, summaries, diffs), ``misses`` (what a miss says),
``modes``, ``cassette`` (the shared store), ``readers`` (``CassetteReader``), ``chat``
(``CassetteCache``), ``teachers`` (policies' teacher calls), ``pytest_plugin``, ``diff``
and ``cli`` (drift reports).
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
