"""How many audited takes the drift test (``thresholds.Drift``) needs to withdraw a band
whose precision fell: the figures docs and reports quote (at precision 0.9, level 0.95:
93 audited takes when the precision falls to 0.8, 25 to 0.7, 7 to 0.5). The state
machine never calls it. The work is bounded: a drop the drift test cannot see, or one
it would need more than ``TAKES_LIMIT`` audited takes for, is a ``ValueError`` at once.
"""

from __future__ import annotations

import math

from agentbranch.policy.thresholds import DRIFT_DROPS, Drift

#: The most audited takes after the drop ``takes_to_withdraw`` follows before it gives
#: up, and the longest good record (``history``) it replays first.
TAKES_LIMIT = 10_000
HISTORY_LIMIT = 100_000


def _finite(*values: float) -> bool:
    try:
        return all(math.isfinite(float(v)) for v in values)
    except (TypeError, ValueError, OverflowError):
        return False


def takes_to_withdraw(
    precision: float,
    true_precision: float,
    level: float,
    *,
    history: int = 0,
    before: float = 1.0,
) -> int:
    """Audited takes the drift test needs to withdraw a band whose precision fell to
    ``true_precision`` after ``history`` audited takes at ``before``, when the audits
    show exactly those rates (the typical path: after ``n`` audits, the number wrong is
    the expected one, rounded). ``0`` if it never would (``true_precision >=
    precision``).

    ``ValueError`` when the answer cannot be computed with bounded work: arguments that
    are not numbers in range, a drop too small for the drift test's alternatives
    (``DRIFT_DROPS``) to ever see on this path, more than ``TAKES_LIMIT`` audited takes
    after the drop, or a ``history`` longer than ``HISTORY_LIMIT``."""
    if not (
        _finite(precision, true_precision, level, before)
        and 0.0 < precision < 1.0
        and 0.0 < level < 1.0
        and 0.0 <= true_precision <= 1.0
        and 0.0 <= before <= 1.0
    ):
        raise ValueError(
            "takes_to_withdraw needs precision and level in (0, 1) and true_precision and "
            f"before in [0, 1]; got {precision!r}, {true_precision!r}, {level!r}, {before!r}"
        )
    if not isinstance(history, int) or isinstance(history, bool) or history < 0:
        raise ValueError(f"history must be a whole number >= 0, got {history!r}")
    if true_precision >= precision:
        return 0
    if history > HISTORY_LIMIT:
        raise ValueError(f"history={history} is more than {HISTORY_LIMIT} audited takes")
    qs = [precision - d for d in DRIFT_DROPS if precision - d > 0.0]
    gain = max(
        (
            true_precision * math.log(q / precision)
            + (1 - true_precision) * math.log((1 - q) / (1 - precision))
            for q in qs
        ),
        default=0.0,
    )
    if gain <= 0.0:
        raise ValueError(
            f"the drift test cannot withdraw a band whose precision fell from {precision:g} "
            f"to {true_precision:g}: its alternatives are {sorted(round(q, 6) for q in qs)} "
            "and none fits audits right that often better than the target does"
        )
    alpha = 1.0 - level
    if math.log(1.0 / alpha) / gain > TAKES_LIMIT:
        raise ValueError(
            f"withdrawing a band whose precision fell from {precision:g} to "
            f"{true_precision:g} takes more than {TAKES_LIMIT} audited takes"
        )
    drift = Drift(precision)
    for n in range(1, history + TAKES_LIMIT + 1):
        if n <= history:
            wrong = round(n * (1.0 - before))
        else:
            wrong = round(history * (1.0 - before) + (n - history) * (1.0 - true_precision))
        drift.add(wrong == drift.wrong)
        if n > history and drift.drifted(alpha):
            return n - history
    raise ValueError(
        f"withdrawing a band whose precision fell from {precision:g} to {true_precision:g} "
        f"takes more than {TAKES_LIMIT} audited takes"
    )
