"""What a learned head reads beside a state's embedding: the question as written,
read by similarity (``LinearHead.written``), as option scores for given embeddings."""

from __future__ import annotations

from typing import Any

from agentbranch.core.reads import QuestionSpec
from agentbranch.engine.readers.embedded.texts import missing_signal, option_texts

__all__ = ["WrittenScores"]


class WrittenScores:
    """``EmbeddedReader.written_scores`` (its lock, caches and scoring are the reader's)."""

    _lock: Any
    _cache: Any  #: (its ``_keep`` remembers the option texts' embeddings)

    def written_scores(self, states: Any, q: QuestionSpec) -> Any:
        """``q`` read as written (whatever head it carries) on ``states`` (``(n, dim)``
        embeddings): each option's similarity score (before the temperature), an
        ``(n, len(q.options))`` array; ``None`` when the question has nothing to be read
        by (no descriptions nor examples, or yes/no descriptions that read alike). What
        a learned head that reads the written question too (``LinearHead.written``) is
        fitted on and reads."""
        import torch

        with self._lock:
            self._load()  # type: ignore[attr-defined]
            wanted = dict.fromkeys(option_texts(q))
            missing = [t for t in wanted if t not in self._cache]
            vectors = self._embed(missing, torch)  # type: ignore[attr-defined]
            vecs = self._keep(missing, vectors, wanted)  # type: ignore[attr-defined]
            return self._written_scores(torch.as_tensor(states), q, vecs)

    def _written_scores(self, states: Any, q: QuestionSpec, vecs: dict[str, Any]) -> Any:
        """``written_scores`` with the option texts' embeddings ``vecs`` at hand."""
        import numpy as np

        if missing_signal(q) or self._twins(q, vecs):  # type: ignore[attr-defined]
            return None
        comparisons = self._comparisons(q, vecs)  # type: ignore[attr-defined]
        sims = comparisons.similarities(states.to(comparisons.matrix.dtype))
        scores = [self._scores(row, q, comparisons) for row in sims]  # type: ignore[attr-defined]
        return np.array(scores, dtype=np.float64)
