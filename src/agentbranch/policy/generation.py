"""The generation fallback: a LangChain chat model answers the same question over the same
options, and its reply is validated against them.

A chat model that can constrain its own generation to a set of strings (a reader's
``chat_model()`` on a causal model: vLLM's structured outputs, or on transformers the
most likely option) is asked for
exactly one of the option names, so its reply cannot fail to parse; every other model
is asked as before and its reply parsed. The decision record's ``fallback.constrained``
says which (``"choice"`` or ``None``).

Every teacher call (``ask``: a fallback's, an audit's, a reviewer's) goes through the
engine's replay cassette when it reads through one (``agentbranch.core.teacher_calls``)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentbranch.core.errors import FallbackError
from agentbranch.core.questions import Question, to_spec
from agentbranch.core.teacher_calls import TeacherCall, teacher_calls_of
from agentbranch.policy.config import DecisionRecord, Generate


def generation_messages(fb: Generate, qid: str, question: Question, state_text: str) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    spec = to_spec(qid, question)
    lines = []
    for name, desc in zip(spec.options, spec.descriptions):
        lines.append(f"- {name}" + (f": {desc}" if desc else ""))
    system = (fb.instructions + "\n\n" if fb.instructions else "") + (
        "Answer the question about the input with exactly one of the allowed options. "
        'Reply with JSON only: {"label": "<option>"}.'
    )
    human = (
        f"Input:\n{state_text}\n\nQuestion: {spec.instructions}\n\nAllowed options:\n"
        + "\n".join(lines)
    )
    return [SystemMessage(system), HumanMessage(human)]


def parse_label(reply: Any, options: Sequence[str], *, source: str = "fallback model") -> str:
    """The option named by a chat model's reply, or ``FallbackError``. Never returns
    anything outside ``options``.

    The reply is the bare option name or JSON ``{"label": "<option>"}`` (``"choice"`` and
    ``"answer"`` work too, in a code fence or not). An exact option name always wins,
    punctuation included (an option ``"Very urgent."`` is chosen by ``Very urgent.``);
    then the tolerant forms, in order: without surrounding quotes or backticks, without
    them and without leading or trailing periods (``"billing".``), each of these
    case-insensitively, and last the reply and the options both without quotes and
    periods (``very urgent`` names ``Very urgent.``); a tolerant form counts only when
    exactly one option matches it."""
    text = getattr(reply, "content", reply)
    if isinstance(text, list):  # content blocks
        text = "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in text if b)
    if not isinstance(text, str):
        raise FallbackError(f"{source} returned {type(text).__name__}, not text")
    raw = text.strip()
    if raw in options:  # before any JSON parsing: an option's name may hold braces
        return raw
    candidate: Any = raw
    fenced = re.search(r"\{.*\}", raw, re.DOTALL)
    if fenced:
        try:
            obj = json.loads(fenced.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            candidate = obj.get("label", obj.get("choice", obj.get("answer")))
    if isinstance(candidate, str) and (label := match_option(candidate, options)) is not None:
        return label
    raise FallbackError(
        f"{source} answered {raw[:200]!r}, which names none of the allowed options "
        f"{list(options)}; the answer was rejected"
    )


def match_option(candidate: str, options: Sequence[str]) -> str | None:
    """The option ``candidate`` names (see ``parse_label``), or ``None``."""
    forms = [candidate, candidate.strip()]
    forms.append(forms[-1].strip("\"'`").strip())
    forms.append(forms[-1].strip("\"'`.").strip())
    for form in forms:
        if form in options:
            return form
    for form in forms:
        hits = [o for o in options if o.casefold() == form.casefold()]
        if len(hits) == 1:
            return hits[0]
    # Last, both sides without quotes and periods: "very urgent" names "Very urgent."
    hits = [o for o in options if _loose(o) == _loose(candidate)]
    return hits[0] if len(hits) == 1 else None


def _loose(text: str) -> str:
    return text.strip().strip("\"'`.").strip().casefold()


def fallback_record(rec: DecisionRecord, label: str, model: Any, reply: Any) -> DecisionRecord:
    out = dict(rec)
    out["label"] = label
    out["decided_by"] = "fallback"
    out["fallback"] = {
        "kind": "generate",
        "model": model_name(model),
        "reply": str(getattr(reply, "content", reply))[:500],
        "constrained": constrained_by(reply),
    }
    return out


def constrained_by(reply: Any) -> str | None:
    """How the engine constrained ``reply`` to the options (``"choice"``), or ``None``
    when it was free text, parsed afterwards."""
    meta = getattr(reply, "response_metadata", None) or {}
    value = meta.get("constrained")
    return value if isinstance(value, str) else None


def constrained_to(model: Any, options: Sequence[str] | None) -> Any:
    """``model`` asked to reply with exactly one of ``options``, when it can enforce that
    itself (a ``LocalChatModel`` whose engine supports it); else ``model`` unchanged."""
    if not options or not getattr(model, "supports_choices", False):
        return model
    return model.model_copy(update={"choices": list(options)})


def ask(engine: Any, call: TeacherCall, invoke: Callable[[Any], Any]) -> Any:
    """The reply to the teacher call ``call``: ``invoke(call.teacher)``, or — when the
    engine reads through a replay cassette (``DecisionEngine.teacher_calls``) — what the
    cassette answers (recorded, replayed, or a ``ReplayMissError`` in replay-only mode),
    so no teacher is called live in a replay and nothing needs wrapping by hand."""
    calls = teacher_calls_of(engine)
    if calls is None:
        return invoke(call.teacher)
    return calls.call(call, invoke)


async def aask(engine: Any, call: TeacherCall, invoke: Callable[[Any], Awaitable[Any]]) -> Any:
    """``ask`` on the async path."""
    calls = teacher_calls_of(engine)
    if calls is None:
        return await invoke(call.teacher)
    return await calls.acall(call, invoke)


def generate(engine: Any, fb: Generate, qid: str, messages: list[Any], options: Any) -> Any:
    """A ``Generate`` fallback's reply (``fb.model``, constrained to ``options`` where it
    can enforce them, ``constrained_to``), through the engine's cassette if any."""
    call = TeacherCall("generate", qid, constrained_to(fb.model, options), messages)
    return ask(engine, call, lambda m: m.invoke(messages))


async def agenerate(engine: Any, fb: Generate, qid: str, messages: list[Any], options: Any) -> Any:
    call = TeacherCall("generate", qid, constrained_to(fb.model, options), messages)
    return await aask(engine, call, lambda m: m.ainvoke(messages))


def model_name(model: Any) -> str:
    for attr in ("model_name", "model", "model_id"):
        v = getattr(model, attr, None)
        if isinstance(v, str) and v:
            return v
    return type(model).__name__


def state_text(state: Any) -> str:
    from agentbranch.core.state import render_state

    return render_state(state)
