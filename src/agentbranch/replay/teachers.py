"""``CassetteTeachers``: a policy's teacher calls, recorded and replayed with its reads.

A LangChain chat model with no cache of its own is called through the cassette's chat
cache (``chat`` lines); any other teacher (a Runnable, a chat model with its own cache, a
reviewer function) is a ``teacher`` line keyed by the call's role, the teacher's identity
and the exact input. The record mode decides as for reads (docs/replay.md, section 4).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from agentbranch.core.teacher_calls import TeacherCall
from agentbranch.replay.format import TeacherEntry
from agentbranch.replay.keys import chat_model_id, chat_model_name, digest

if TYPE_CHECKING:
    from agentbranch.replay._cassette_protocol import CassetteStore

#: The teacher call being made in this context (what a chat model's miss names).
_CURRENT: contextvars.ContextVar[TeacherCall | None] = contextvars.ContextVar(
    "agentbranch_teacher_call", default=None
)


def current_call() -> TeacherCall | None:
    """The teacher call a chat model is being invoked for here, if any."""
    return _CURRENT.get()


@contextlib.contextmanager
def _calling(call: TeacherCall) -> Iterator[None]:
    token = _CURRENT.set(call)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def describe(call: TeacherCall, teacher: str | None = None) -> str:
    """``the audit teacher <name> of question 'team'`` (for misses and logs)."""
    who = {"generate": "Generate fallback", "audit": "audit teacher", "review": "reviewer"}
    return (
        f"the {who[call.role]} {teacher or identity(call.teacher)} of question {call.question_id!r}"
    )


class CassetteTeachers:
    """The teacher calls of policies whose engine reads through ``cassette``
    (``Cassette.teacher_calls``; implements ``core.teacher_calls.TeacherCalls``)."""

    def __init__(self, cassette: CassetteStore) -> None:
        self.cassette = cassette

    def __repr__(self) -> str:
        return f"CassetteTeachers({self.cassette!r})"

    # -- TeacherCalls -------------------------------------------------------------------

    def call(self, call: TeacherCall, invoke: Callable[[Any], Any]) -> Any:
        chat = self._through_chat_cache(call.teacher)
        if chat is not None:
            with _calling(call):
                return invoke(chat)
        entry, key = self._replayed(call)
        if entry is not None:
            return reply_from_json(entry.reply)
        return self._record(call, key, invoke(call.teacher))

    async def acall(self, call: TeacherCall, invoke: Callable[[Any], Awaitable[Any]]) -> Any:
        chat = self._through_chat_cache(call.teacher)
        if chat is not None:
            with _calling(call):
                return await invoke(chat)
        entry, key = self._replayed(call)
        if entry is not None:
            return reply_from_json(entry.reply)
        return self._record(call, key, await invoke(call.teacher))

    def audited(self, call: TeacherCall, state: str, draw: Callable[[], bool]) -> bool:
        blob = json.dumps([call.question_id, state], ensure_ascii=False)
        key = "audit:" + digest(blob)[:24]
        return self.cassette.sampled(key, draw, lambda: self._holds(call))

    def _holds(self, call: TeacherCall) -> bool:
        """Whether the cassette holds the reply to ``call`` (a cassette recorded before
        audits' draws were kept audits the decisions whose calls it holds)."""
        chat = self._through_chat_cache(call.teacher)
        if chat is None:
            return self.cassette.holds_teacher(call_key(call))
        prompt_and_model = _chat_cache_key(chat, call.input)
        return prompt_and_model is not None and self.cassette.holds_chat(*prompt_and_model)

    # -- internals ----------------------------------------------------------------------

    def _through_chat_cache(self, teacher: Any) -> Any:
        """A copy of ``teacher`` on the cassette's chat cache when it is a LangChain
        chat model that uses no cache of its own; else ``None``."""
        if "cache" not in getattr(type(teacher), "model_fields", {}):
            return None
        cache = self.cassette.chat_cache
        if teacher.cache is cache:
            return teacher
        if teacher.cache is not None:
            return None
        return teacher.model_copy(update={"cache": cache})

    def _replayed(self, call: TeacherCall) -> tuple[TeacherEntry | None, str]:
        """The recorded answer of this repeat of ``call`` (``None``: ask it live) and
        the key it is recorded under."""
        key = self.cassette.next_repeat(call_key(call))
        mode = self.cassette.mode
        if mode in ("passthrough", "all"):  # live, each time: as the run it records
            return None, key
        entry = self.cassette.lookup_teacher(key)
        if entry is None and mode == "none":
            raise self.cassette.teacher_miss(call)
        return entry, key

    def _record(self, call: TeacherCall, key: str, reply: Any) -> Any:
        """Record ``reply`` to ``call`` under ``key``; returns it."""
        entry = TeacherEntry(
            call.role,
            call.question_id,
            identity(call.teacher),
            key,
            input_summary(call.input),
            reply_to_json(reply),
        )
        self.cassette.record_teacher(entry)
        return reply


# -- keys -----------------------------------------------------------------------------


def identity(teacher: Any) -> str:
    """A teacher's name on the cassette: a chat model's class and model with a digest of
    its ``llm_string``; a Runnable's class and name; a function's qualified name."""
    llm_string = getattr(teacher, "_get_llm_string", None)
    if callable(llm_string):
        try:
            text = llm_string()
        except Exception:  # noqa: BLE001 - an odd model is named by its class below
            text = None
        if isinstance(text, str):
            return f"{chat_model_name(text)} {chat_model_id(text)}"
    kind = type(teacher)
    get_name = getattr(teacher, "get_name", None)
    if callable(get_name):
        name = get_name()
        return kind.__name__ if name == kind.__name__ else f"{kind.__name__} {name}"
    fn = getattr(teacher, "__qualname__", None) or kind.__qualname__
    return f"{getattr(teacher, '__module__', kind.__module__)}.{fn}"


def input_json(value: Any) -> Any:
    """The exact input as JSON: messages as LangChain message dicts (ids dropped: they
    are per run), anything else as JSON (``str`` for what JSON cannot hold)."""
    from langchain_core.messages import BaseMessage, message_to_dict

    if isinstance(value, list | tuple) and all(isinstance(m, BaseMessage) for m in value):
        return [message_to_dict(m.model_copy(update={"id": None})) for m in value]
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def input_summary(value: Any) -> Any:
    """What a person reads of the input: each message's role and content, or the
    payload."""
    got = input_json(value)
    if isinstance(got, list) and all(isinstance(m, dict) and "data" in m for m in got):
        return [{"role": m.get("type"), "content": m["data"].get("content")} for m in got]
    return got if isinstance(got, dict) else {"input": got}


def call_key(call: TeacherCall) -> str:
    """The digest of the call's role, teacher identity and exact input."""
    blob = [call.role, identity(call.teacher), input_json(call.input)]
    return "teacher:" + digest(json.dumps(blob, sort_keys=True, ensure_ascii=False))


def _chat_cache_key(model: Any, messages: Any) -> tuple[str, str] | None:
    """The ``(prompt, llm_string)`` LangChain looks ``model``'s cache up with for
    ``messages`` (as ``BaseChatModel._generate_with_cache`` builds them), or ``None``."""
    from langchain_core.load import dumps

    try:
        prompt = dumps([m.model_copy(update={"id": None}) for m in messages])
        return prompt, model._get_llm_string()
    except Exception:  # noqa: BLE001 - not a chat model call we can see into
        return None


def reply_to_json(reply: Any) -> dict[str, Any]:
    """A teacher's reply as stored: a LangChain message, a string, or JSON (else its
    text: what the policy reads of it)."""
    from langchain_core.messages import BaseMessage, message_to_dict

    if isinstance(reply, BaseMessage):
        return {"message": message_to_dict(reply.model_copy(update={"id": None}))}
    if isinstance(reply, str):
        return {"text": reply}
    try:
        return {"json": json.loads(json.dumps(reply, allow_nan=False))}
    except (TypeError, ValueError):
        return {"text": str(getattr(reply, "content", reply))}


def reply_from_json(data: dict[str, Any]) -> Any:
    from langchain_core.messages import messages_from_dict

    if "message" in data:
        (message,) = messages_from_dict([data["message"]])
        return message
    if "text" in data:
        return str(data["text"])
    return data.get("json")


__all__ = ["CassetteTeachers", "call_key", "current_call", "describe", "identity"]
