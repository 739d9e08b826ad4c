"""A learned head on a question (``LinearHead``: per-option weights over a reader's state
embedding) and the question version that carries one (``with_head``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from agentbranch.core.questions import CompiledQuestion, Question, as_compiled

__all__ = [
    "FLOOR",
    "LinearHead",
    "softmax",
    "with_head",
]

#: Probability an option the head was not fitted on keeps (before renormalising).
FLOOR = 1e-6


class LinearHead:
    """Per-option weights ``(len(classes), dim)`` and biases over a state embedding.

    ``classes`` are the option names the head was fitted on (2 or more, in the order of
    the weight rows); ``options`` all options of the question, in order. ``temperature``
    (finite, > 0) divides the logits before the softmax (its per-option shift is already
    in the biases). ``written`` (finite, >= 0): when set, the head also reads the question
    as written: its input is the state's embedding followed by the written read's option
    scores times ``written``, so ``dim`` is the embedding's size plus the options'.

    The embedded reader reads a question that carries a head by it: options never
    labelled keep ``FLOOR``; a state whose embedding or logits are not finite reads
    uniform. The digest of its numbers is in the question's wire dict, so a version's
    evidence key changes with its weights. ``Earned(..., learn=True)`` fits heads.
    """

    __slots__ = ("options", "classes", "weights", "bias", "temperature", "written", "digest")

    def __init__(
        self,
        options: Sequence[str],
        classes: Sequence[str],
        weights: Any,
        bias: Any,
        temperature: float = 1.0,
        written: float = 0.0,
    ) -> None:
        import numpy as np

        w = np.array(weights, dtype=np.float64)
        b = np.array(bias, dtype=np.float64).reshape(-1)
        options, classes = tuple(options), tuple(classes)
        k = len(classes)
        if w.ndim != 2 or k < 2 or w.shape[0] != k or b.shape != (k,):
            raise ValueError(
                f"a head needs 2+ classes, weights (classes, dim) and one bias per class; got "
                f"{len(classes)} classes, weights {w.shape}, bias {b.shape}"
            )
        if not set(classes) <= set(options) or len(set(classes)) != len(classes):
            raise ValueError(f"head classes {classes} must be distinct options of {options}")
        if not (np.isfinite(w).all() and np.isfinite(b).all()):
            raise ValueError("a head's weights and biases must be finite")
        t = temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise ValueError(f"a head's temperature must be a number, got {t!r}")
        t = float(t)
        if not (math.isfinite(t) and t > 0 and math.isfinite(1.0 / t)):
            raise ValueError(f"a head's temperature must be a finite number > 0, got {t!r}")
        w.setflags(write=False)
        b.setflags(write=False)
        self.options, self.classes, self.weights, self.bias = options, classes, w, b
        self.temperature = t
        v = written
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"a head's written weight must be a finite number >= 0, got {v!r}")
        self.written = float(v)
        if self.written and w.shape[1] <= len(options):
            raise ValueError(
                f"a head that reads the written question takes an embedding and "
                f"{len(options)} option scores; got weights {w.shape}"
            )
        blob = repr((options, classes, w.shape)).encode() + w.tobytes() + b.tobytes()
        if t != 1.0:  # a head without a map keeps the digest it always had
            blob += b"temperature" + np.float64(t).tobytes()
        if self.written:  # (a head on the embedding alone keeps its digest)
            blob += b"written" + np.float64(self.written).tobytes()
        self.digest = hashlib.sha256(blob).hexdigest()[:32]

    @property
    def dim(self) -> int:
        """The size of its input (the embedding's, plus the options' when ``written``)."""
        return int(self.weights.shape[1])

    @property
    def embedding_dim(self) -> int:
        """The size of the state embedding it reads."""
        return self.dim - (len(self.options) if self.written else 0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinearHead) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return (
            f"LinearHead({len(self.classes)} of {len(self.options)} options, "
            f"dim {self.dim}, T={self.temperature:.3g}, written {self.written:.3g}, "
            f"{self.digest[:8]})"
        )

    def __deepcopy__(self, memo: dict) -> LinearHead:
        return self  # immutable

    def reads(self, options: Sequence[str]) -> bool:
        """Whether the head can read a question with ``options`` (all of them its own)."""
        return bool(options) and set(options) <= set(self.options)

    def logits(self, states: Any) -> Any:
        """``(n, len(classes))`` raw logits for ``states`` (``(n, dim)`` embeddings),
        before the temperature."""
        import numpy as np

        x = np.asarray(states, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"the head reads {self.dim}-dim embeddings, got {x.shape}")
        with np.errstate(all="ignore"):
            return x @ self.weights.T + self.bias

    def log_probs(self, states: Any, options: Sequence[str]) -> Any:
        """``(n, len(options))`` log-probabilities of ``options`` for ``states``
        (``(n, dim)`` embeddings): one matrix product for the batch, the logits divided
        by the temperature; a row that is not finite reads uniform over the options."""
        return self.over(softmax(self.logits(states), self.temperature), options)

    def over(self, p: Any, options: Sequence[str]) -> Any:
        """Log-probabilities over ``options`` from ``p`` (``(n, len(classes))``
        probabilities over the head's classes): an option never fitted keeps ``FLOOR``;
        a row that is not finite is uniform over ``options``."""
        import numpy as np

        p = np.asarray(p, dtype=np.float64)
        full = np.full((len(p), len(self.options)), FLOOR)
        full[:, [self.options.index(c) for c in self.classes]] = p
        full = full[:, [self.options.index(o) for o in options]]
        with np.errstate(all="ignore"):
            full /= full.sum(1, keepdims=True)
        bad = ~np.isfinite(full).all(1)
        full[bad] = 1.0 / len(options)
        with np.errstate(divide="ignore"):  # a probability that underflowed: -inf
            return np.log(full)

    def to_dict(self) -> dict[str, Any]:
        return {
            "options": list(self.options),
            "classes": list(self.classes),
            "weights": self.weights.tolist(),
            "bias": self.bias.tolist(),
            "temperature": self.temperature,
            "written": self.written,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LinearHead:
        parts = (d["options"], d["classes"], d["weights"], d["bias"])
        return cls(*parts, d.get("temperature", 1.0), d.get("written", 0.0))


def softmax(z: Any, temperature: float = 1.0) -> Any:
    """Row-wise softmax of logits ``z`` divided by ``temperature``; a row with a
    non-finite logit comes out NaN (``LinearHead.over`` reads it as uniform)."""
    import numpy as np

    z = np.asarray(z, dtype=np.float64)
    with np.errstate(all="ignore"):
        z = z / temperature
        z = z - z.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
    p[~np.isfinite(z).all(1)] = np.nan
    return p


def with_head(question: Question, head: LinearHead) -> CompiledQuestion:
    """``question`` (its written examples kept) read by ``head``: a new question, so a
    new evidence key (the head's digest is in its wire dict)."""
    return as_compiled(question).replace(head=head)
