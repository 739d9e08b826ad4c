"""Deprecated import path: ``agentbranch.at_exit`` moved to ``agentbranch.core.at_exit``
(finishing work when the process exits).

Removed in agentbranch 0.3. Every name is still found here, with a ``DeprecationWarning``;
import it from
``agentbranch.core.at_exit``.
"""

from agentbranch.core.moved import forward, names

__getattr__ = forward("agentbranch.at_exit", "agentbranch.core.at_exit")
__dir__ = names("agentbranch.core.at_exit")
