"""Deprecated import path: ``agentbranch.calibrate`` moved to ``agentbranch.calibration``
(fitting temperatures from labelled files).

Removed in agentbranch 0.3. Every name is still found here, with a ``DeprecationWarning``;
import it from
``agentbranch.calibration``.
"""

from agentbranch.core.moved import forward, names

__getattr__ = forward("agentbranch.calibrate", "agentbranch.calibration")
__dir__ = names("agentbranch.calibration")
