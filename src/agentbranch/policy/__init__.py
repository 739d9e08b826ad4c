"""Confidence policy: put each decision in a band and resolve it (docs/langgraph.md).

It knows of LangGraph only the thread a decision runs in (its identity: ``records``):
review is a callback the integration supplies.

* ``config``: what a policy says (``Policy``, the fallbacks, ``FailOpen``/``FailClosed``)
* ``trust``: the seam a threshold's source implements (``TrustSource``; ``Fixed``)
* ``bands`` → ``review`` → ``fallbacks`` (with ``generation``): the steps of resolving
* ``resolving``, ``steps``, ``resolver``: those steps written once, run sync or async
* ``records``: decision records; ``failure``: engine errors
* ``auditing/``: the teacher asked while a policy runs
* ``earned/``: earned thresholds (``take_at=Earned(...)``), a layer above the rest that
  implements the trust seam; nothing here imports it but this face, which re-exports it
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
