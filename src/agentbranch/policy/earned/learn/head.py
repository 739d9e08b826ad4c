"""A learned version's head for the embedded reader (``fit_head``): a logistic
regression on the embeddings of a question's labelled states (``core.heads.LinearHead``)
with its confidence map ``softmax(z / T + s)`` fitted out-of-fold on the same labels
(``cross_fitted_map``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from agentbranch.core.heads import LinearHead
from agentbranch.core.questions import to_spec

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

#: Inverse regularisation strength (``benchmarks/learning.py``: the ``head`` variant).
C = 10.0
#: Folds of the out-of-fold reads the confidence map is fitted on.
FOLDS = 5
#: The temperatures tried (log-spaced): the map starts at the best and stays within them.
T_MIN, T_MAX, T_STEPS = 0.05, 50.0, 481
#: The weight of the written question's option scores a head reads beside the state's
#: embedding (``LinearHead.written``; 0: the embedding alone).
WRITTEN_WEIGHT = 10.0
#: Ridge weight on the shifts: where the labels say little of an option, its shift stays near 0.
SHIFT_RIDGE = 1e-3


def _fit(options: list[str], x: Any, y: Any, c: float) -> LinearHead | None:
    from sklearn.linear_model import LogisticRegression

    if len(set(y.tolist())) < 2:
        return None
    model = LogisticRegression(C=c, max_iter=2000).fit(x, y)
    classes = [options[int(k)] for k in model.classes_]
    weights, bias = model.coef_, model.intercept_
    if len(classes) == 2:  # one logit z: probabilities (1 - sigmoid(z), sigmoid(z))
        weights = np.vstack([np.zeros_like(weights[0]), weights[0]])
        bias = np.array([0.0, bias[0]])
    return LinearHead(options, classes, weights, bias)


def _rows(logits: Any, labels: Any) -> tuple[Any, Any]:
    """The finite rows of ``logits`` (each shifted to a maximum of 0) and their labels."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=int)
    if z.ndim != 2 or not len(z):
        return np.zeros((0, z.shape[-1] if z.ndim == 2 else 0)), np.zeros(0, int)
    ok = np.isfinite(z).all(1)
    z = z[ok]
    return z - z.max(1, keepdims=True) if len(z) else z, y[ok]


def fit_temperature(logits: Any, labels: Any) -> float:
    """The temperature (of the ``T_STEPS`` log-spaced ones) that minimises the mean
    log-loss of ``softmax(logits / T)`` at ``labels`` (column indices); 1 with no finite row."""
    z, y = _rows(logits, labels)
    if not len(z):
        return 1.0
    betas = np.exp(-np.linspace(np.log(T_MIN), np.log(T_MAX), T_STEPS))  # 1/T
    rows = np.arange(len(z))
    best, best_loss = 1.0, np.inf
    for beta in betas:
        s = beta * z
        m = s.max(1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(s - m).sum(1))
        loss = float(np.mean(lse - s[rows, y]))
        if loss < best_loss - 1e-12:
            best, best_loss = float(1.0 / beta), loss
    return best


def fit_map(logits: Any, labels: Any, ridge: float = SHIFT_RIDGE) -> tuple[float, Any]:
    """The confidence map ``(T, s)`` that minimises the mean log-loss of
    ``softmax(logits / T + s)`` at ``labels`` (column indices) plus ``ridge * |s|^2``
    (L-BFGS-B from ``fit_temperature``'s best; never worse than it). Rows that are not
    finite are left out; with none left, ``(1, 0)``."""
    from scipy.optimize import minimize

    z, y = _rows(logits, labels)
    k = z.shape[1] if z.ndim == 2 else 0
    if not len(z):
        return 1.0, np.zeros(k)
    t0 = fit_temperature(z, y)
    rows, onehot = np.arange(len(z)), np.eye(k)[y]

    def loss(params: Any) -> tuple[float, Any]:
        beta, shift = params[0], params[1:]
        s = beta * z + shift
        m = s.max(1, keepdims=True)
        e = np.exp(s - m)
        total = e.sum(1, keepdims=True)
        p = e / total
        value = np.mean(m[:, 0] + np.log(total[:, 0]) - s[rows, y]) + ridge * shift @ shift
        grad_beta = np.mean((p * z).sum(1) - z[rows, y])
        grad_shift = (p - onehot).mean(0) + 2 * ridge * shift
        return float(value), np.concatenate([[grad_beta], grad_shift])

    bounds = [(1.0 / T_MAX, 1.0 / T_MIN)] + [(None, None)] * k
    fit = minimize(loss, np.r_[1.0 / t0, np.zeros(k)], jac=True, method="L-BFGS-B", bounds=bounds)
    beta, shift = float(fit.x[0]), np.asarray(fit.x[1:], dtype=np.float64)
    start = loss(np.r_[1.0 / t0, np.zeros(k)])[0]
    if not (np.isfinite(fit.x).all() and beta > 0 and loss(fit.x)[0] <= start):
        return t0, np.zeros(k)  # never worse than the temperature alone
    return float(np.clip(1.0 / beta, T_MIN, T_MAX)), shift - shift.mean()


def oof_log_probs(head: LinearHead, x: Any, y: Any, c: float = C) -> Any:
    """Out-of-fold log-probabilities over ``head``'s classes: label ``i`` read by a head
    fitted on the labels of the other folds (``i mod FOLDS``); rows of nan where a fold
    could not be fitted (FLOOR for a class the fold never saw)."""
    options, classes = list(head.options), list(head.classes)
    fold = np.arange(len(y)) % FOLDS
    oof = np.full((len(y), len(classes)), np.nan)
    for f in range(FOLDS):
        test = fold == f
        part = _fit(options, x[~test], y[~test], c)
        if part is not None:
            oof[test] = part.log_probs(x[test], classes)
    return oof


def cross_fitted_map(
    head: LinearHead,
    x: Any,
    y: Any,
    c: float = C,
    ridge: float | None = SHIFT_RIDGE,
    oof: Any = None,
) -> tuple[float, Any]:
    """The confidence map ``(T, s)`` of ``head`` (fitted on all of ``x``, ``y``; ``s``
    one shift per head class), fitted on its out-of-fold reads (``oof_log_probs``, or
    ``oof``), since its reads of its own training labels are sure of them (why:
    docs/learning_method.md). ``(1, 0)`` when fewer than ``2 * FOLDS`` labels;
    ``ridge=None``: the temperature alone."""
    classes = list(head.classes)
    none = (1.0, np.zeros(len(classes)))
    if len(y) < 2 * FOLDS:
        return none
    oof = oof_log_probs(head, x, y, c) if oof is None else oof
    ok = np.isfinite(oof).all(1)
    if ok.sum() < FOLDS:
        return none
    at = np.array([classes.index(head.options[int(k)]) for k in y])
    if ridge is None:
        return fit_temperature(oof[ok], at[ok]), none[1]
    return fit_map(oof[ok], at[ok], ridge)


def fit_head(
    options: Sequence[str],
    vectors: Any,
    labels: Sequence[str],
    c: float = C,
    calibrate: bool = True,
    shift: bool = True,
    written: float = 0.0,
) -> LinearHead | None:
    """The head fitted on ``vectors`` (embeddings, each followed by the written scores
    times ``written``) and their ``labels`` (option names), with its confidence map
    (``calibrate=False``: none; ``shift=False``: the temperature alone); ``None`` when
    fewer than two options are labelled. Deterministic: replicas on the same library
    versions fit the same numbers, so the same digest and evidence key."""
    options = list(options)
    y = np.array([options.index(label) for label in labels])
    x = np.asarray(vectors, dtype=np.float64)
    head = _fit(options, x, y, c)
    if head is None:
        return None
    if not calibrate:
        return LinearHead(head.options, head.classes, head.weights, head.bias, written=written)
    t, s = cross_fitted_map(head, x, y, c, ridge=SHIFT_RIDGE if shift else None)
    # the shift rides in the biases: softmax((Wx + b) / T + s) = softmax((Wx + b + T s) / T)
    return LinearHead(
        head.options, head.classes, head.weights, head.bias + t * s, t, written=written
    )


def head_inputs(engine: Engine, question_id: str, question: Any, vectors: Any) -> tuple[Any, float]:
    """What a version's head reads for states embedded as ``vectors`` and the weight of
    the written ``question``'s option scores after them (0 when the reader has none)."""
    scores = engine.reader.written_scores
    if scores is None or not WRITTEN_WEIGHT:
        return vectors, 0.0
    z = scores(vectors, to_spec(question_id, question))
    if z is None or not np.isfinite(z).all():
        return vectors, 0.0
    return np.hstack([vectors, WRITTEN_WEIGHT * z]), WRITTEN_WEIGHT


__all__ = [
    "C",
    "FOLDS",
    "SHIFT_RIDGE",
    "WRITTEN_WEIGHT",
    "cross_fitted_map",
    "oof_log_probs",
    "fit_head",
    "fit_map",
    "fit_temperature",
    "head_inputs",
]
