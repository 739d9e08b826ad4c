"""Auditing taken decisions while a policy runs: the ``Audit`` setting, where audit
records go (sinks), the background worker that asks the teacher (with a timeout and
rate-limited warnings: ``worker``, ``ratelimit``), shadow reads, and the audit health
that suspends an ``Earned`` band whose due audits stop arriving (``health``).

Reports over the records live in ``agentbranch.audit``, which also re-exports these.
"""

__all__: list[str] = []
