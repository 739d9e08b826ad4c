"""Auditing taken decisions while a policy runs: the ``Audit`` setting, the background
worker that asks the teacher (with a timeout and rate-limited warnings) and the sinks
audit records go to (``worker``, ``ratelimit``), and shadow reads, which report each
due audit to the policy's trust source (``TrustSource.audit_arrived``/``audit_missing``:
``Earned`` suspends a band whose due audits stop arriving).

Reports over the records live in ``agentbranch.audit``, which also re-exports these.
"""

__all__: list[str] = []
