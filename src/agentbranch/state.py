"""Deprecated import path: ``agentbranch.state`` moved to ``agentbranch.core.state``
(rendering a graph state for a read).

Removed in agentbranch 0.3. Every name is still found here, with a ``DeprecationWarning``;
import it from
``agentbranch.core.state``.
"""

from agentbranch.core.moved import forward, names

__getattr__ = forward("agentbranch.state", "agentbranch.core.state")
__dir__ = names("agentbranch.core.state")
