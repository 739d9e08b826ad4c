"""A learned version's head for the embedded reader: a logistic regression on the
embeddings of a question's labelled states (``agentbranch.core.heads.LinearHead``).

Fitted off the decision path (the learner's thread), deterministically (scikit-learn's
``LogisticRegression``, L-BFGS, on the states in replay order): replicas that run the
same library versions on the same labels fit the same numbers, so the same digest and
evidence key. (Other numeric libraries may round differently: a replica's head is then
a version of its own that earns its own threshold, never one that borrows another's.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbranch.core.heads import LinearHead

#: Inverse regularisation strength (``benchmarks/learning.py``: the ``head`` variant).
C = 10.0
#: L-BFGS iterations at most.
MAX_ITER = 2000


def fit_head(
    options: Sequence[str], vectors: Any, labels: Sequence[str], c: float = C
) -> LinearHead | None:
    """The head fitted on ``vectors`` (``(n, dim)`` embeddings of labelled states) and
    their ``labels`` (option names); ``None`` when fewer than two options are labelled
    (nothing to tell apart)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    options = list(options)
    y = np.array([options.index(label) for label in labels])
    x = np.asarray(vectors, dtype=np.float64)
    if len(set(y.tolist())) < 2:
        return None
    model = LogisticRegression(C=c, max_iter=MAX_ITER).fit(x, y)
    classes = [options[int(k)] for k in model.classes_]
    weights, bias = model.coef_, model.intercept_
    if len(classes) == 2:  # one logit z: probabilities (1 - sigmoid(z), sigmoid(z))
        weights = np.vstack([np.zeros_like(weights[0]), weights[0]])
        bias = np.array([0.0, bias[0]])
    return LinearHead(options, classes, weights, bias)
