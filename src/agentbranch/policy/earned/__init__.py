"""Earned trust: a take threshold learned per question from the teacher's labels.

The package above ``policy/``: ``Earned`` implements the trust seam
(``agentbranch.policy.trust``) and nothing in ``policy/`` imports it. What reports need
of its private modules (the policy object, state machine, statistics, evidence, stores,
checkpoint) is importable from here, outside ``__all__``.
"""

from agentbranch.policy.earned._any_store import as_store as as_store
from agentbranch.policy.earned._earned import AuditHealth as AuditHealth
from agentbranch.policy.earned._earned import Earned
from agentbranch.policy.earned._earned import health_window as health_window
from agentbranch.policy.earned._evidence import EarnedSettings as EarnedSettings
from agentbranch.policy.earned._evidence import Evidence, QuestionKey, evidence_key
from agentbranch.policy.earned._evidence import new_evidence as new_evidence
from agentbranch.policy.earned._jsonl_store import JsonlEvidenceStore
from agentbranch.policy.earned._label_loss import LabelLostError as LabelLostError
from agentbranch.policy.earned._label_loss import labels_lost as labels_lost
from agentbranch.policy.earned._langgraph_store import LangGraphEvidenceStore
from agentbranch.policy.earned._state import Threshold, TrustState, replay
from agentbranch.policy.earned._statistics import DriftState as DriftState
from agentbranch.policy.earned._statistics import drifted, takes_to_withdraw
from agentbranch.policy.earned._stores import EvidenceStore

__all__ = [
    "Earned",
    "Evidence",
    "EvidenceStore",
    "JsonlEvidenceStore",
    "LangGraphEvidenceStore",
    "QuestionKey",
    "Threshold",
    "TrustState",
    "drifted",
    "evidence_key",
    "replay",
    "takes_to_withdraw",
]
