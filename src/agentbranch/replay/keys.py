"""Keys, readable summaries and the field diff of a miss. A read's key digests the whole
``ReadRequest`` (stored per reader id); a chat exchange's key digests LangChain's cache
inputs, the serialized prompt and the model's ``llm_string``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from agentbranch.core.reads import ReadRequest

EXCERPT = 240


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def short(text: str | None, width: int = EXCERPT) -> str | None:
    if text is None:
        return None
    return text if len(text) <= width else text[: width - 1] + "…"


# -- reads ------------------------------------------------------------------------------


def request_key(request: ReadRequest) -> str:
    """A stable digest of everything that determines a read."""
    return digest(json.dumps(asdict(request), sort_keys=True, ensure_ascii=False, default=_digest))


def _digest(value: Any) -> str:
    """A learned head in a request (``QuestionSpec.head``) is keyed by its digest."""
    got = getattr(value, "digest", None)
    if not isinstance(got, str):
        raise TypeError(f"a read request holds a {type(value).__name__}, which has no key")
    return got


def request_summary(request: ReadRequest) -> dict[str, Any]:
    """What a person needs to recognise a read: excerpts plus digests of the full texts."""
    return {
        "state": short(request.state),
        "state_sha": digest(request.state)[:16],
        "instructions": short(request.instructions),
        "instructions_sha": None
        if request.instructions is None
        else digest(request.instructions)[:16],
        "questions": [
            {
                "id": q.id,
                "type": q.type,
                "text": q.instructions,
                "options": list(q.options),
                "details_sha": digest(json.dumps([q.labels, q.descriptions]))[:16],
                # Per option: how many examples, and a digest of their texts.
                "examples": [len(e) for e in q.examples],
                "examples_sha": [digest(json.dumps(e))[:12] for e in q.examples],
            }
            for q in request.questions
        ],
        "draws": request.draws,
        "joint": request.joint,
    }


def read_text(summary: dict[str, Any]) -> str:
    """A read in a line (misses, stale lists, diffs): its state excerpt and question ids."""
    question_ids = [q["id"] for q in summary.get("questions", [])]
    return f"{short(summary.get('state'), 50)!r} {question_ids}"


def request_differences(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, short diff)`` for every field where two request summaries differ."""
    out: list[tuple[str, str]] = []
    if "state_sha" in old and "state_sha" in new:
        state_differs = old["state_sha"] != new["state_sha"]
    else:  # a pre-v1 entry keeps only an excerpt
        state_differs = not (new.get("state") or "").startswith(
            (old.get("state") or "").rstrip("…")
        )
    if state_differs:
        out.append(("state", text_diff(old.get("state") or "", new.get("state") or "")))
    if old.get("instructions_sha") != new.get("instructions_sha") and "instructions_sha" in old:
        was, now = old.get("instructions") or "", new.get("instructions") or ""
        out.append(("instructions", text_diff(was, now)))
    oq = {q["id"]: q for q in old.get("questions", [])}
    nq = {q["id"]: q for q in new.get("questions", [])}
    if list(oq) != list(nq):
        out.append(("question ids", f"{list(oq)} -> {list(nq)}"))
    for question_id in [q for q in nq if q in oq]:
        a, b = oq[question_id], nq[question_id]
        if "text" in a and a.get("text") != b.get("text"):
            diff = text_diff(a["text"], b.get("text") or "")
            out.append((f"question text ({question_id})", diff))
        if "options" in a and a.get("options") != b.get("options"):
            out.append((f"options ({question_id})", f"{a['options']} -> {b.get('options')}"))
        if "type" in a and a.get("type") != b.get("type"):
            out.append((f"question type ({question_id})", f"{a['type']} -> {b.get('type')}"))
        if "details_sha" in a and a.get("details_sha") != b.get("details_sha"):
            out.append((f"option descriptions or labels ({question_id})", "changed"))
        if "examples_sha" in a and a.get("examples_sha") != b.get("examples_sha"):
            out.append((f"examples ({question_id})", examples_diff(a, b)))
    for name in ("draws", "joint"):
        if name in old and old.get(name) != new.get(name):
            out.append((name, f"{old.get(name)} -> {new.get(name)}"))
    return out


def examples_diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    """Which options' examples changed between two question summaries, and their counts."""
    options = new.get("options") or old.get("options") or []
    n_old, n_new = old.get("examples") or [], new.get("examples") or []
    s_old, s_new = old.get("examples_sha") or [], new.get("examples_sha") or []
    parts = []
    for i in range(max(len(s_old), len(s_new))):
        if i < len(s_old) and i < len(s_new) and s_old[i] == s_new[i]:
            continue
        name = options[i] if i < len(options) else f"option {i + 1}"
        a = n_old[i] if i < len(n_old) else 0
        b = n_new[i] if i < len(n_new) else 0
        parts.append(
            f"{name}: {a} -> {b} examples" if a != b else f"{name}: {a} examples, reworded"
        )
    return "; ".join(parts) or "changed"


# -- chat exchanges ---------------------------------------------------------------------


def chat_key(prompt: str, llm_string: str) -> str:
    return digest(prompt + "\x00" + llm_string)


def chat_model_id(llm_string: str) -> str:
    return "chat-" + digest(llm_string)[:10]


def chat_model_name(llm_string: str) -> str:
    """A readable name from LangChain's ``llm_string``: the class (or ``_type``) and the
    model name when it shows."""
    head = llm_string.split("---", 1)[0]
    kind, model = None, None
    try:
        obj = json.loads(head)
        ident = obj.get("id") or []
        kind = ident[-1] if ident else None
        kw = obj.get("kwargs") or {}
        model = kw.get("model_name") or kw.get("model")
    except (ValueError, AttributeError):
        m = re.search(r"\('_type', '([^']*)'\)", llm_string)
        kind = m.group(1) if m else None
        m = re.search(r"\('(?:model_name|model)', '([^']*)'\)", llm_string)
        model = m.group(1) if m else None
    return " ".join(str(x) for x in (kind, model) if x) or "chat model"


def messages_summary(prompt: str) -> list[dict[str, Any]]:
    """The readable messages of LangChain's serialized chat prompt (or the LLM prompt)."""
    try:
        obj = json.loads(prompt)
    except ValueError:
        obj = None
    if not isinstance(obj, list):
        return [{"role": "prompt", "content": prompt}]
    out = []
    for m in obj:
        kw = m.get("kwargs", {}) if isinstance(m, dict) else {}
        item = {"role": kw.get("type", "message"), "content": kw.get("content", "")}
        if kw.get("tool_calls"):
            item["tool_calls"] = kw["tool_calls"]
        out.append(item)
    return out


def last_content(messages: Sequence[dict[str, Any]]) -> str:
    """The content of the last of ``messages`` (``""`` when there are none)."""
    return str(messages[-1].get("content")) if messages else ""


def messages_differences(
    old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]
) -> list[tuple[str, str]]:
    out = []
    if len(old) != len(new):
        out.append(("messages", f"{len(old)} messages -> {len(new)}"))
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            diff = text_diff(str(a.get("content")), str(b.get("content")))
            out.append((f"message {i + 1} ({b.get('role')})", diff))
    return out


def generations_to_json(generations: Sequence[Any]) -> list[dict[str, Any]]:
    """LangChain generations as plain dicts (message ids dropped: they are per run)."""
    from langchain_core.messages import message_to_dict
    from langchain_core.outputs import ChatGeneration

    out = []
    for g in generations:
        if isinstance(g, ChatGeneration):
            message = g.message.model_copy(update={"id": None})
            out.append({"message": message_to_dict(message), "generation_info": g.generation_info})
        else:
            out.append({"text": g.text, "generation_info": g.generation_info})
    return out


def generations_from_json(data: Sequence[Any]) -> list[Any]:
    from langchain_core.messages import messages_from_dict
    from langchain_core.outputs import ChatGeneration, Generation

    out: list[Any] = []
    for g in data:
        if not isinstance(g, dict):
            raise ValueError(f"a generation must be an object, got {type(g).__name__}")
        info = g.get("generation_info")
        if "message" in g:
            (message,) = messages_from_dict([g["message"]])
            out.append(ChatGeneration(message=message, generation_info=info))
        elif isinstance(g.get("text"), str):
            out.append(Generation(text=g["text"], generation_info=info))
        else:
            raise ValueError("a generation needs 'message' or 'text'")
    return out


def reply_text(reply: Sequence[dict[str, Any]]) -> str:
    """The text of a stored reply (chat generations, or a teacher's reply as one), for
    tables and diffs."""
    parts = []
    for g in reply:
        if "message" in g:
            content = g["message"].get("data", {}).get("content", "")
            parts.append(content if isinstance(content, str) else json.dumps(content))
        else:
            parts.append(str(g.get("text", g.get("json", ""))))
    return "\n".join(parts)


# -- diffs ------------------------------------------------------------------------------


def text_diff(old: str, new: str, width: int = 70) -> str:
    """A one-line diff: the common prefix elided, ``- old`` / ``+ new`` around the change."""
    if old == new:
        return "(same excerpt; differs beyond it)"
    sm = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    blocks = [b for b in sm.get_opcodes() if b[0] != "equal"]
    start = max(0, blocks[0][1] - 15)
    end_old, end_new = blocks[-1][2] + 15, blocks[-1][4] + 15
    pre = "…" if start else ""

    def shown(text: str) -> str:  # one line: a newline shows as \n
        return text.replace("\n", "\\n")

    return (
        f"- {pre}{shown(old[start:end_old][:width])}"
        f"{'…' if end_old < len(old) else ''}  "
        f"+ {pre}{shown(new[start:end_new][:width])}{'…' if end_new < len(new) else ''}"
    )


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(a=a[:EXCERPT], b=b[:EXCERPT], autojunk=False).ratio()


__all__ = [
    "chat_key",
    "chat_model_id",
    "chat_model_name",
    "generations_from_json",
    "generations_to_json",
    "messages_differences",
    "messages_summary",
    "request_differences",
    "request_key",
    "request_summary",
    "text_diff",
]
