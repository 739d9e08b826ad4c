"""Learning from the teacher: every label a fallback, an audit or a review gives becomes
training data for that question's read, under ``Earned``'s guarantee
(``Earned(..., learn=True)``).

* ``ladder``: reader versions, their trials and adoption (the rule that keeps the
  guarantee while the read changes);
* ``examples``: which labelled states a version shows as examples, and the question it
  reads.
* ``stored``: ``Earned.stored()`` with each version's key at its own share of the error
  (the report's learning section: ``agentbranch.audit.earned_learning``).
"""
