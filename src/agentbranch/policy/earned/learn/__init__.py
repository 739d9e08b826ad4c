"""Learning from the teacher: every label a fallback, an audit or a review gives becomes
training data for that question's read, under ``Earned``'s guarantee
(``Earned(..., learn=True)``).

* ``ladder``: reader versions, their trials and adoption (the rule that keeps the
  guarantee while the read changes);
* ``examples``: which labelled states a version shows as examples, and the question it
  reads;
* ``head``: the embedded reader's versions (a logistic head on the embeddings);
* ``nearest``: canvas readers' versions (per state, the nearest labelled states as
  few-shot lines);
* ``loop``: the learner (labels, trials, fits); ``hooks``: where the resolver meets it;
* ``replayed``: the version in force recorded with a replay cassette, and replayed;
* ``stored``: ``Earned.stored()`` with each version's key at its own share of the error
  (the report's learning section: ``agentbranch.audit.earned_learning``).
"""

__all__: list[str] = []
