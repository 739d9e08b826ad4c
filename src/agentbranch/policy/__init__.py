"""Confidence policy: put each decision in a band and resolve it (docs/langgraph.md).

``config`` says what a policy is, ``trust`` the seam a threshold's source implements,
``resolving`` the steps (with ``generation`` and ``records``), ``auditing/`` the
teacher asked while a policy runs, ``earned/`` earned thresholds (a layer above the rest
that nothing here imports but this face). Review is a callback the integration supplies.
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
    LabelLostError,
    LangGraphEvidenceStore,
    QuestionKey,
    Threshold,
    TrustState,
    evidence_key,
    labels_lost,
    replay,
)
from agentbranch.policy.generation import generation_messages, parse_label
from agentbranch.policy.records import engine_record, error_record, review_payload
from agentbranch.policy.resolving import Resolver

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
