"""One exception hierarchy for agentbranch.

Every message says what was wrong and how to fix it. Engine failures are errors, never
low-confidence answers, unless the caller explicitly chose fail-open/fail-closed.
"""

from __future__ import annotations

__all__ = [
    "AgentBranchError",
    "ConfigurationError",
    "FallbackError",
    "InvalidFileError",
    "InvalidQuestionError",
    "InvalidReadError",
    "InvalidStateError",
    "LabelTokenError",
    "ReaderError",
    "ReaderTimeoutError",
    "SpecialTokenError",
    "StateTooLongError",
]


class AgentBranchError(Exception):
    """Base class of every error agentbranch raises on purpose."""


class InvalidQuestionError(AgentBranchError, ValueError):
    """A question is malformed: empty, duplicate or too many options, bad id or type."""


class LabelTokenError(AgentBranchError, ValueError):
    """A label is not one distinct token at the reply position for this tokenizer."""


class InvalidStateError(AgentBranchError, ValueError):
    """The state cannot be rendered for the model."""


class StateTooLongError(InvalidStateError):
    """The rendered prompt plus the answer canvas exceeds the model's context."""


class SpecialTokenError(InvalidStateError):
    """User content (state or question text) contains the model's special tokens."""


class ReaderError(AgentBranchError, RuntimeError):
    """A reader failed: the model, the engine or the server returned no usable read."""


class InvalidReadError(ReaderError):
    """A reader answered, but not with a valid read: a NaN, infinite or positive
    log-probability, a probability outside [0, 1], or the wrong number of options or
    questions. The decision it answers is not made (``on_error`` applies to it)."""


class ReaderTimeoutError(ReaderError, TimeoutError):
    """A reader did not answer within the configured timeout."""


class ConfigurationError(AgentBranchError, ValueError):
    """The engine, reader or integration was configured inconsistently."""


class InvalidFileError(ConfigurationError):
    """A file agentbranch loads (a calibration) is missing, unreadable, of another
    format version, or malformed; the message names the file and, where it can, the line
    and field."""


class FallbackError(AgentBranchError, RuntimeError):
    """An uncertain decision could not be resolved: the fallback model's answer named no
    allowed option, a reviewer's answer was invalid, or every fallback failed."""
