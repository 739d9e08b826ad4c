"""Auditing taken decisions while a policy runs: the ``Audit`` setting, the background
worker, its sinks and rate-limited warnings, and the resolver's hook (``shadow``), which
reports each due audit to the policy's trust source. Reports over the records live in
``agentbranch.audit``, which also re-exports these.
"""

__all__: list[str] = []
