"""Deprecated import path: ``agentbranch.audit.schema`` moved to
``agentbranch.core.audit_records`` (the audit record schema).

Removed in agentbranch 0.3. Every name is still found here, with a ``DeprecationWarning``;
import it from
``agentbranch.core.audit_records``.
"""

from agentbranch.core.moved import forward, names

__getattr__ = forward("agentbranch.audit.schema", "agentbranch.core.audit_records")
__dir__ = names("agentbranch.core.audit_records")
