"""How many audited takes the drift test (``thresholds.Drift``) needs to withdraw a band
whose precision fell: ``takes_to_withdraw``, the figures docs and reports quote (at
precision 0.9, level 0.95: 93 audited takes when the precision falls to 0.8, 25 to 0.7,
7 to 0.5). It lives in ``agentbranch.policy.thresholds`` beside the drift test; this
module names it on its own."""

from agentbranch.policy.thresholds import HISTORY_LIMIT, TAKES_LIMIT, takes_to_withdraw

__all__ = ["HISTORY_LIMIT", "TAKES_LIMIT", "takes_to_withdraw"]
