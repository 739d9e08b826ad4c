"""Support triage: route a ticket to a team, flag urgency, rate frustration; one decide
node asks the three questions in ONE engine call. Low-confidence team routing falls back
to generation when a ``fallback_model`` (a LangChain chat model) is given, else to the
``human_triage`` node. Urgency and frustration inform, they do not route: the state gets
their answer only at confidence ``INFO_TAKE_AT`` or above, else ``None`` (not sure; the
record keeps what the engine leaned to). ``triage_row(state)`` flattens a final state::

    graph = build_triage_graph(engine)
    state = graph.invoke({"ticket": "I was charged twice this month"})
    triage_row(state)   # {"ticket": ..., "queue": "billing", "team": "billing", ...}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from agentbranch.core.questions import choice, score, yes_no
from agentbranch.integrations.langgraph import DecisionRecords, decide_node
from agentbranch.policy import Generate, GotoNode, Policy, PolicyArg

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

TEAMS: dict[str, str] = {
    "billing": "Invoices, charges, refunds, payment methods and plans",
    "outage": "The service or a feature is down or failing for the customer right now",
    "account_access": "Login, password, two-factor, locked or compromised accounts",
    "bug": "Something works incorrectly or differently than documented",
    "feature_request": "Asks for new functionality or a change in behaviour",
}
FRUSTRATION_LEVELS = ["calm", "annoyed", "angry", "furious"]
#: Bare level names give the embedded CPU reader nothing to read; examples do.
FRUSTRATION_EXAMPLES = {
    "calm": ["Quick question about my plan, no rush.", "Thanks for the help yesterday!"],
    "annoyed": ["This is the second time I ask about this.", "Still not fixed, a bit annoying."],
    "angry": ["This is unacceptable, fix it today.", "Your product keeps failing me."],
    "furious": ["I AM DONE. CANCEL EVERYTHING NOW!!!", "Worst service ever, third time I write!!"],
}

#: Two descriptions alone leave the embedded reader over-confident on urgency; examples
#: (written for the demo, not taken from its tickets) let it fit its own temperature.
#: The "no" side holds the hard cases: angry but not blocking, one user's problem, a bug.
URGENT_EXAMPLES = {
    "yes": [
        "Checkout fails for every customer, we are losing sales.",
        "The whole app is down for all our users since this morning.",
        "A stranger changed the owner email on our company account.",
        "The import wiped our customer records and we can't restore them.",
        "Nobody on our team can sign in, the login fails for everyone.",
        "The API is down and our production app is broken.",
    ],
    "no": [
        "How do I change the company name on my invoices?",
        "You billed us twice again, I want this refunded today!!",
        "My password reset link has expired, can you send a new one?",
        "The export button puts the totals in the wrong column.",
        "Still no bulk edit after a year of asking? Very disappointing.",
        "More colour themes would be nice.",
    ],
}

TRIAGE_QUESTIONS = {
    "team": choice("Which team should handle this support ticket?", TEAMS),
    "urgent": yes_no(
        "Does this ticket need a response within the hour?",
        yes="Customers are blocked, losing money or data, or security is at risk",
        no="It can wait for the normal queue",
        examples=URGENT_EXAMPLES,
    ),
    "frustration": score(
        "How frustrated is the customer?", FRUSTRATION_LEVELS, examples=FRUSTRATION_EXAMPLES
    ),
}

#: Below this confidence the team is not taken from the engine.
DEFAULT_TEAM_TAKE_AT = 0.5
#: Below this confidence urgency and frustration are not set in the state (None: not
#: sure). An answer the engine cannot vouch for is not presented as a decision.
INFO_TAKE_AT = 0.5
INFO_QUESTIONS = ("urgent", "frustration")

SAMPLE_TICKETS: list[str] = [
    "I was charged twice for my subscription this month. Please refund the extra charge.",
    "Our whole dashboard has been returning 500 errors for 20 minutes. Production is down!",
    "I can't log in: the two-factor code never arrives and I'm locked out of my account.",
    "The CSV export puts dates in the wrong column since the last update.",
    "It would be great if reports could be scheduled to arrive by email every Monday.",
    "This is the THIRD time I'm writing. Nobody answers and my invoice is still wrong!!",
]


class TriageState(TypedDict, total=False):
    ticket: str
    team: str | None
    urgent: bool | None
    frustration: str | None
    queue: str
    decisions: DecisionRecords


def default_policy(
    fallback_model: Any = None, take_at: float = DEFAULT_TEAM_TAKE_AT
) -> dict[str, Policy]:
    """Team: take above ``take_at``, else generation (or ``human_triage``); the other
    questions are always taken (their records still show confidence)."""
    # A generated reply that names no team still reaches a person.
    fallbacks: list[Any] = [GotoNode("human_triage")]
    if fallback_model is not None:
        fallbacks.insert(0, Generate(fallback_model))
    return {"team": Policy(take_at=take_at, fallbacks=fallbacks), "*": Policy()}


def build_triage_graph(
    engine: Engine,
    *,
    fallback_model: Any = None,
    policy: PolicyArg = None,
    checkpointer: Any = None,
) -> Any:
    """The compiled triage graph: ``triage`` → ``assign`` | ``human_triage`` → END.

    ``policy`` (one ``Policy`` or a mapping question id → ``Policy``) replaces the
    default; a ``GotoNode`` fallback for the team may only name ``human_triage``.
    """
    if policy is None:
        policy = default_policy(fallback_model)
    triage = decide_node(
        engine,
        TRIAGE_QUESTIONS,
        policy=policy,
        state_key="ticket",
        output=_triage_update,
    )
    by_team = triage.router("team", {team: "assign" for team in TEAMS})

    graph = StateGraph(TriageState)
    graph.add_node("triage", triage)
    graph.add_node("assign", _assign)
    graph.add_node("human_triage", _human_triage)
    graph.add_edge(START, "triage")
    graph.add_conditional_edges("triage", by_team, by_team.path_map)
    graph.add_edge("assign", END)
    graph.add_edge("human_triage", END)
    return graph.compile(checkpointer=checkpointer)


def sure_label(record: dict[str, Any]) -> str | None:
    """The label of an informative question's record when the engine is sure enough to
    use it (confidence >= ``INFO_TAKE_AT``), else ``None``."""
    confidence = record.get("confidence")
    if confidence is None or confidence < INFO_TAKE_AT:
        return None
    return record.get("label")


def _triage_update(state: Any, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    urgent = sure_label(records["urgent"])
    return {
        "decisions": records,
        "team": records["team"]["label"] if not records["team"].get("goto") else None,
        "urgent": None if urgent is None else urgent == "yes",
        "frustration": sure_label(records["frustration"]),
    }


def _assign(state: TriageState) -> dict[str, Any]:
    return {"queue": state["team"]}


def _human_triage(state: TriageState) -> dict[str, Any]:
    # The ticket waits in the human triage queue; the engine's guess stays in the record.
    return {"queue": "human_triage", "team": None}


def triage_row(state: Any) -> dict[str, Any]:
    """One flat row per ticket: the outcome plus each decision's label, confidence, band
    and decided_by."""
    row = {key: state.get(key) for key in ("ticket", "queue", "team", "urgent", "frustration")}
    for question_id, rec in (state.get("decisions") or {}).items():
        for key in ("label", "confidence", "band", "decided_by"):
            row[f"{question_id}_{key}"] = rec.get(key)
    return row


__all__ = [
    "FRUSTRATION_EXAMPLES",
    "FRUSTRATION_LEVELS",
    "INFO_QUESTIONS",
    "INFO_TAKE_AT",
    "SAMPLE_TICKETS",
    "TEAMS",
    "TRIAGE_QUESTIONS",
    "TriageState",
    "URGENT_EXAMPLES",
    "build_triage_graph",
    "default_policy",
    "sure_label",
    "triage_row",
]
