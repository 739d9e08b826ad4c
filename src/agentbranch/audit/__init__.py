"""Audits: measure the take band's precision on live traffic, with a teacher model
(docs/audit.md). While a policy runs, ``agentbranch.policy.auditing`` asks the teacher;
this package holds the reports over the records it leaves (``audit_report``, for
``Earned`` ``earned_report``), calibration from them, and the CI verdict (``verify``).
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
from agentbranch.audit.verdict import Verification, assert_verified, verify
from agentbranch.core.audit_records import AuditRecord
from agentbranch.policy.auditing.config import AUDIT_EVENT, Audit
from agentbranch.policy.auditing.worker import AuditStats, CallbackSink, JsonlSink, StoreSink

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
    "Verification",
    "assert_verified",
    "audit_report",
    "audits_needed",
    "earned_diagram",
    "earned_report",
    "calibrate_from_audit",
    "labelled_examples",
    "load_records",
    "scored_examples",
    "verify",
    "wilson",
]
