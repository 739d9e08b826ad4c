"""Audits: measure the take band's precision on live traffic, with a teacher model.

``Policy(take_at=0.8, fallbacks=[Generate(llm)], audit=Audit(rate=0.05, sink="audits.jsonl"))``
asks the teacher (here the fallback model) about 5% of the decisions the engine takes, in
the background, and keeps every fallback generation as a labelled example. Then:

* ``audit_report(load_records("audits.jsonl"))`` / ``agentbranch audit report
  audits.jsonl``: per question, the take band's precision with a Wilson interval,
  agreement by confidence bin and the ``take_at`` reaching a target precision;
* ``earned_report(earned_or_evidence)`` / ``agentbranch audit report evidence.jsonl``:
  for an ``Earned`` policy, the threshold in force over time, coverage, precision with
  its bound and drift events (``earned_report``; docs/earned.md); with ``learn=True``,
  per question the versions of its read and its learning curve (``earned_learning``);
* ``calibrate_from_audit("audits.jsonl")`` / ``agentbranch calibrate --from-audit
  audits.jsonl``: temperatures fitted on the teacher's labels.

Auditing has two rooms. While a policy runs, ``agentbranch.policy.auditing`` asks the
teacher (``config``: ``Audit``; ``worker``: the bounded background queue; ``sinks``;
``shadow``: the resolver's hook; ``health``: whether due audits arrive). This package
holds the reports over the records they leave: ``report`` (precision, bins, ``take_at``),
``labels`` (records as labelled examples), ``estimates``, and for ``Earned``
``earned_report`` over ``earned_sources`` (evidence or audit records), ``earned_now``,
``earned_learning`` and ``earned_render`` (the diagram). See docs/audit.md.
"""

from agentbranch.audit.earned_render import earned_diagram
from agentbranch.audit.earned_report import EarnedReport, QuestionTrust, earned_report
from agentbranch.audit.labels import calibrate_from_audit, labelled_examples, scored_examples
from agentbranch.audit.report import (
    AuditReport,
    ConfidenceBin,
    Precision,
    QuestionAudit,
    TakeAt,
    audit_report,
    audits_needed,
    load_records,
    wilson,
)
from agentbranch.core.audit_records import AuditRecord
from agentbranch.policy.auditing.config import AUDIT_EVENT, Audit
from agentbranch.policy.auditing.sinks import CallbackSink, JsonlSink, StoreSink
from agentbranch.policy.auditing.worker import AuditStats

__all__ = [
    "AUDIT_EVENT",
    "Audit",
    "AuditRecord",
    "AuditReport",
    "AuditStats",
    "CallbackSink",
    "ConfidenceBin",
    "EarnedReport",
    "JsonlSink",
    "Precision",
    "QuestionAudit",
    "QuestionTrust",
    "StoreSink",
    "TakeAt",
    "audit_report",
    "audits_needed",
    "earned_diagram",
    "earned_report",
    "calibrate_from_audit",
    "labelled_examples",
    "load_records",
    "scored_examples",
    "wilson",
]
