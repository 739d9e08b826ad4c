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
from agentbranch.policy import Generate, GotoNode, Policy, Resolver, generation, parse_label
from agentbranch.policy.earned import EvidenceStore, QuestionKey

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
        engine(),
        {"team": TEAM},
        Policy(take_at=0.6, fallbacks=[Generate(HungChat(release=release), timeout_s=0.1)]),
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


_option = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
)


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
    policy = Policy(take_at=earned, fallbacks=[Generate(model), GotoNode("human")])
    r = Resolver(engine(), {"team": TEAM}, policy)
    rec = r.resolve("charged twice")["team"]
    assert rec["decided_by"] == "fallback_node"
    assert not store.exists() or store.read_text() == ""


class RepeatedKeyChat(BaseChatModel):
    """A teacher whose every reply names the key ``label`` twice (issue 64)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "repeated-key"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kw: Any) -> ChatResult:
        self.calls += 1
        reply = AIMessage('{"label": "no", "label": "yes"}')
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_a_reply_repeating_a_key_is_no_label(caplog):
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        with pytest.raises(FallbackError, match="names the key 'label' twice"):
            parse_label('{"label": "yes", "label": "no"}', ["yes", "no"])
        with pytest.raises(FallbackError, match="twice"):  # the same label twice too
            parse_label('```json\n{"label": "no", "label": "no"}\n```', ["yes", "no"])
    assert any("twice in one object" in m for m in caplog.messages)


def test_a_teacher_repeating_a_key_stores_nothing_and_opens_nothing(tmp_path):
    """Through a decide node with Earned: 30 replies ``{"label": "no", "label": "yes"}``
    (JSON keeps the last, the engine's label) store no evidence, and nothing opens."""
    import _earned_fixtures as fx
    from langgraph.graph import START, StateGraph

    from agentbranch.langgraph import DecideNode
    from agentbranch.policy.earned import Earned

    store = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0, store=str(store))
    teacher = RepeatedKeyChat()
    policy = Policy(take_at=earned, fallbacks=[Generate(teacher), GotoNode("human")])
    node = DecideNode(fx.engine(), {"urgent": fx.URGENT}, policy=policy, state_key="text")
    g = StateGraph(dict)
    g.add_node("decide", node)
    g.add_edge(START, "decide")
    app = g.compile()
    for i in range(30):
        out = app.invoke({"text": fx.state(i, "yes", 0.99, "yes")})
        rec = out["decisions"]["urgent"]
        assert rec["decided_by"] == "fallback_node" and rec["trust"] == "learning", rec
    assert teacher.calls == 30
    assert not store.exists() or store.read_text() == ""
    assert (
        earned.state(QuestionKey("urgent", fx.URGENT, "scripted", "scripted-model")).take_at is None
    )


# -- 4. one version-aware message wherever a store is read -------------------------------


def _fallback_run(store: Any, n: int = 5, **earned_kw: Any) -> Any:
    """``n`` fallback decisions of an Earned policy on ``store``; the Earned."""
    import _earned_fixtures as fx

    from agentbranch.policy.earned import Earned

    earned = Earned(precision=0.9, store=store, **earned_kw)
    policy = Policy(take_at=earned, fallbacks=[Generate(fx.Oracle())])
    r = Resolver(fx.engine(), {"urgent": fx.URGENT}, policy)
    for i in range(n):
        rec = r.resolve(fx.state(i, "yes", 0.8, "yes"))["urgent"]
        assert rec["decided_by"] == "fallback"  # serving goes on
    return earned


def _newer(path, tmp_path):
    _fallback_run(str(path))
    newer = tmp_path / "newer.jsonl"
    newer.write_text(path.read_text().replace("agentbranch.earned/1", "agentbranch.earned/2"))
    return newer


def test_the_report_on_a_newer_releases_store_says_upgrade(tmp_path):
    from typer.testing import CliRunner

    from agentbranch.cli import app
    from agentbranch.policy.earned import Earned

    newer = _newer(tmp_path / "evidence.jsonl", tmp_path)
    with pytest.raises(Exception, match="newer release") as lib:
        Earned(store=str(newer)).stored()
    result = CliRunner().invoke(app, ["audit", "report", "--details", str(newer)])
    out = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert result.exit_code == 2, out
    assert "written by a newer release" in out and "upgrade agentbranch" in out
    assert "can be deleted" not in out and "not a valid audit record" not in out
    assert "upgrade agentbranch" in str(lib.value)


def test_an_audit_file_holding_a_newer_record_says_upgrade_not_delete(tmp_path):
    from agentbranch.audit.report import load_records
    from agentbranch.core.errors import InvalidFileError

    newer = _newer(tmp_path / "evidence.jsonl", tmp_path)
    audits = tmp_path / "audits.jsonl"
    audits.write_text(newer.read_text().splitlines()[0] + "\n")
    with pytest.raises(InvalidFileError, match="upgrade agentbranch") as e:
        load_records(audits)
    assert "can be deleted" not in str(e.value) and f"{audits}:1" in str(e.value)


# -- 5. errors that name the store ---------------------------------------------------------


def _deny(monkeypatch, path, err: int = 13):
    """Reads of ``path`` fail as for a file this process may not read (tests run as root,
    which reads any file: the refusal is simulated at ``os.open``)."""
    import os

    from agentbranch.core import files

    real = os.open

    def refusing(p, flags, *a, **kw):
        if os.fspath(p) == os.fspath(path):
            raise OSError(err, os.strerror(err), os.fspath(p))  # errno 13: a PermissionError
        return real(p, flags, *a, **kw)

    monkeypatch.setattr(files.os, "open", refusing)


def test_a_store_the_process_may_not_read_is_an_error_naming_it(tmp_path, monkeypatch):
    from agentbranch.core.errors import AgentBranchError
    from agentbranch.policy.earned import Earned

    path = tmp_path / "evidence.jsonl"
    _fallback_run(str(path))
    _deny(monkeypatch, path)
    with pytest.raises(AgentBranchError) as e:
        Earned(store=str(path))
    assert str(path) in str(e.value) and "read and write access" in str(e.value)
    assert "Permission denied" in str(e.value)


def test_an_io_error_while_serving_is_an_error_naming_the_store(tmp_path, monkeypatch):
    import errno

    from agentbranch.core.errors import InvalidFileError
    from agentbranch.policy.earned import JsonlEvidenceStore

    path = tmp_path / "evidence.jsonl"
    _fallback_run(str(path))
    store = JsonlEvidenceStore(path)
    _deny(monkeypatch, path, errno.EIO)
    for read in (store.read_new, store.keys, lambda: store.load("k")):
        with pytest.raises(InvalidFileError, match=re.escape(str(path))):
            read()


# -- 6. lost labels counted ------------------------------------------------------------------


class FullDisk(EvidenceStore):
    """A JSON Lines store whose writes fail as on a full disk until ``full`` is False."""

    def __init__(self, path):
        import errno

        from agentbranch.policy.earned import JsonlEvidenceStore

        self.inner = JsonlEvidenceStore(path)
        self.full = True
        self.errno = errno.ENOSPC

    def append(self, records):
        import os

        if self.full:
            raise OSError(self.errno, os.strerror(self.errno))
        self.inner.append(records)

    def load(self, key):
        return self.inner.load(key)

    def keys(self):
        return self.inner.keys()

    def __repr__(self):
        return f"FullDisk({str(self.inner.path)!r})"


def test_labels_lost_to_a_full_disk_are_counted_with_one_error_per_burst(tmp_path, caplog):
    from agentbranch.policy import labels_lost

    store = FullDisk(tmp_path / "evidence.jsonl")
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        earned = _fallback_run(store, n=7)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(errors) == 1, caplog.text
    assert "FullDisk(" in errors[0].getMessage() and "No space left" in errors[0].getMessage()
    assert not [w for w in warnings if "not stored" in w.getMessage()]
    assert labels_lost(earned) == 7 and labels_lost(store) == 7
    caplog.clear()
    store.full = False
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        _fallback_run(store, n=2)
    assert "7 label(s) were lost" in caplog.text
    assert labels_lost(store) == 7 and len(store.inner.keys()) == 1


# -- 7. files holding user text are owner-only ---------------------------------------------


@pytest.fixture
def usual_umask():
    import os

    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path) -> int:
    return path.stat().st_mode & 0o777


def test_stores_and_audit_files_are_created_owner_only(tmp_path, usual_umask):
    import _earned_fixtures as fx

    from agentbranch.policy import Audit
    from agentbranch.policy.earned import Earned

    store, audits = tmp_path / "evidence.jsonl", tmp_path / "audits.jsonl"
    earned = Earned(precision=0.9, store=str(store), learn=True)
    audit = Audit(rate=1.0, sink=str(audits))
    policy = Policy(take_at=earned, fallbacks=[Generate(fx.Oracle())], audit=audit)
    r = Resolver(fx.engine(), {"urgent": fx.URGENT}, policy)
    r.resolve(fx.state(1, "yes", 0.8, "yes"))
    assert audit.flush(30)
    assert "item 1" in store.read_text()  # the labelled state's text: user text
    assert _mode(store) == 0o600 and _mode(audits) == 0o600


def test_the_operator_may_ask_for_other_permissions(tmp_path, usual_umask):
    from agentbranch.policy.auditing.worker import JsonlSink
    from agentbranch.policy.earned import JsonlEvidenceStore

    store = JsonlEvidenceStore(tmp_path / "evidence.jsonl", mode=0o640)
    _fallback_run(store, n=1)
    JsonlSink(tmp_path / "audits.jsonl", mode=0o640).write({"kind": "audit"})
    assert _mode(tmp_path / "evidence.jsonl") == 0o640
    assert _mode(tmp_path / "audits.jsonl") == 0o640
    with pytest.raises(ConfigurationError, match="mode"):
        JsonlEvidenceStore(tmp_path / "x.jsonl", mode="0640")


def test_a_torn_line_moved_aside_is_owner_only_too(tmp_path, usual_umask):
    path = tmp_path / "evidence.jsonl"
    earned = _fallback_run(str(path), n=2)
    with open(path, "ab") as f:
        f.write(b'{"schema": "agentbranch.earned/1", "id": "torn')
    _fallback_run(str(path), n=1)
    assert earned is not None and _mode(tmp_path / "evidence.jsonl.torn") == 0o600


def test_cassettes_stay_readable_to_be_committed(tmp_path, usual_umask):
    from agentbranch.core.files import SHARED_MODE, append_regular
    from agentbranch.replay import files

    path = tmp_path / "run.cassette.jsonl"
    files.append(path, b"{}\n")
    assert _mode(path) == SHARED_MODE & ~0o022 == 0o644
    append_regular(tmp_path / "private", b"x", lambda m: OSError())
    assert _mode(tmp_path / "private") == 0o600


def _wide_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "holds user text" in r.getMessage()]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "audit"])
def test_a_store_that_exists_world_readable_is_tightened_with_one_warning(
    tmp_path, usual_umask, caplog, kind
):
    """Issue 64: a store made 0644 before agentbranch wrote to it (by hand, another
    tool, an older release) was appended to without a word. Where this process owns it,
    it is tightened to owner-only, with one WARNING per path."""
    import os
    import sqlite3

    from agentbranch.policy.auditing.worker import JsonlSink

    path = tmp_path / {"jsonl": "evidence.jsonl", "sqlite": "evidence.db", "audit": "a.jsonl"}[kind]
    if kind == "sqlite":
        sqlite3.connect(path).close()  # the application's database, made 0644
    else:
        path.touch()
    os.chmod(path, 0o644)
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        if kind == "audit":
            for _ in range(3):
                JsonlSink(path).write({"kind": "audit", "state": "a user's words"})
        elif kind == "jsonl":
            _fallback_run(str(path), n=3)
            _fallback_run(str(path), n=2)  # another Earned on the same path: still once
        else:
            from langgraph.store.sqlite import SqliteStore

            with SqliteStore.from_conn_string(str(path)) as store:
                store.setup()
                _fallback_run(store, n=3)
    assert _mode(path) == 0o600
    (warning,) = _wide_warnings(caplog)
    assert str(path) in warning and "0o644" in warning and "tightened it to 0o600" in warning


def test_a_world_readable_store_of_another_account_is_left_with_a_warning(
    tmp_path, usual_umask, caplog, monkeypatch
):
    """A file this process does not own is not chmod-ed: the warning says so and how to
    fix it."""
    import os

    from agentbranch.core import files

    path = tmp_path / "evidence.jsonl"
    path.touch()
    os.chmod(path, 0o604)
    monkeypatch.setattr(files.os, "geteuid", lambda: os.getuid() + 1)  # someone else's
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        _fallback_run(str(path), n=2)
    assert _mode(path) == 0o604
    (warning,) = _wide_warnings(caplog)
    assert "left as it is" in warning and f"chmod 600 {path}" in warning


# -- 8. the CLI's questions pass the library's validation ------------------------------------


def _cli(*args: str):
    from typer.testing import CliRunner

    from agentbranch.cli import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def test_the_cli_refuses_repeated_options_with_the_librarys_message():
    with pytest.raises(ab.InvalidQuestionError) as lib:
        ab.choice("Which team?", ["billing", "shipping", "billing"])
    options = ["-o", "billing", "-o", "shipping", "-o", "billing"]
    code, out = _cli("decide", "x", "--choice", "Which team?", *options)
    assert code == 2 and "options must be distinct" in out and "billing" in out
    assert str(lib.value).split(":", 1)[1].strip()[:40] in " ".join(out.split())


def test_a_questions_file_with_a_duplicate_key_is_an_error_naming_it(tmp_path):
    path = tmp_path / "q.json"
    path.write_text(
        '{"urgent": {"type": "noul", "instructions": "Urgent?"},'
        ' "urgent": {"type": "noul", "instructions": "Angry?"}}'
    )
    code, out = _cli("decide", "x", "--questions", str(path))
    assert code == 2 and "'urgent' appears twice" in out


def test_an_empty_questions_file_says_it_asks_nothing(tmp_path):
    path = tmp_path / "q.json"
    path.write_text("{}")
    code, out = _cli("decide", "x", "--questions", str(path))
    assert code == 2 and "asks nothing" in out
    assert "ask something: --choice" not in out


# -- 9. the report's small print ------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "pct", "frac"),
    [
        (0.95, "95%", "0.95"),
        (0.995833, "99.6%", "0.996"),
        (1 - 0.05 / 12, "99.6%", "0.996"),
        (0.9875, "98.75%", "0.9875"),
        (0.9999, "99.99%", "0.9999"),
        (0.9, "90%", "0.9"),
    ],
)
def test_levels_are_written_the_way_a_person_writes_them(level, pct, frac):
    from agentbranch.audit.estimates import level_text, percent

    assert (percent(level), level_text(level)) == (pct, frac)


def _version_records():
    """Labels of four versions of one question, stored in the order v1, v3, v0, v2, at
    an audit rate (so the decisions they stand for are an estimate)."""
    from _evidence_records import evidence

    out, i = [], 0
    for version in (1, 3, 0, 2):
        for k in range(12):
            out.append(
                evidence(
                    key=f"key-{version}",
                    question_id="q",
                    reader="r",
                    model="m",
                    source="audit",
                    confidence=0.5,
                    teacher_label="yes" if k % 4 else "no",
                    rate=0.25,
                    take_at=None,
                    trust="learning",
                    version=version,
                    earned={
                        "precision": 0.9,
                        "level": 0.95,
                        "min_evidence": 50,
                        "max_take_at": 1.0,
                        "min_take_at": 0.0,
                        "start_at": None,
                        "step": 0.01,
                    },
                    time=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
                    state=f"s{i}",
                )
            )
            i += 1
    return out


def test_the_report_lists_versions_in_order_and_counts_at_95_percent():
    from rich.console import Console

    from agentbranch.audit.earned_render import tables
    from agentbranch.audit.earned_report import earned_report

    rep = earned_report(_version_records())
    versions = {v.key: v.version for lq in rep.learning.values() for v in lq.versions}
    assert [versions[k] for k in rep.questions] == [0, 1, 2, 3]
    console = Console(width=200, record=True)
    for table in tables(rep):
        console.print(table)
    text = console.export_text()
    titles = re.findall(r"^q v(\d):", text, re.MULTILINE)
    assert titles == ["0", "1", "2", "3"], text[:2000]
    assert "95% interval" in text and "100% interval" not in text
    assert not re.search(r"level 0\.\d{5,}", text), text


def test_the_report_of_a_live_earned_counts_its_lost_labels(tmp_path):
    from agentbranch.audit.earned_render import tables
    from agentbranch.audit.earned_report import earned_report

    store = FullDisk(tmp_path / "evidence.jsonl")
    earned = _fallback_run(store, n=3)
    store.full = False
    _fallback_run(store, n=1)  # the store takes labels again: one is there
    rep = earned_report(earned)
    assert rep.labels_lost == 3 and rep.as_dict()["labels_lost"] == 3
    assert any("labels lost" in str(t.columns[0]._cells) for t in tables(rep))
    assert "labels_lost" not in earned_report(store.inner.path).as_dict()  # cannot know


def test_hung_calls_do_not_pile_up_threads(monkeypatch):
    class Counting(HungChat):
        calls: int = 0

        def _generate(self, messages, stop=None, **kw):
            self.calls += 1
            return super()._generate(messages, stop, **kw)

    monkeypatch.setattr(generation, "MAX_STUCK", 1)
    monkeypatch.setattr(generation, "_stuck", [])
    release = threading.Event()
    hung = Counting(release=release)
    policy = Policy(take_at=0.6, fallbacks=[Generate(hung, timeout_s=0.1), GotoNode("human")])
    r = Resolver(engine(), {"team": TEAM}, policy)
    try:
        first = r.resolve("x")["team"]
        second = r.resolve("y")["team"]
    finally:
        release.set()
    assert first["decided_by"] == second["decided_by"] == "fallback_node"
    assert hung.calls == 1  # the second call was not made behind the stuck one
