"""Earned trust: a take threshold learned per question from the teacher's labels.

``Earned`` is the policy object (``Policy(take_at=Earned(...))``); ``TrustState`` and
``Threshold`` are what it reports per question, by ``QuestionKey``; ``Evidence`` is one
labelled decision and the stores keep them (``JsonlEvidenceStore``,
``LangGraphEvidenceStore``, or any ``EvidenceStore``); ``replay`` recomputes a state
from records; ``takes_to_withdraw`` and ``drifted`` are the drift test's figures. The modules behind this face are private:

* ``_earned``: the policy object; ``_state``: the state machine, fed by ``_window``
  (late labels) and ``_ledger`` (every question, from the store), ``_digests`` (ids seen);
* ``_statistics``: the look test over counts; ``_drift``: the drift test; ``_looks``:
  when looks run;
* ``_evidence``: the record schema and key; ``_stores``: the store interface, kept by
  ``_jsonl_store`` and ``_langgraph_store`` (``_any_store`` picks one);
  ``_checkpoint``: the state saved beside a JSON Lines store;
* ``_collect``: evidence from resolved decisions; ``_identity``: one decision's identity;
  ``_in_force``: the threshold a decision was read under;
* ``learn/``: learning a better read of a question from its evidence.
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
