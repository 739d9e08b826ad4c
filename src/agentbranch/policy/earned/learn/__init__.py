"""Learning from the teacher: every label a fallback, an audit or a review gives becomes
training data for that question's read, under ``Earned``'s guarantee
(``Earned(..., learn=True)``; the method: docs/learning_method.md).

``ladder`` (versions, trials, adoption) and ``eprocess`` (a version's anytime-valid
test); ``examples``, ``head`` and ``nearest`` (what a version reads); ``loop`` (the
learner), ``hooks`` (where the resolver meets it), ``shared`` and ``probability`` (what
replicas share, the probability reported), ``replayed`` and ``stored`` (replays).
"""

__all__: list[str] = []
