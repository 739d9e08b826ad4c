"""The vocabulary every layer shares (questions, decisions, errors, states, the reads that
cross the reader boundary) and the small plumbing every layer uses (logging, redaction,
work at exit, files). Nothing here imports from another agentbranch layer.
"""

__all__: list[str] = []
