"""The drift test of an open band, kept in constant space.

Audited takes are a uniform sample of the take band; ``DriftState`` mixes e-processes
for "precision >= target" started at spaced restarts (``restart_weight``), so checking
after every audit is valid over the band's whole life (Ville's inequality) and a long
good record delays withdrawal only logarithmically. ``takes_to_withdraw`` gives the
audited takes it needs on the typical path; ``drifted`` is one e-process's verdict.
"""

from __future__ import annotations

import math

from agentbranch.policy.earned._statistics import finite

__all__ = [
    "DRIFT_DROPS",
    "HISTORY_LIMIT",
    "TAKES_LIMIT",
    "DriftState",
    "drifted",
    "restart_weight",
    "takes_to_withdraw",
]

#: Alternatives of the drift e-process, as drops below the target precision.
DRIFT_DROPS: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5)


def _drift_log(right: float, wrong: float, precision: float) -> float:
    """Log of one drift e-process after ``right``/``wrong`` audited takes since it
    started: the mixture likelihood ratio over ``DRIFT_DROPS`` (log-sum-exp)."""
    qs = [precision - d for d in DRIFT_DROPS if precision - d > 0.0]
    if not qs:
        return 0.0
    v = [right * math.log(q / precision) + wrong * math.log((1 - q) / (1 - precision)) for q in qs]
    m = max(v)
    return m + math.log(sum(math.exp(x - m) for x in v) / len(v))


def drifted(right: int, wrong: int, precision: float, alpha: float) -> bool:
    """Whether one drift e-process (``drift_evalue``) reaches ``1/alpha``."""
    if wrong == 0:
        return False
    e = math.exp(_drift_log(right, wrong, precision))
    # A NaN e-value counts as drift: a test that cannot be computed keeps nothing open.
    return not math.isfinite(e) or e >= 1.0 / alpha


#: Restarts of the drift test: per octave of audited takes ``[2**k, 2**(k+1))`` at
#: least this many start points, evenly spaced ...
RESTARTS_PER_OCTAVE = 64
#: ... and never more than this many audited takes apart.
RESTART_SPACING = 128


def restart_weight(n: int) -> float:
    """The weight of the drift e-process started after ``n`` audited takes (0 if none
    starts there): 1/2 at 0; the start points of octave ``k`` share ``1/((k+2)(k+3))``
    evenly. The weights sum to 1."""
    if n == 0:
        return 0.5
    k = n.bit_length() - 1
    per = min(2**k, max(RESTARTS_PER_OCTAVE, 2**k // RESTART_SPACING))
    if (n - 2**k) % (2**k // per):
        return 0.0
    return 1.0 / ((k + 2) * (k + 3) * per)


#: The most audited takes after the drop ``takes_to_withdraw`` follows before it gives
#: up, and the longest good record (``history``) it replays first.
TAKES_LIMIT = 10_000
HISTORY_LIMIT = 100_000


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
        finite(precision, true_precision, level, before)
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
    drift = DriftState(precision)
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


class DriftState:
    """the reference ``Drift`` in constant space: ``Σ_j w_j E_j`` is kept per alternative
    ``q`` as one running sum (each started e-process is multiplied by the same factor
    per audited take, and a restart adds its weight at 1), so an audited take costs
    O(alternatives), not O(restarts). Equal to ``Drift`` up to float rounding."""

    __slots__ = ("precision", "right", "wrong", "evalue", "_sums", "_started", "_up", "_down")

    def __init__(self, precision: float) -> None:
        self.precision = precision
        self.right = self.wrong = 0
        self.evalue = 1.0
        qs = [precision - d for d in DRIFT_DROPS if precision - d > 0.0]
        self._up = [q / precision for q in qs]  # factor per right audited take
        self._down = [(1 - q) / (1 - precision) for q in qs]  # per wrong one
        self._sums = [0.0] * len(qs)
        self._started = 0.0

    def add(self, correct: bool) -> float:
        """Count one audited take; the e-value after it."""
        w = restart_weight(self.right + self.wrong)
        if w > 0.0:
            self._started += w
            self._sums = [s + w for s in self._sums]
        factors = self._up if correct else self._down
        self._sums = [s * f for s, f in zip(self._sums, factors)]
        if correct:
            self.right += 1
        else:
            self.wrong += 1
        mixed = sum(self._sums) / len(self._sums) if self._sums else self._started
        self.evalue = mixed + max(0.0, 1.0 - self._started)
        return self.evalue

    def drifted(self, alpha: float) -> bool:
        # An e-value that is not a number counts as drift (fail closed).
        return self.wrong > 0 and not (self.evalue < 1.0 / alpha)

    def copy(self) -> DriftState:
        new = DriftState.__new__(DriftState)
        new.precision, new.right, new.wrong, new.evalue = (
            self.precision,
            self.right,
            self.wrong,
            self.evalue,
        )
        new._sums, new._started = list(self._sums), self._started
        new._up, new._down = self._up, self._down
        return new

    def to_dict(self) -> dict:
        """The running sums as JSON-safe values, for a checkpoint."""
        return {
            "precision": self.precision,
            "right": self.right,
            "wrong": self.wrong,
            "evalue": self.evalue,
            "sums": list(self._sums),
            "started": self._started,
        }

    @classmethod
    def from_dict(cls, raw: dict) -> DriftState:
        """The inverse of ``to_dict``."""
        drift = cls(raw["precision"])
        drift.right, drift.wrong, drift.evalue = raw["right"], raw["wrong"], raw["evalue"]
        drift._sums, drift._started = [float(x) for x in raw["sums"]], raw["started"]
        return drift
