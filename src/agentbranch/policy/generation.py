"""The generation fallback: a LangChain chat model answers the same question over the same
options, and its reply is validated against them (``parse_label``).

A chat model that can constrain its own generation to a set of strings (a
``LocalChatModel`` on a causal model) is asked for exactly one of the option names
(``fallback.constrained`` says ``"choice"``). A call is bounded by
``Generate(timeout_s=...)`` (``Expired`` when it runs out) and a reply by
``MAX_REPLY_CHARS``. Every teacher call (``ask``) goes through the engine's replay
cassette when it reads through one."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.at_exit import join_at_exit
from agentbranch.core.errors import FallbackError
from agentbranch.core.files import DuplicateKeyError, unique_object
from agentbranch.core.questions import Question, to_spec
from agentbranch.core.teacher_calls import TeacherCall, teacher_calls_of
from agentbranch.policy.config import DecisionRecord, Generate

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = [
    "Expired",
    "LABEL_KEYS",
    "MAX_REPLY_CHARS",
    "MAX_STUCK",
    "aask",
    "agenerate",
    "ainvoke_within",
    "ask",
    "constrained_to",
    "fallback_record",
    "generate",
    "generation_messages",
    "invoke_within",
    "match_option",
    "model_name",
    "parse_label",
    "state_text",
]


def generation_messages(fb: Generate, qid: str, question: Question, state_text: str) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    spec = to_spec(qid, question)
    lines = [f"- {o}: {d}" if d else f"- {o}" for o, d in zip(spec.options, spec.descriptions)]
    system = (fb.instructions + "\n\n" if fb.instructions else "") + (
        "Answer the question about the input with exactly one of the allowed options. "
        'Reply with JSON only: {"label": "<option>"}.'
    )
    human = (
        f"Input:\n{state_text}\n\nQuestion: {spec.instructions}\n\nAllowed options:\n"
        + "\n".join(lines)
    )
    return [SystemMessage(system), HumanMessage(human)]


#: The longest reply ``parse_label`` reads (characters). An answer is an option name or
#: ``{"label": "<option>"}``; a model repeating itself up to a large ``max_tokens`` is
#: refused at once instead of parsed.
MAX_REPLY_CHARS = 16_384

#: The keys of a JSON reply that name the label, in the order they are read.
LABEL_KEYS = ("label", "choice", "answer")


def parse_label(reply: Any, options: Sequence[str], *, source: str = "fallback model") -> str:
    """The option named by a chat model's reply, or ``FallbackError``. Never returns
    anything outside ``options``.

    The reply is the bare option name or JSON ``{"label": "<option>"}`` (or ``"choice"``,
    ``"answer"``). An exact option name always wins; then tolerant forms (without
    quotes, backticks or surrounding periods, case-insensitive), each counting only when
    exactly one option matches it. Refused: a reply longer than ``MAX_REPLY_CHARS``, JSON
    naming two different labels or repeating a key (logged at WARNING)."""
    text = getattr(reply, "content", reply)
    if isinstance(text, list):  # content blocks
        text = "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in text if b)
    if not isinstance(text, str):
        raise FallbackError(f"{source} returned {type(text).__name__}, not text")
    raw = text.strip()
    if len(raw) > MAX_REPLY_CHARS:
        raise FallbackError(
            f"{source} answered {len(raw):,} characters ({raw[:80]!r}...), more than an "
            f"answer can be (MAX_REPLY_CHARS={MAX_REPLY_CHARS:,}); the answer was rejected. "
            "A model repeating itself: give it a smaller max_tokens"
        )
    if raw in options:  # before any JSON parsing: an option's name may hold braces
        return raw
    candidate: Any = raw
    # From the first "{" to the last "}" (what a greedy r"\{.*\}" finds, in linear time).
    start, end = raw.find("{"), raw.rfind("}")
    if 0 <= start < end:
        try:
            obj = json.loads(raw[start : end + 1], object_pairs_hook=unique_object)
        except DuplicateKeyError as e:
            message = (
                f"{source} answered {raw[:200]!r}, which names the key {e.args[0]!r} twice "
                "in one object (JSON would keep only the last); the answer was rejected"
            )
            telemetry.logger.warning("agentbranch: %s", message)
            raise FallbackError(message) from None
        except (json.JSONDecodeError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            candidate = _named(obj, options, raw, source)
    if isinstance(candidate, str) and (label := match_option(candidate, options)) is not None:
        return label
    raise FallbackError(
        f"{source} answered {raw[:200]!r}, which names none of the allowed options "
        f"{list(options)}; the answer was rejected"
    )


def _named(obj: dict[str, Any], options: Sequence[str], raw: str, source: str) -> Any:
    """The label a JSON reply names; ``FallbackError`` when its keys name different ones."""
    named = [(k, obj[k]) for k in LABEL_KEYS if obj.get(k) is not None]
    if not named:
        return None
    seen = {match_option(v, options) if isinstance(v, str) else None for _, v in named}
    if len(seen) > 1 or (len(named) > 1 and None in seen):
        message = (
            f"{source} answered {raw[:200]!r}, which names two different labels "
            f"({', '.join(f'{k}={v!r}' for k, v in named)}); the answer was rejected"
        )
        telemetry.logger.warning("agentbranch: %s", message)
        raise FallbackError(message)
    return named[0][1]


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


class Expired(Exception):
    """What ``invoke_within`` returns when the model did not answer within its time
    (``made``), or was not called at all because earlier calls are still stuck; raised
    past the replay cassette, so a non-answer is never recorded."""

    def __init__(self, message: str, made: bool = True) -> None:
        super().__init__(message)
        self.message, self.made = message, made


#: Calls given up on that are still running (sync path): past ``MAX_STUCK`` of them new
#: calls fail at once instead of starting more threads behind a hung model.
_stuck: list[threading.Thread] = []
_stuck_lock = threading.Lock()
MAX_STUCK = 16


def _expired(model: Any, timeout_s: float) -> Expired:
    return Expired(
        f"fallback model {model_name(model)} did not answer within {timeout_s:g} s "
        "(Generate(timeout_s=...))"
    )


def invoke_within(
    model: Any, messages: list[Any], timeout_s: float | None, question_id: str = ""
) -> Any:
    """``model.invoke(messages)``, or ``Expired`` after ``timeout_s`` seconds (the call
    runs on a helper thread, left to finish on its own). A call that raises is counted
    (``agentbranch.teacher.failures``) before its error goes on."""
    with _raising(question_id):
        if timeout_s is None:
            return model.invoke(messages)
        with _stuck_lock:
            _stuck[:] = [t for t in _stuck if t.is_alive()]
            if len(_stuck) >= MAX_STUCK:
                return Expired(
                    f"{len(_stuck)} calls of fallback models are still running past their "
                    "Generate(timeout_s=...); this one was not made",
                    made=False,
                )
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = model.invoke(messages)
            except BaseException as e:  # noqa: BLE001 - raised on the caller's thread below
                box["error"] = e

        thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(run,),
            name="agentbranch-generate",
            daemon=True,
        )
        thread.start()
        join_at_exit(thread)  # a timed-out call may still be in native code at exit
        thread.join(timeout_s)
        if thread.is_alive():
            with _stuck_lock:
                _stuck.append(thread)
            return _expired(model, timeout_s)
        if "error" in box:
            raise box["error"]
        return box["value"]


async def ainvoke_within(
    model: Any, messages: list[Any], timeout_s: float | None, question_id: str = ""
) -> Any:
    """``await model.ainvoke(messages)``, or ``Expired`` after ``timeout_s`` seconds
    (the call is cancelled). The model's own errors are counted and raised as they are."""
    with _raising(question_id):
        if timeout_s is None:
            return await model.ainvoke(messages)
        task = asyncio.ensure_future(model.ainvoke(messages))
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout_s)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            task.cancel()
            return _expired(model, timeout_s)
        return task.result()


@contextlib.contextmanager
def _raising(question_id: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    except Exception as e:
        took = time.perf_counter() - started
        telemetry.teacher_call(question_id, "fallback", took, type(e).__name__)
        raise


def fallback_record(rec: DecisionRecord, label: str, model: Any, reply: Any) -> DecisionRecord:
    constrained = (getattr(reply, "response_metadata", None) or {}).get("constrained")
    fallback = {
        "kind": "generate",
        "model": model_name(model),
        "reply": str(getattr(reply, "content", reply))[:500],
        # how the engine constrained the reply to the options ("choice"); None: free text
        "constrained": constrained if isinstance(constrained, str) else None,
    }
    return {**rec, "label": label, "decided_by": "fallback", "fallback": fallback}


def constrained_to(model: Any, options: Sequence[str] | None) -> Any:
    """``model`` asked to reply with exactly one of ``options``, when it can enforce that
    itself (a ``LocalChatModel`` whose engine supports it); else ``model`` unchanged."""
    if not options or not getattr(model, "supports_choices", False):
        return model
    return model.model_copy(update={"choices": list(options)})


def ask(engine: Engine, call: TeacherCall, invoke: Callable[[Any], Any]) -> Any:
    """The reply to the teacher call ``call``: ``invoke(call.teacher)``, or — when the
    engine reads through a replay cassette (``DecisionEngine.teacher_calls``) — what the
    cassette answers (recorded, replayed, or a ``ReplayMissError`` in replay-only mode),
    so no teacher is called live in a replay and nothing needs wrapping by hand."""
    calls = teacher_calls_of(engine)
    if calls is None:
        return invoke(call.teacher)
    return calls.call(call, invoke)


async def aask(engine: Engine, call: TeacherCall, invoke: Callable[[Any], Awaitable[Any]]) -> Any:
    """``ask`` on the async path."""
    calls = teacher_calls_of(engine)
    if calls is None:
        return await invoke(call.teacher)
    return await calls.acall(call, invoke)


def _answered(got: Any) -> Any:
    if isinstance(got, Expired):
        raise got
    return got


def generate(engine: Engine, fb: Generate, qid: str, messages: list[Any], options: Any) -> Any:
    """A ``Generate`` fallback's reply (``fb.model``, constrained to ``options`` where it
    can enforce them, ``constrained_to``) within ``fb.timeout_s`` (``Expired`` when it
    runs out), through the engine's cassette if any."""
    call = TeacherCall("generate", qid, constrained_to(fb.model, options), messages)
    try:
        return ask(engine, call, lambda m: _answered(invoke_within(m, messages, fb.timeout_s, qid)))
    except Expired as e:
        return e.with_traceback(None)


async def agenerate(
    engine: Engine, fb: Generate, qid: str, messages: list[Any], options: Any
) -> Any:
    """``generate`` on the async path."""
    call = TeacherCall("generate", qid, constrained_to(fb.model, options), messages)

    async def invoke(model: Any) -> Any:
        return _answered(await ainvoke_within(model, messages, fb.timeout_s, qid))

    try:
        return await aask(engine, call, invoke)
    except Expired as e:
        return e.with_traceback(None)


def model_name(model: Any) -> str:
    for attr in ("model_name", "model", "model_id"):
        v = getattr(model, attr, None)
        if isinstance(v, str) and v:
            return v
    return type(model).__name__


def state_text(state: Any) -> str:
    from agentbranch.core.state import render_state

    return render_state(state)
