"""Faults an operator meets in a month of serving (issue 52): a hung fallback model, a
degenerate or ambiguous reply, a store from a newer release or one the process may not
read, a full disk, files readable by every account, the CLI's questions, the report's
small print. Each test fails without its fix."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from typing import Any

import pytest
from _lg_fixtures import StrictFakeChat, unsure
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError, FallbackError
from agentbranch.policy import Generate, GotoNode, Policy, Resolver, parse_label
from agentbranch.policy import generation

TEAM = ab.choice("Which team?", {"billing": "money", "outage": "down", "bug": "broken"})


def engine(script: Any = None) -> ab.DecisionEngine:
    return ab.DecisionEngine(ab.ScriptedReader(script or {"team": unsure("bug")}))


class HungChat(BaseChatModel):
    """A fallback model that never answers until ``release`` is set."""

    release: Any = None

    @property
    def _llm_type(self) -> str:
        return "hung"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kw: Any) -> ChatResult:
        self.release.wait()
        return ChatResult(generations=[ChatGeneration(message=AIMessage('{"label": "bug"}'))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, **kw: Any
    ) -> ChatResult:
        await asyncio.Event().wait()  # for ever: only a cancel ends it
        raise AssertionError("unreachable")


# -- 1. a fallback with a time limit -------------------------------------------------------


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_hung_generate_expires_and_the_next_fallback_runs(path, caplog):
    release = threading.Event()
    hung = HungChat(release=release)
    backup = StrictFakeChat(replies=['{"label": "billing"}'])
    policy = Policy(
        take_at=0.6, fallbacks=[Generate(hung, timeout_s=0.2), Generate(backup), GotoNode("x")]
    )
    r = Resolver(engine(), {"team": TEAM}, policy)
    try:
        with caplog.at_level(logging.WARNING, logger="agentbranch"):
            rec = r.resolve("x") if path == "sync" else asyncio.run(r.aresolve("x"))
    finally:
        release.set()
    assert (rec["team"]["label"], rec["team"]["decided_by"]) == ("billing", "fallback")
    assert backup.calls == 1
    assert any("did not answer within 0.2 s" in m for m in caplog.messages)


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_hung_last_generate_is_a_fallback_error_naming_the_timeout(path):
    release = threading.Event()
    r = Resolver(
        engine(), {"team": TEAM}, Policy(take_at=0.6, fallbacks=[Generate(HungChat(release=release), timeout_s=0.1)])
    )
    try:
        with pytest.raises(FallbackError, match=r"timeout_s"):
            r.resolve("x") if path == "sync" else asyncio.run(r.aresolve("x"))
    finally:
        release.set()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "60"])
def test_generate_timeout_must_be_positive_seconds(bad):
    with pytest.raises(ConfigurationError, match="timeout_s"):
        Generate(StrictFakeChat(replies=[]), timeout_s=bad)


def test_generate_has_a_default_timeout_and_none_waits():
    assert Generate(StrictFakeChat(replies=[])).timeout_s == 60.0
    assert Generate(StrictFakeChat(replies=[]), timeout_s=None).timeout_s is None


# -- 2. a linear-time parser with a bound ---------------------------------------------------


def _old_parse(raw_text: str, options: list[str]) -> str | None:
    """The parser before issue 52 (regex from the first '{' to the last '}')."""
    raw = raw_text.strip()
    if raw in options:
        return raw
    candidate: Any = raw
    found = re.search(r"\{.*\}", raw, re.DOTALL)
    if found:
        try:
            obj = json.loads(found.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            candidate = obj.get("label", obj.get("choice", obj.get("answer")))
    if isinstance(candidate, str):
        return generation.match_option(candidate, options)
    return None


def test_a_degenerate_400kb_reply_is_refused_without_being_scanned(monkeypatch):
    # A model stuck repeating '{"label": ' : rejected by length, and nothing in the parser
    # (no regex, no JSON decoder) ever reads more than the bound.
    reads: list[int] = []
    real_loads = json.loads

    def counting_loads(s, *a, **kw):
        reads.append(len(s))
        return real_loads(s, *a, **kw)

    monkeypatch.setattr(generation.json, "loads", counting_loads)
    scanned: list[int] = []
    for name in ("search", "match", "fullmatch", "findall", "finditer"):
        real = getattr(re, name)

        def spy(pattern, string, *a, _real=real, **k):
            scanned.append(len(string))
            return _real(pattern, string, *a, **k)

        monkeypatch.setattr(re, name, spy)
    reply = '{"label": ' * 40_000  # 400 KB
    with pytest.raises(FallbackError, match="more than an answer can be"):
        parse_label(reply, ["yes", "no"])
    assert reads == []
    assert max(scanned, default=0) <= generation.MAX_REPLY_CHARS
    # within the bound, a degenerate reply is read once, by one JSON parse of one slice
    small = '{"label": ' * 1000 + "}"
    with pytest.raises(FallbackError, match="names none"):
        parse_label(small, ["yes", "no"])
    assert len(reads) == 1 and reads[0] <= generation.MAX_REPLY_CHARS


_option = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    options=st.lists(_option, min_size=2, max_size=4, unique=True),
    pick=st.integers(0, 3),
    form=st.sampled_from(
        [
            "{o}",
            '{{"label": "{o}"}}',
            '```json\n{{"label": "{o}"}}\n```',
            '{{"choice": "{o}"}}',
            'Sure! {{"answer": "{o}"}} Hope this helps.',
            '"{o}".',
            "{{not json}} {o}",
            '{{"label": "{o}", "reason": "because"}}',
        ]
    ),
)
def test_parse_results_are_unchanged_on_normal_replies(options, pick, form):
    o = options[pick % len(options)]
    reply = form.format(o=o.replace("\\", "\\\\").replace('"', '\\"'))
    before = _old_parse(reply, options)
    try:
        after = parse_label(reply, options)
    except FallbackError:
        after = None
    assert after == before


# -- 3. a reply naming two labels is no label -----------------------------------------------


def test_a_reply_naming_two_different_labels_is_refused_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        with pytest.raises(FallbackError, match="two different labels"):
            parse_label('{"label": "no", "answer": "yes"}', ["yes", "no"])
    assert any("two different labels" in m for m in caplog.messages)
    # the same label under two keys is one label
    assert parse_label('{"label": "no", "answer": "No"}', ["yes", "no"]) == "no"


def test_an_ambiguous_fallback_reply_stores_no_evidence(tmp_path):
    from agentbranch.policy.earned import Earned

    store = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.9, store=str(store))
    model = StrictFakeChat(replies=['{"label": "billing", "answer": "bug"}'])
    r = Resolver(engine(), {"team": TEAM}, Policy(take_at=earned, fallbacks=[Generate(model), GotoNode("human")]))
    rec = r.resolve("charged twice")["team"]
    assert rec["decided_by"] == "fallback_node"
    assert not store.exists() or store.read_text() == ""
