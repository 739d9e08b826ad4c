"""Earned trust: a take threshold learned per question from the teacher's labels.

The public face: ``Earned`` (``Policy(take_at=Earned(...))``), what it reports
(``TrustState``, ``Threshold``, by ``QuestionKey``), ``Evidence`` and its stores,
``replay``, ``takes_to_withdraw``/``drifted``. The modules behind it are private:

* ``_earned``: the policy object; ``_state``: the state machine, fed by ``_window``,
  ``_ledger`` and ``_digests``
* ``_statistics``: the look test; ``_drift``: the drift test; ``_looks``: when looks run
* ``_evidence``: record and key; ``_stores``, ``_jsonl_store``, ``_langgraph_store``,
  ``_any_store``: the stores; ``_checkpoint``: the state beside a JSON Lines store
* ``_collect``: evidence from decisions; ``_identity``; ``_in_force``
* ``learn/``: learning a better read of a question from its evidence
"""

from agentbranch.policy.earned._drift import drifted, takes_to_withdraw
from agentbranch.policy.earned._earned import Earned
from agentbranch.policy.earned._evidence import Evidence, QuestionKey, evidence_key
from agentbranch.policy.earned._jsonl_store import JsonlEvidenceStore
from agentbranch.policy.earned._langgraph_store import LangGraphEvidenceStore
from agentbranch.policy.earned._state import Threshold, TrustState, replay
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
