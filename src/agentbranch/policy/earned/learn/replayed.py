"""Which version of a learning question decided, under a replay cassette.

Each decision records (``Cassette.version``) the version in force and the wire dicts of
the questions asked and read (a head's or pool's digest, never the labelled states or
weights); a replay rebuilds and asks them again, whatever the store holds by then. A
rebuilt head or pool is a stand-in with the recorded digest: it cannot read live.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.heads import LinearHead
from agentbranch.core.questions import Question, as_compiled, coerce_question, option_names, to_spec
from agentbranch.policy.earned.learn.nearest import Pool


class RecordedHead(LinearHead):
    """A learned head known only by its digest (a replayed version's)."""

    __slots__ = ()

    def __init__(self, digest: str, options: Any) -> None:  # noqa: D107 - no weights
        self.options, self.classes = tuple(options), ()
        self.weights = self.bias = None
        self.written = 0.0
        self.digest = digest

    def __repr__(self) -> str:
        return f"RecordedHead({self.digest[:8]})"

    def log_probs(self, states: Any, options: Any) -> Any:
        raise ConfigurationError(
            "this learned head was replayed from a cassette (its weights are not in it): "
            "it cannot read a state that was not recorded"
        )


def wire(question: Any) -> dict[str, Any]:
    """The question's wire dict (what its evidence key and its reads are made of)."""
    return question.model_dump(mode="json")


def rebuild(qtype: str, data: Mapping[str, Any]) -> Question:
    """A question whose wire dict is ``data`` (heads and pools as digest stand-ins)."""
    fields = {k: v for k, v in data.items() if k not in ("learned_head", "learned_pool")}
    fields["type"] = qtype
    written = coerce_question("replayed", fields)
    if "learned_head" not in data and "learned_pool" not in data:
        return written
    compiled = as_compiled(written)
    if "learned_head" in data:
        head = RecordedHead(str(data["learned_head"]), option_names(compiled))
        compiled = compiled.replace(head=head)
    if "learned_pool" in data:
        compiled = compiled.replace(pool=Pool.recorded(data["learned_pool"]))
    return compiled


def version(
    cassette: Any,
    question_id: str,
    written: Any,
    text: str,
    live: Callable[[], tuple[Any, int, Any, Any]],
) -> tuple[Any, int, Any, Any]:
    """``(asked, version, read, probability map)`` for one decision: the recorded ones
    when the cassette holds them (no map in an older cassette), else ``live()``'s, recorded."""
    made: list[tuple[Any, int, Any, Any]] = []

    def now() -> dict[str, Any]:
        asked, j, read, mapped = live()
        made.append((asked, j, read, mapped))
        return {
            "version": j,
            "asked": None if j == 0 else wire(asked),
            "read": None if read is asked else wire(read),
            "probability_map": None if mapped is None else list(mapped),
        }

    def miss() -> Any:  # what the cassette says when it holds no version for it
        spec = to_spec(question_id, written)
        summary = {"type": spec.type, "text": spec.instructions, "options": list(spec.options)}
        return cassette.version_miss(question_id, text, summary)

    blob = json.dumps([question_id, wire(written), text], sort_keys=True)  # (the decision's key)
    got = cassette.version("version:" + hashlib.sha256(blob.encode()).hexdigest()[:24], now, miss)
    if made:
        return made[0]
    j = int(got["version"])
    asked = written if got["asked"] is None else rebuild(written.type, got["asked"])
    read = asked if got["read"] is None else rebuild(written.type, got["read"])
    mapped = got.get("probability_map")
    return asked, j, read, None if mapped is None else tuple(float(x) for x in mapped)


__all__ = [
    "RecordedHead",
    "rebuild",
    "version",
    "wire",
]
