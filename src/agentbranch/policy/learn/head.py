"""A learned version's head for the embedded reader: a logistic regression on the
embeddings of a question's labelled states (``agentbranch.core.heads.LinearHead``), with
its confidence map, a temperature fitted out-of-fold on the same labels.

Fitted off the decision path (the learner's thread), deterministically (scikit-learn's
``LogisticRegression``, L-BFGS, on the states in replay order; folds by position; the
temperature by a fixed grid): replicas that run the same library versions on the same
labels fit the same numbers, so the same digest and evidence key. (Other numeric
libraries may round differently: a replica's head is then a version of its own that
earns its own threshold, never one that borrows another's.)

**The confidence map** (``cross_fitted_temperature``). A head fitted on ``n`` labels is
sure of them (its probabilities on its own training states are near 1), so a
temperature fitted on its own reads of them would be one as well. Instead the ``n``
labels are cut into ``FOLDS`` folds (label ``i`` in fold ``i mod FOLDS``); a head
fitted on the other folds reads each fold, and the temperature is the one that
minimises the log-loss of these out-of-fold reads. The version's head (fitted on all
``n``) carries it, and its digest with it: the map is part of the version, fitted on
the version's own labels only, so no label it learned from — weights or map — is
evidence for its threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbranch.core.heads import LinearHead

#: Inverse regularisation strength (``benchmarks/learning.py``: the ``head`` variant).
C = 10.0
#: L-BFGS iterations at most.
MAX_ITER = 2000
#: Folds of the out-of-fold reads the temperature is fitted on.
FOLDS = 5
#: The temperatures tried (log-spaced from 1/20 to 50): the map is the best of them.
T_MIN, T_MAX, T_STEPS = 0.05, 50.0, 481


def _fit(options: list[str], x: Any, y: Any, c: float) -> LinearHead | None:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    if len(set(y.tolist())) < 2:
        return None
    model = LogisticRegression(C=c, max_iter=MAX_ITER).fit(x, y)
    classes = [options[int(k)] for k in model.classes_]
    weights, bias = model.coef_, model.intercept_
    if len(classes) == 2:  # one logit z: probabilities (1 - sigmoid(z), sigmoid(z))
        weights = np.vstack([np.zeros_like(weights[0]), weights[0]])
        bias = np.array([0.0, bias[0]])
    return LinearHead(options, classes, weights, bias)


def fit_temperature(logits: Any, labels: Any) -> float:
    """The temperature (of the ``T_STEPS`` log-spaced ones in ``[T_MIN, T_MAX]``) that
    minimises the mean log-loss of ``softmax(logits / T)`` at ``labels`` (column
    indices). Rows that are not finite are left out; with none left, 1."""
    import numpy as np

    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=int)
    ok = np.isfinite(z).all(1) if z.ndim == 2 and len(z) else np.zeros(0, bool)
    if not ok.any():
        return 1.0
    z, y = z[ok], y[ok]
    z = z - z.max(1, keepdims=True)
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


def cross_fitted_temperature(
    head: LinearHead, x: Any, y: Any, c: float = C, folds: int = FOLDS
) -> float:
    """The temperature of ``head`` (fitted on all of ``x``, ``y``) from out-of-fold
    reads: label ``i`` is read by a head fitted on the labels of the other folds
    (``i mod folds``). 1 when fewer than ``2 * folds`` labels."""
    import numpy as np

    options, classes = list(head.options), list(head.classes)
    n = len(y)
    if n < 2 * folds:
        return 1.0
    fold = np.arange(n) % folds
    oof = np.full((n, len(classes)), np.nan)
    for f in range(folds):
        test = fold == f
        part = _fit(options, x[~test], y[~test], c)
        if part is None:
            continue
        # log-probabilities over the head's classes (FLOOR for one the fold never saw):
        # a temperature on them is the temperature on the logits (softmax is shift-free)
        oof[test] = part.log_probs(x[test], classes)
    ok = np.isfinite(oof).all(1)
    if ok.sum() < folds:
        return 1.0
    at = np.array([classes.index(options[int(k)]) for k in y])
    return fit_temperature(oof[ok], at[ok])


def fit_head(
    options: Sequence[str],
    vectors: Any,
    labels: Sequence[str],
    c: float = C,
    calibrate: bool = True,
) -> LinearHead | None:
    """The head fitted on ``vectors`` (``(n, dim)`` embeddings of labelled states) and
    their ``labels`` (option names), with its confidence map fitted out-of-fold on them
    (``calibrate=False``: temperature 1); ``None`` when fewer than two options are
    labelled (nothing to tell apart)."""
    import numpy as np

    options = list(options)
    y = np.array([options.index(label) for label in labels])
    x = np.asarray(vectors, dtype=np.float64)
    head = _fit(options, x, y, c)
    if head is None or not calibrate:
        return head
    t = cross_fitted_temperature(head, x, y, c)
    return LinearHead(head.options, head.classes, head.weights, head.bias, t)
