"""``AnyOf``: pick any of N options, asked as one yes/no question per option.

Each option is its own yes/no question (id ``"<question id>/<option>"``, all in the same
read) with its own threshold, fallback, audit and evidence. The set is taken only when
every member is taken; its confidence is its least confident member's: a set is never
more confident than any of its reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langchain_core.decisions import Noul, NoulCriteria

__all__ = ["OPTION", "AnyOf", "member_id", "member_questions", "set_record"]

#: The placeholder for the option's name in an ``AnyOf``'s instructions.
OPTION = "{option}"


@dataclass(frozen=True, eq=True)
class AnyOf:
    """Which of ``options`` apply (any number, none included).

    ``instructions`` is the yes/no question asked of each option, naming it with
    ``{option}``; ``options`` maps each option name to what it means (or ``None``), the
    member's ``yes`` description. Build one with ``agentbranch.any_of`` (it checks the
    input); the set's ``label`` is the list of options answered yes, in option order."""

    instructions: str
    options: Mapping[str, str | None] = field(default_factory=dict)
    type: ClassVar[str] = "any_of"

    __hash__ = None  # type: ignore[assignment]  # (questions are not hashable)

    def member(self, option: str) -> Noul:
        """The yes/no question asked of ``option``."""
        description = self.options[option]
        yes = f"{option}: {description}" if description else None
        return Noul(
            instructions=self.instructions.replace(OPTION, option),
            criteria=NoulCriteria(true=yes, false=None) if yes else None,
        )

    def members(self, question_id: str) -> dict[str, Noul]:
        """The member questions keyed by their ids (``member_id``), in option order."""
        return {member_id(question_id, o): self.member(o) for o in self.options}

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """The wire dict (``kwargs`` are accepted as pydantic's ``model_dump`` takes them)."""
        return {
            "type": self.type,
            "instructions": self.instructions,
            "options": dict(self.options),
        }


def member_id(question_id: str, option: str) -> str:
    """The id of the member of set ``question_id`` that asks about ``option``."""
    return f"{question_id}/{option}"


def member_questions(questions: Mapping[str, Any]) -> dict[str, Any]:
    """``questions`` with each ``AnyOf`` replaced by its member yes/no questions, in place
    (the others unchanged). Raises ``ValueError`` when a member's id is taken."""
    out: dict[str, Any] = {}
    for question_id, q in questions.items():
        expanded = q.members(question_id) if isinstance(q, AnyOf) else {question_id: q}
        for qid, member in expanded.items():
            if qid in out or (qid != question_id and qid in questions):
                raise ValueError(
                    f"question id {qid!r} is both a question and a member of an any_of "
                    "question; rename one of them"
                )
            out[qid] = member
    return out


_BANDS = ("error", "review", "fallback")


def set_record(
    question_id: str, question: AnyOf, members: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The set's decision record from its members' (keyed by member id): ``label`` the
    options answered yes (``None`` when a member has no yes/no answer: an error without
    ``FailOpen``, a ``GotoNode`` fallback), ``band`` ``take`` only when every member was
    taken, ``confidence`` the least confident member's (``None`` when one has none),
    ``decided_by`` the members' when they share one (else ``"members"``), ``members``
    the member records by option."""
    by_option = {o: dict(members[member_id(question_id, o)]) for o in question.options}
    labels = {o: r.get("label") for o, r in by_option.items()}
    # A member routed to a node (``GotoNode``, ``FailClosed``) was not answered.
    decided = all(labels[o] in ("yes", "no") and not r.get("goto") for o, r in by_option.items())
    bands = [r.get("band") for r in by_option.values()]
    band = next((b for b in _BANDS if b in bands), "take" if bands else "fallback")
    confidences = [r.get("confidence") for r in by_option.values()]
    confident = all(isinstance(c, int | float) for c in confidences) and confidences
    kinds = {r.get("decided_by") for r in by_option.values()}
    return {
        "question_id": question_id,
        "question": question.instructions,
        "type": AnyOf.type,
        "label": [o for o, label in labels.items() if label == "yes"] if decided else None,
        "options": list(question.options),
        "confidence": min(confidences) if confident else None,
        "band": band,
        "decided_by": kinds.pop() if len(kinds) == 1 else "members",
        "goto": next((r["goto"] for r in by_option.values() if r.get("goto")), None),
        "error": next((r["error"] for r in by_option.values() if r.get("error")), None),
        "members": by_option,
    }
