"""Confidence policy: put each decision in a band and resolve it.

A ``Policy`` holds the thresholds for one decision (or a default for all):

* **take**: ``confidence >= take_at`` and ``label_mass >= min_label_mass`` — the engine's
  label is taken (``decided_by="engine"``);
* **review**: ``confidence < review_below`` — a human answers (LangGraph ``interrupt``),
  ``decided_by="human"``;
* **fallback**: everything in between (and a take-worthy confidence on too little label
  mass) — the ``fallbacks`` run in order until one resolves the decision:
  ``MoreDraws`` (re-read with more noise draws; taken if it now clears ``take_at``),
  ``Generate`` (a LangChain chat model answers the same question over the same options,
  validated; ``decided_by="fallback"``) and ``GotoNode`` (route to a named node,
  ``decided_by="fallback_node"``).

Engine errors are errors unless the policy says otherwise, explicitly:
``on_error=FailOpen("no")`` takes a named default option (``decided_by="fail_open"``),
``on_error=FailClosed("safe_node")`` routes to a named safe node
(``decided_by="fail_closed"``).

With ``audit=Audit(...)`` (``agentbranch.audit``) a sampled share of the taken decisions
is also asked of a teacher model in the background, and fallback generations are kept as
labelled examples; routes never change.

Every resolved decision is a plain dict (``DecisionRecord``), safe to keep in graph state
and checkpoints. This package knows nothing of LangGraph: review is a callback the
integration supplies.

Modules, one job each: ``config`` (what a policy says), ``records`` (decision records),
``bands`` → ``review`` → ``fallbacks`` (with ``generation``) the steps of resolving,
``failure`` (engine errors), ``resolver`` (the steps in order).

Earned thresholds (``take_at=Earned(...)``) have their own package, ``earned/`` (the
policy object, its state machine, statistics, evidence, stores, learning); ``auditing/``
asks the teacher while a policy runs.
"""

from agentbranch.policy.auditing.config import Audit
from agentbranch.policy.config import (
    Band,
    DecidedBy,
    DecisionRecord,
    FailClosed,
    FailOpen,
    Fallback,
    Generate,
    GotoNode,
    MoreDraws,
    OnError,
    Policy,
    PolicyArg,
    ReviewFn,
    check_policies,
    options_of,
    policy_for,
    question_text,
)
from agentbranch.policy.earned import (
    Earned,
    Evidence,
    EvidenceStore,
    JsonlEvidenceStore,
    LangGraphEvidenceStore,
    QuestionKey,
    Threshold,
    TrustState,
    evidence_key,
    replay,
)
from agentbranch.policy.generation import generation_messages, parse_label
from agentbranch.policy.label_loss import LabelLostError, labels_lost
from agentbranch.policy.records import engine_record, error_record, review_payload
from agentbranch.policy.resolver import Resolver

__all__ = [
    "Audit",
    "Band",
    "DecidedBy",
    "DecisionRecord",
    "Earned",
    "Evidence",
    "EvidenceStore",
    "FailClosed",
    "FailOpen",
    "Fallback",
    "Generate",
    "GotoNode",
    "JsonlEvidenceStore",
    "LabelLostError",
    "LangGraphEvidenceStore",
    "MoreDraws",
    "OnError",
    "Policy",
    "PolicyArg",
    "QuestionKey",
    "Resolver",
    "ReviewFn",
    "Threshold",
    "TrustState",
    "check_policies",
    "engine_record",
    "error_record",
    "evidence_key",
    "generation_messages",
    "labels_lost",
    "options_of",
    "parse_label",
    "policy_for",
    "question_text",
    "replay",
    "review_payload",
]
