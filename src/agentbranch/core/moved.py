"""Old import paths that still work: a module that moved leaves a forwarding module behind.

``forward("agentbranch.state", "agentbranch.core.state")`` is the ``__getattr__`` of the old
module: every name the new module has is found through it, with a ``DeprecationWarning``
that says where to import it from now. Nothing is copied, so the objects are the very same.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def forward(old: str, new: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` for ``old``, which moved to ``new``."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # __path__, __all__ probes by import machinery and tools
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(new), name)  # AttributeError if it is gone
        warnings.warn(
            f"{old} moved to {new}: import {name} from {new} ({old} will be removed in a "
            "future release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    return __getattr__


def names(new: str) -> Callable[[], list[str]]:
    """The module ``__dir__`` for a forwarding module: the names of ``new``."""
    return lambda: sorted(n for n in dir(importlib.import_module(new)) if not n.startswith("_"))
