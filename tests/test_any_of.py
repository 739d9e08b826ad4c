"""``any_of``: pick any of N options, one yes/no read per option, resolved by a Policy
like any other question (threshold, fallback, error handling and audit per option)."""

from __future__ import annotations

import pytest
from _audit_fixtures import Teacher
from _lg_fixtures import StrictFakeChat
from hypothesis import given, settings
from hypothesis import strategies as st

import agentbranch as ab
from agentbranch.audit import Audit
from agentbranch.core.any_of import AnyOf, member_questions, set_record
from agentbranch.core.errors import ConfigurationError, InvalidQuestionError, ReaderError
from agentbranch.core.questions import any_of, to_spec, validate_questions
from agentbranch.policy import FailOpen, Generate, GotoNode, Policy, Resolver

NEEDS = any_of(
    "Does the request need {option}?",
    {"search": "Search the web", "email": "Send an email", "calendar": None},
)


def reads(yes: dict[str, float]):
    """A scripted reader answering each member ``tools/<option>`` with P(yes) (any other
    yes/no question: sure of yes)."""

    def answer(state, q):
        p = yes.get(q.id.removeprefix("tools/"), 0.99)
        return {"yes": p, "no": 1.0 - p}

    reader = ab.ScriptedReader({}, default=answer)
    return ab.DecisionEngine(reader), reader


# -- the question ------------------------------------------------------------------------


def test_members_are_yes_no_questions_named_by_the_set():
    members = NEEDS.members("tools")
    assert list(members) == ["tools/search", "tools/email", "tools/calendar"]
    search = to_spec("tools/search", members["tools/search"])
    assert search.type == "noul" and search.instructions == "Does the request need search?"
    assert search.descriptions == ("search: Search the web", None)
    assert to_spec("c", members["tools/calendar"]).descriptions == (None, None)


def test_wire_dicts_round_trip_and_bad_input_says_what_to_fix():
    wire = NEEDS.model_dump()
    assert wire["type"] == "any_of"
    assert validate_questions({"tools": wire})["tools"] == NEEDS
    cases = [
        (lambda: any_of("Which tools apply?", ["a", "b"]), "must name it with {option}"),
        (lambda: any_of("Need {option}?", ["a", "a"]), "repeated"),
        (lambda: any_of("Need {option}?", []), "1 to 64 options"),
        (lambda: any_of("Need {option}?", [f"t{i}" for i in range(65)]), "1 to 64"),
        (lambda: any_of("Need {option}?", "ab"), "list of names"),
        (lambda: validate_questions({"t": {**wire, "extra": 1}}), "question 't'.*extra"),
        (lambda: validate_questions({"t": {**wire, "options": ["", "b"]}}), "question 't'"),
    ]
    for build, fix in cases:
        with pytest.raises(InvalidQuestionError, match=fix):
            build()


def test_a_set_is_not_asked_as_one_question_and_cannot_route():
    with pytest.raises(InvalidQuestionError, match="any_of question.*set"):
        to_spec("tools", NEEDS)
    with pytest.raises(ValueError, match="rename one of them"):
        member_questions({"tools": NEEDS, "tools/email": ab.yes_no("Email?")})
    from agentbranch.langgraph import decide_node

    node = decide_node(reads({})[0], {"tools": NEEDS})
    with pytest.raises(InvalidQuestionError, match="cannot route"):
        node.router("tools")


def test_the_engine_reads_the_members_directly():
    engine, reader = reads({"search": 0.95, "email": 0.1, "calendar": 0.9})
    decisions = engine.decide("Find flights and book the meeting", NEEDS.members("tools"))
    assert {k: d.label for k, d in decisions.items()} == {
        "tools/search": "yes",
        "tools/email": "no",
        "tools/calendar": "yes",
    }
    assert len(reader.calls) == 1  # one read for the whole set


# -- resolved by a Policy ----------------------------------------------------------------


def test_a_sure_set_is_taken_with_each_member_read_in_one_read():
    engine, reader = reads({"search": 0.99, "email": 0.01, "calendar": 0.98})
    rec = Resolver(engine, {"tools": NEEDS}, Policy(take_at=0.8, fallbacks=[GotoNode("h")]))
    out = rec.resolve("Find the next flight and put it in my calendar")
    tools = out["tools"]
    assert tools["type"] == "any_of" and tools["label"] == ["search", "calendar"]
    assert (tools["band"], tools["decided_by"]) == ("take", "engine")
    assert tools["confidence"] == min(m["confidence"] for m in tools["members"].values())
    assert tools["members"]["email"]["question_id"] == "tools/email"
    assert tools["members"]["email"]["take_at"] == 0.8
    assert len(reader.calls) == 1 and len(reader.calls[0][0].questions) == 3


def test_an_unsure_member_falls_back_alone_and_the_teacher_answers_it():
    teacher = StrictFakeChat(replies=['{"label": "yes"}'])
    engine, _ = reads({"search": 0.99, "email": 0.55, "calendar": 0.02})
    policy = Policy(take_at=0.8, fallbacks=[Generate(teacher)])
    tools = Resolver(engine, {"tools": NEEDS}, policy).resolve("Mail the report")["tools"]
    assert tools["label"] == ["search", "email"] and tools["band"] == "fallback"
    email = tools["members"]["email"]
    assert (email["band"], email["decided_by"], email["engine_label"]) == (
        "fallback",
        "fallback",
        "yes",
    )
    assert tools["members"]["search"]["decided_by"] == "engine"
    assert tools["decided_by"] == "members" and teacher.calls == 1
    assert "Does the request need email?" in "\n".join(str(m.content) for m in teacher.prompts[0])


def test_a_member_routed_elsewhere_leaves_the_set_unanswered():
    engine, _ = reads({"search": 0.99, "email": 0.5, "calendar": 0.02})
    policy = {"tools": Policy(take_at=0.8, fallbacks=[GotoNode("human")]), "other": Policy()}
    out = Resolver(engine, {"tools": NEEDS, "other": ab.yes_no("Other?")}, policy).resolve("x")
    assert out["tools"]["label"] is None and out["tools"]["goto"] == "human"
    assert out["tools"]["band"] == "fallback" and set(out) == {"tools", "other"}


def test_engine_errors_follow_the_policy_per_member():
    engine = ab.DecisionEngine(ab.ScriptedReader({}, error=RuntimeError("down")))
    with pytest.raises(ReaderError):
        Resolver(engine, {"tools": NEEDS}, Policy()).resolve("x")
    open_ = Resolver(engine, {"tools": NEEDS}, {"*": Policy(on_error=FailOpen("yes"))})
    tools = open_.resolve("x")["tools"]
    assert tools["label"] == list(NEEDS.options) and tools["band"] == "error"
    assert tools["confidence"] is None and "down" in tools["error"]
    with pytest.raises(ConfigurationError, match="FailOpen label 'search'"):
        Resolver(engine, {"tools": NEEDS}, Policy(on_error=FailOpen("search")))


def test_taken_members_are_audited_like_any_question():
    records: list[dict] = []
    teacher = Teacher(rule=lambda prompt: "yes")
    audit = Audit(model=teacher, rate=1.0, sink=records.append, fallback_examples=False)
    engine, _ = reads({"search": 0.99, "email": 0.01, "calendar": 0.5})
    policy = Policy(take_at=0.8, fallbacks=[GotoNode("h")], audit=audit)
    Resolver(engine, {"tools": NEEDS}, policy).resolve("Find flights")
    assert audit.flush(timeout=30)
    audited = sorted(r["question_id"] for r in records)
    assert audited == ["tools/email", "tools/search"]  # the calendar read was not taken
    email = next(r for r in records if r["question_id"] == "tools/email")
    assert email["spec"]["type"] == "noul" and email["agree"] is False


def test_a_decide_node_writes_the_set_record():
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from agentbranch.langgraph import decide_node

    class S(TypedDict, total=False):
        text: str
        decisions: dict
        tools: list

    engine, _ = reads({"search": 0.99, "email": 0.97, "calendar": 0.01})
    node = decide_node(engine, {"tools": NEEDS}, state_key="text", write_labels=True)
    g = StateGraph(S)
    g.add_node("pick", node)
    g.add_edge(START, "pick")
    g.add_edge("pick", END)
    out = g.compile().invoke({"text": "Search and mail it"})
    assert out["tools"] == ["search", "email"]
    assert out["decisions"]["tools"]["members"]["calendar"]["label"] == "no"


# -- what "sure" means for a set ---------------------------------------------------------

P = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(
    others=st.lists(P, min_size=0, max_size=3),
    uniform=st.floats(0.45, 0.55),
    at=st.integers(0, 3),
    take_at=st.floats(0.05, 1.0),
)
def test_a_set_is_never_sure_when_any_member_read_is_near_uniform(others, uniform, at, take_at):
    probs = list(others)
    probs.insert(min(at, len(probs)), uniform)
    names = [f"t{i}" for i in range(len(probs))]
    question = any_of("Need {option}?", names)
    engine, _ = reads(dict(zip(names, probs)))
    policy = Policy(take_at=take_at, fallbacks=[GotoNode("human")])
    rec = Resolver(engine, {"tools": question}, policy).resolve("state")["tools"]
    near = names[probs.index(uniform)]
    assert rec["band"] != "take" and rec["members"][near]["band"] == "fallback"
    # (a near-uniform yes/no read has confidence < 0.01: 1 - H/ln 2 at p = 0.45)
    assert rec["confidence"] <= rec["members"][near]["confidence"] < 0.01 < take_at


@given(bands=st.lists(st.sampled_from(["take", "fallback", "review", "error"]), min_size=1))
def test_a_set_is_taken_only_when_every_member_is(bands):
    names = [f"t{i}" for i in range(len(bands))]
    question = AnyOf("Need {option}?", dict.fromkeys(names))
    members = {
        f"s/{n}": {"label": "yes", "band": b, "confidence": 0.9, "decided_by": "engine"}
        for n, b in zip(names, bands)
    }
    rec = set_record("s", question, members)
    assert (rec["band"] == "take") == all(b == "take" for b in bands)
    if "error" in bands:
        assert rec["band"] == "error"
