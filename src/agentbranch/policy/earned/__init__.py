"""Earned trust: a take threshold learned per question from the teacher's labels.

The package above ``policy/``: ``Earned`` implements the trust seam that
``agentbranch.policy.trust`` declares (``TrustSource``), and nothing in ``policy/``
imports it (``agentbranch.policy`` re-exports it as a public face). Nothing outside the
package imports its private modules: what agentbranch's reports and docs/earned.md
need of them is importable from here too, outside ``__all__`` (imported ``as``
themselves: ``as_store``, ``DriftState``, ``EarnedSettings``, ``AuditHealth``,
``health_window``).

The public face: ``Earned`` (``Policy(take_at=Earned(...))``), what it reports
(``TrustState``, ``Threshold``, by ``QuestionKey``), ``Evidence`` and its stores,
``replay``, ``takes_to_withdraw``/``drifted``. The modules behind it are private:

* ``_earned``: the policy object, the evidence of a labelled decision and the audits
  that never came (they suspend a band)
* ``_state``: the state machine, the window of late labels, the ledger of every
  question and the digests that count each label once
* ``_statistics``: the look test, when looks run, and the drift test
* ``_evidence``: record and key; ``_stores``, ``_jsonl_store``, ``_langgraph_store``,
  ``_any_store``: the stores; ``_checkpoint``: the state beside a JSON Lines store
* ``learn/``: learning a better read of a question from its evidence
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
