"""A malformed wire question, said in one sentence per field (pydantic's own message is
written for the library's authors): ``question 'team': a choice needs `criteria`, a
mapping of option -> description``. The wire format is in docs/questions.md.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = ["FIELDS", "describe_question_error"]

#: What each field of each question type holds, as the sentences say it.
FIELDS: dict[str, dict[str, str]] = {
    "choice": {
        "instructions": "the question, as text",
        "criteria": 'a mapping of option -> description, e.g. {"billing": "Invoices"}',
        "examples": "a mapping of option -> list of example texts",
    },
    "noul": {
        "instructions": "the question, as text",
        "criteria": '{"true": what yes means, "false": what no means} (optional)',
        "examples": 'a mapping of "yes"/"no" -> list of example texts',
    },
    "score": {
        "instructions": "the question, as text",
        "criteria": 'the list of levels, lowest first, e.g. ["calm", "annoyed", "angry"]',
        "examples": "a mapping of level -> list of example texts",
    },
}

_ARTICLE = {"choice": "a choice", "noul": "a noul (yes/no)", "score": "a score"}


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "the question"


def _shown(value: Any) -> str:
    return repr(value) if len(repr(value)) <= 40 else type(value).__name__


def _field_sentences(
    question_id: str, kind: str, top: str, errors: list[dict[str, Any]]
) -> list[str]:
    """The sentences for one top-level field of a question."""
    where, article = f"question {question_id!r}", _ARTICLE.get(kind, kind)
    what = FIELDS.get(kind, {}).get(top)
    if any(e.get("type") == "missing" and len(e.get("loc") or ()) == 1 for e in errors):
        return [f"{where}: {article} needs `{top}`, {what or 'a value'}"]
    out = []
    for e in (e for e in errors if e.get("type") == "extra_forbidden"):
        loc = tuple(e.get("loc") or ())
        if len(loc) == 1:
            fields = ", ".join(f"`{name}`" for name in ("type", *FIELDS.get(kind, {})))
            out.append(f"{where}: unknown field `{top}`; {article} has {fields}")
        else:
            out.append(f"{where}: unknown field `{_field(loc)}`; `{top}` holds {what}")
    rest = [e for e in errors if e.get("type") != "extra_forbidden"]
    if len(rest) > 1 and what:  # a union: each member said no; say what fits instead
        out.append(f"{where}: `{top}` should be {what} (got {_shown(rest[0].get('input'))})")
    elif rest:
        e = rest[0]
        message = str(e.get("msg") or "is not valid").rstrip(".").replace("Input should", "should")
        if message and message[0].isupper():
            message = message[0].lower() + message[1:]
        out.append(
            f"{where}: `{_field(tuple(e.get('loc') or ()))}` {message} "
            f"(got {_shown(e.get('input'))})" + (f"; it holds {what}" if what else "")
        )
    return out


def describe_question_error(qid: str, kind: str, error: ValidationError) -> str:
    """One sentence per wrong field of question ``qid`` (a ``kind`` question), one per line,
    without pydantic's input dump or documentation links."""
    by_field: dict[str, list[dict[str, Any]]] = {}
    for item in error.errors(include_url=False):
        loc = tuple(item.get("loc") or ())
        by_field.setdefault(str(loc[0]) if loc else "", []).append(dict(item))
    sentences = []
    for top, errors in by_field.items():
        sentences.extend(_field_sentences(qid, kind, top, errors))
    return "\n".join(sentences)
