"""A CI verdict: does a frozen policy's take band meet a precision and a coverage?
``verify`` answers PASS, BLOCK or INCONCLUSIVE from exact bounds (``verdict_of``; the rule
and what it promises: docs/replay.md, section 8); ``assert_verified`` is the pytest form.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentbranch.audit.report import json_safe
from agentbranch.core.errors import ConfigurationError

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = [
    "Bounds",
    "QuestionCounts",
    "Verdict",
    "Verification",
    "assert_verified",
    "clopper_pearson",
    "thresholds_in_force",
    "verdict_of",
    "verify",
]

Verdict = Literal["PASS", "BLOCK", "INCONCLUSIVE"]


@dataclass(frozen=True)
class Bounds:
    """``k`` of ``n``, its share and its exact bounds (each one-sided at ``1 - α/2``)."""

    k: int
    n: int
    estimate: float  # nan when n = 0
    lower: float
    upper: float


def clopper_pearson(k: int, n: int, level: float) -> Bounds:
    """The exact two-sided interval of ``k`` successes in ``n`` at ``level``: each end
    is a one-sided bound at ``1 - (1 - level)/2``. ``n = 0`` says nothing: ``[0, 1]``."""
    _check_level(level)
    if not (0 <= k <= n):
        raise ConfigurationError(f"need 0 <= k <= n, got k={k}, n={n}")
    from scipy.stats import beta

    tail = (1.0 - level) / 2.0
    lower = 0.0 if k == 0 else float(beta.ppf(tail, k, n - k + 1))
    upper = 1.0 if k == n else float(beta.isf(tail, k + 1, n - k))
    return Bounds(k, n, k / n if n else math.nan, lower, upper)


def verdict_of(
    precision: Bounds, coverage: Bounds, target_precision: float, target_coverage: float
) -> Verdict:
    """PASS when both lower bounds reach their targets, BLOCK when an upper bound misses
    its target, else INCONCLUSIVE."""
    if precision.lower >= target_precision and coverage.lower >= target_coverage:
        return "PASS"
    if precision.upper < target_precision or coverage.upper < target_coverage:
        return "BLOCK"
    return "INCONCLUSIVE"


@dataclass(frozen=True)
class QuestionCounts:
    """One question's decisions, the ones taken and the taken ones that were right."""

    take_at: float | None
    decisions: int
    taken: int
    right: int


@dataclass(frozen=True)
class Verification:
    """A verdict and what it stands on (``as_dict``: the ``--json`` output)."""

    verdict: Verdict
    precision: Bounds  # right of taken
    coverage: Bounds  # taken of decisions
    target_precision: float
    target_coverage: float
    level: float
    questions: dict[str, QuestionCounts] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """The exit status of ``agentbranch verify`` (which exits 3 on an error)."""
        return {"PASS": 0, "BLOCK": 1, "INCONCLUSIVE": 2}[self.verdict]

    @property
    def risk(self) -> tuple[float, float]:
        """``(lower, upper)`` bounds of the take band's risk, ``1 - precision``."""
        return 1.0 - self.precision.upper, 1.0 - self.precision.lower

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN becomes ``None``)."""
        return json_safe(
            {
                "verdict": self.verdict,
                "exit_code": self.exit_code,
                "level": self.level,
                "bound_level": 1.0 - (1.0 - self.level) / 2.0,
                "decisions": self.coverage.n,
                "taken": self.coverage.k,
                "right": self.precision.k,
                "precision": {"target": self.target_precision, **asdict(self.precision)},
                "coverage": {"target": self.target_coverage, **asdict(self.coverage)},
                "risk": {"lower": self.risk[0], "upper": self.risk[1]},
                "questions": {q: asdict(c) for q, c in self.questions.items()},
            }
        )

    def summary(self) -> str:
        """The verdict and its numbers in a few lines (what a failed assertion prints)."""
        p, c = self.precision, self.coverage
        one_sided = 1.0 - (1.0 - self.level) / 2.0
        lines = [
            f"{self.verdict}: {c.n} decisions, {c.k} taken, {p.k} of them right",
            f"  precision {_pct(p.estimate)} in [{p.lower:.4f}, {p.upper:.4f}], "
            f"target {self.target_precision:g}",
            f"  coverage  {_pct(c.estimate)} in [{c.lower:.4f}, {c.upper:.4f}], "
            f"target {self.target_coverage:g}",
            f"  exact bounds, each one-sided at {one_sided:g} (level {self.level:g}, "
            "split over the two)",
        ]
        for q, counts in self.questions.items():
            at = "nothing" if counts.take_at is None else f"{counts.take_at:g}"
            lines.append(
                f"  {q}: take_at {at}, {counts.taken} of {counts.decisions} taken, "
                f"{counts.right} right"
            )
        return "\n".join(lines)


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.4f}"


def _check_level(level: float) -> None:
    if not (isinstance(level, int | float) and 0.0 < level < 1.0):
        raise ConfigurationError(f"level must be in (0, 1), e.g. 0.95; got {level!r}")


def _check_target(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and 0.0 <= value <= 1.0):
        raise ConfigurationError(f"{name} must be a share in [0, 1], e.g. 0.9; got {value!r}")


def _thresholds(take_at: float | Mapping[str, float | None], ids: Sequence[str]) -> dict:
    """One threshold per question id; a question without one is an error."""
    if isinstance(take_at, Mapping):
        missing = sorted(set(ids) - set(take_at))
        if missing:
            raise ConfigurationError(
                f"no threshold for question(s) {missing}: the thresholds given hold "
                f"{sorted(take_at)}; give a take_at for each question the examples ask"
            )
        out = {q: take_at[q] for q in ids}
    else:
        out = dict.fromkeys(ids, take_at)
    for q, at in out.items():
        if at is not None and not (isinstance(at, int | float) and 0.0 <= at <= 1.0):
            raise ConfigurationError(f"take_at of {q!r} must be in [0, 1]; got {at!r}")
    return out


def verify(
    engine: Engine,
    examples: Sequence[Any] | str | Path,
    *,
    take_at: float | Mapping[str, float | None],
    precision: float,
    coverage: float,
    level: float = 0.95,
    questions: Mapping[str, Any] | None = None,
    question: str | None = None,
    batch_size: int = 32,
) -> Verification:
    """Read ``examples`` with ``engine`` and give the verdict of a frozen threshold.

    ``examples``: a labelled JSON Lines file (``questions`` and ``question`` as in
    ``load_labelled``) or ``Example``s. ``take_at``: one threshold for every question, or
    ``{question_id: take_at}`` (``None`` takes nothing). A decision is taken as a
    ``Policy(take_at=...)`` takes it, and right when its label is the example's."""
    from agentbranch.calibration.labelled import load_labelled
    from agentbranch.calibration.scored import decide_by_line
    from agentbranch.policy.config import GotoNode, Policy

    _check_level(level)
    _check_target("precision", precision)
    _check_target("coverage", coverage)
    if isinstance(examples, str | Path):
        examples = load_labelled(examples, questions, default_question=question)
    if not examples:
        raise ConfigurationError("no labelled examples to verify on")
    ids = list(dict.fromkeys(ex.question_id for ex in examples))
    at = _thresholds(take_at, ids)
    # Only the band is asked of these policies; the fallback is never run.
    policies = {
        q: Policy(take_at=t, fallbacks=[GotoNode("fallback")])
        for q, t in at.items()
        if t is not None
    }
    counts = {q: [0, 0, 0] for q in ids}  # decisions, taken, right
    # Questions about one source line are read in one request, as the engine would.
    for _, decided in decide_by_line(engine, examples, batch_size):
        for ex, d in decided:
            c, t = counts[ex.question_id], at[ex.question_id]
            taken = t is not None and policies[ex.question_id].band(d, t) == "take"
            c[0], c[1], c[2] = c[0] + 1, c[1] + taken, c[2] + (taken and d.label == ex.label)
    n, taken, right = (sum(c[i] for c in counts.values()) for i in range(3))
    prec = clopper_pearson(right, taken, level)
    cov = clopper_pearson(taken, n, level)
    return Verification(
        verdict_of(prec, cov, precision, coverage),
        prec,
        cov,
        precision,
        coverage,
        level,
        {q: QuestionCounts(at[q], *c) for q, c in counts.items()},
    )


def thresholds_in_force(store: Any, asked: Sequence[str] = ()) -> dict[str, float | None]:
    """``{question_id: take_at}`` an ``Earned`` policy's evidence store holds now (as
    ``agentbranch audit report`` shows). A question with different thresholds under
    several readers is an error, and so is an ``asked`` question that decides with a
    learned version of its read (the labelled file is read with the question as written)."""
    from agentbranch.audit.earned_report import earned_report

    rep = earned_report(store)
    for learned in rep.learning.values():
        if learned.question_id in asked and learned.in_force > 0:
            raise ConfigurationError(
                f"question {learned.question_id!r} decides with learned version "
                f"{learned.in_force} of its read, and the store's threshold is that read's; "
                "verify reads the question as written, so give --take-at for it instead"
            )
    out: dict[str, float | None] = {}
    for trust in rep.questions.values():
        q = trust.question_id
        if q in out and out[q] != trust.take_at:
            raise ConfigurationError(
                f"the evidence store holds two thresholds for question {q!r} ({out[q]} and "
                f"{trust.take_at}, under different readers); give --take-at instead"
            )
        out[q] = trust.take_at
    if not out:
        raise ConfigurationError(f"{store}: the evidence store holds no question's evidence")
    return out


def assert_verified(result: Verification | None = None, /, **verify_args: Any) -> Verification:
    """Fail (``AssertionError`` with the whole summary) unless the verdict is PASS.

    Pass a ``Verification``, or ``verify``'s arguments::

        assert_verified(engine=engine, examples="labelled.jsonl", take_at=0.8,
                        precision=0.9, coverage=0.5)
    """
    if result is None:
        result = verify(**verify_args)
    if result.verdict != "PASS":
        raise AssertionError(result.summary())
    return result
