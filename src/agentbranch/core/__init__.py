"""The vocabulary every layer shares, and the small plumbing every layer uses.

Questions and their examples, decisions, errors, how a state is rendered to text and
whether it holds anything to read, the plain dataclasses that cross the reader boundary
(``reads``) and the question types; logging, credential redaction, work at exit, safe
file reading; the errors and the number checks settings share (``errors``). Nothing here
imports from another agentbranch layer.
"""

__all__: list[str] = []
