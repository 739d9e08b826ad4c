"""Where the resolver meets learning (only for questions whose policy is
``Earned(..., learn=True)``; everything else passes through unchanged): ``Earned``'s
side of the trust seam's ``asked`` and ``mark`` (``agentbranch.policy.trust``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentbranch.core.questions import as_compiled
from agentbranch.core.state import render_state
from agentbranch.policy.earned._evidence import QuestionKey
from agentbranch.policy.earned.learn import nearest, probability, replayed
from agentbranch.policy.resolving import cassette_of
from agentbranch.policy.trust import Asked

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

log = logging.getLogger("agentbranch")


Map = probability.Map | None  #: a version's probability map in force (``None``: none)


def asked_questions(
    engine: Engine, questions: Mapping[str, Any], learner: Any, state: Any = None
) -> dict[str, Asked]:
    """Per question, what is asked: its version in force with ``learner`` (whose evidence
    key and threshold decide), the question to read ``state`` with (a canvas version's
    with its ``nearest`` lines for ``state``), the version's index and its probability
    map in force; under a replay cassette, those recorded (``replayed``)."""
    out: dict[str, Asked] = {}
    name, model = engine.reader.name, engine.reader.model
    try:
        text = None if state is None else render_state(state)
    except Exception:  # noqa: BLE001 - the engine's read says what is wrong with it
        text = None
    cassette = None if state is None else cassette_of(engine)
    # Trial reads are learning's own work, never replayed: read past a recording cassette.
    learner.bind(engine.unrecorded())
    for question_id, q in questions.items():

        def live(question_id: str = question_id, q: Any = q) -> tuple[Any, int, Any, Map]:
            reading = engine.reading_for(question_id, q)  # (the fingerprint its decision carries)
            key = QuestionKey(question_id, q, name, model, reading)
            version, j = learner.asked(key)
            mapped = learner.store.probability_map(key.asking(version).evidence_key)
            pool = as_compiled(version).pool
            if pool is None or text is None:
                return version, j, version, mapped
            try:
                picked = pool.pick([text])[0]
            except Exception as e:  # noqa: BLE001 - the written question decides instead
                log.warning(
                    "agentbranch.learn: could not pick few-shot lines for %r (%s: %s); "
                    "the question as written decides, at its own threshold",
                    question_id,
                    type(e).__name__,
                    e,
                )
                return q, 0, q, learner.store.probability_map(key.evidence_key)
            return version, j, nearest.read_question(version, picked), mapped

        replay = cassette is not None and text is not None
        version, j, read, mapped = (
            replayed.version(cassette, question_id, q, text, live) if replay else live()
        )
        out[question_id] = Asked(version, read, j, mapped)
    return out


def mark_version(rec: dict[str, Any], version: int, mapped: Map = None) -> None:
    """Record the version that decided (``reader_version``) and the probability its
    engine label is right (``mapped`` applied to its confidence, else the read's own)."""
    rec["reader_version"] = version
    label, confidence = rec.get("engine_label"), rec.get("confidence")
    if label is None or confidence is None:
        rec["probability"] = None
    elif mapped is not None:
        rec["probability"] = round(probability.apply(mapped, confidence), 6)
    else:
        rec["probability"] = (rec.get("probabilities") or {}).get(label)


__all__ = [
    "Map",
    "asked_questions",
    "mark_version",
]
