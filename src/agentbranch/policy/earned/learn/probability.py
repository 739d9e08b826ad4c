"""The probability a learning question reports with each decision: the chance that the
engine's label is right, measured on the labels of the version that read it.

``ProbabilityFit`` keeps one version's labelled reads and fits on them a map
``p = σ(a·logit(confidence) + b)`` (``fit``), used only while it predicts better than
the read's own probability; ``apply`` gives a map's probability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Equal-width confidence bins the labels are counted in.
BINS = 50
#: Labels of a version before its map is first fitted.
MIN_LABELS = 30
#: Labels between refits, at least (then every 1/16 of the labels).
REFIT_EVERY = 8
#: Ridge towards the map ``(a, b) = (1, 0)``, in labels' worth of log-loss.
RIDGE = 1.0
#: Confidences and probabilities are kept this far from 0 and 1 (finite logits).
EPS = 1e-4
#: The slope's bounds (positive: the map keeps the order of confidences).
SLOPE = (0.01, 20.0)


def _logit(p: float) -> float:
    p = min(1.0 - EPS, max(EPS, p))
    return math.log(p / (1.0 - p))


def _sigmoid(s: float) -> float:
    if s >= 0:
        return 1.0 / (1.0 + math.exp(-s))
    e = math.exp(s)
    return e / (1.0 + e)


Map = tuple[float, float, float, float]


def apply(fitted: Map, confidence: float) -> float:
    """The probability the map ``fitted`` = ``(a, b, lowest, highest)`` gives a read of
    ``confidence``."""
    a, b, lo, hi = fitted
    return _sigmoid(a * min(hi, max(lo, _logit(confidence))) + b)


def _loss(p: float, correct: bool) -> float:
    p = min(1.0 - EPS, max(EPS, p))
    return -math.log(p if correct else 1.0 - p)


@dataclass(slots=True, eq=False)
class ProbabilityFit:
    """The labelled reads of one version (counts per confidence bin, weight ``1/rate``)
    and the map refitted on them from ``MIN_LABELS`` labels; each label is scored before
    it is counted, and the map reports (``in_force``) only while it predicts better than
    the read's own probability (docs/learning_method.md, "The probability it reports").
    """

    # per bin: the sum of the weights, of the right labels' weights, of weight x confidence
    weight: list[float] = field(default_factory=lambda: [0.0] * BINS)
    right: list[float] = field(default_factory=lambda: [0.0] * BINS)
    conf: list[float] = field(default_factory=lambda: [0.0] * BINS)
    labels: int = 0
    fitted_at: int = 0
    fitted: Map | None = None
    loss_read: float = 0.0  #: prequential log-loss of the read's own probability
    loss_map: float = 0.0  #: ... and of the map in force before each label

    def add(self, confidence: float, probability: float, correct: bool, weight: float) -> None:
        """Count one labelled read (``probability``: of its label as read; ``weight``:
        ``1/rate``); a non-finite or out-of-range value is not counted."""
        finite = all(math.isfinite(v) for v in (confidence, probability, weight))
        if not (finite and 0.0 <= confidence <= 1.0 and 0.0 <= probability <= 1.0 and weight > 0):
            return
        if self.fitted is not None:  # scored before it is counted
            self.loss_map += weight * _loss(apply(self.fitted, confidence), correct)
            self.loss_read += weight * _loss(probability, correct)
        i = min(int(confidence * BINS), BINS - 1)
        self.weight[i] += weight
        self.right[i] += weight if correct else 0.0
        self.conf[i] += weight * confidence
        self.labels += 1
        due = max(REFIT_EVERY, self.labels // 16)
        if self.labels >= MIN_LABELS and (
            self.fitted is None or self.labels - self.fitted_at >= due
        ):
            self.fitted = fit(self.weight, self.right, self.conf, self.labels)
            self.fitted_at = self.labels

    @property
    def in_force(self) -> Map | None:
        """The map, while it has predicted this version's labels better than the read's
        own probability; else ``None`` (the read's own probability is reported)."""
        return self.fitted if self.loss_map < self.loss_read else None


def fit(weight: list[float], right: list[float], conf: list[float], labels: int) -> Map:
    """``(a, b, lowest, highest)``: ``a, b`` minimising the weighted log-loss of
    ``σ(a·logit(x) + b)`` over the bins (``x`` each bin's mean confidence; weights scaled
    to ``labels`` in all) plus ``RIDGE·((a − 1)² + b²)`` (Newton steps), the bins' lowest
    and highest ``logit(x)``."""
    total = sum(weight)
    scale = labels / total if total > 0 else 0.0
    rows = [(_logit(c / w), w * scale, r * scale) for w, r, c in zip(weight, right, conf) if w > 0]
    a, b = 1.0, 0.0
    for _ in range(50):
        ga, gb = 2 * RIDGE * (a - 1.0), 2 * RIDGE * b
        haa, hab, hbb = 2 * RIDGE, 0.0, 2 * RIDGE
        for z, w, r in rows:
            p = _sigmoid(a * z + b)
            g = w * p - r  # d(loss)/ds summed over the bin's labels
            h = w * p * (1.0 - p)
            ga, gb = ga + g * z, gb + g
            haa, hab, hbb = haa + h * z * z, hab + h * z, hbb + h
        det = haa * hbb - hab * hab
        if det <= 0:
            break
        da, db = (hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det
        a, b = min(SLOPE[1], max(SLOPE[0], a - da)), b - db
        if abs(da) < 1e-9 and abs(db) < 1e-9:
            break
    zs = [z for z, _, _ in rows]
    return (a, b, min(zs), max(zs))


__all__ = [
    "BINS",
    "EPS",
    "MIN_LABELS",
    "Map",
    "ProbabilityFit",
    "REFIT_EVERY",
    "RIDGE",
    "SLOPE",
    "apply",
    "fit",
]
