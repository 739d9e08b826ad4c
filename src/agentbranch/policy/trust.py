"""Deprecated import path: ``agentbranch.policy.trust`` (one question's trust state) moved
to ``agentbranch.policy.earned``; removed in agentbranch 0.3.

Every public name is still found here, with a ``DeprecationWarning``; import it from
``agentbranch.policy.earned``.
"""

from agentbranch.core.moved import forward, names

__getattr__ = forward("agentbranch.policy.trust", "agentbranch.policy.earned")
__dir__ = names("agentbranch.policy.earned")
