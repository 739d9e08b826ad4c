"""transformers' own logging held quiet around the embedded reader's loading and
tracing: it prints to stderr (a model's config warnings, progress bars), and the library
is silent unless the application configures logging."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' own logging held at errors, and its progress bars off, for the
    block (they print to stderr; the library is silent), then as they were."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
