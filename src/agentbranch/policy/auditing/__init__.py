"""Auditing taken decisions while a policy runs: the ``Audit`` setting, where audit
records go (sinks), the background worker that asks the teacher, and shadow reads.

Reports over the records live in ``agentbranch.audit``, which also re-exports these.
"""
