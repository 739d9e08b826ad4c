"""Auditing taken decisions while a policy runs: the ``Audit`` setting (``config``), its
worker and sinks (``worker``) and the resolver's hook (``shadow``). Reports over the
records live in ``agentbranch.audit``, which also re-exports these."""

__all__: list[str] = []
