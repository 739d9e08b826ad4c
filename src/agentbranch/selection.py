"""Deprecated import path: ``agentbranch.selection`` moved to
``agentbranch.engine.selection`` (the engine the environment selects).

Removed in agentbranch 0.3. Every name is still found here, with a ``DeprecationWarning``;
import it from
``agentbranch.engine.selection``.
"""

from agentbranch.core.moved import forward, names

__getattr__ = forward("agentbranch.selection", "agentbranch.engine.selection")
__dir__ = names("agentbranch.engine.selection")


def engine_from_env(env=None, **engine_kwargs):  # type: ignore[no-untyped-def]
    """Deprecated: ``DecisionEngine.from_env(env, **kwargs)`` and its ``selection_reason``.

    The engine the environment selects and why, as the pair this function returned.
    """
    import warnings

    from agentbranch.engine.engine import DecisionEngine

    warnings.warn(
        "agentbranch.selection.engine_from_env is deprecated: use "
        "agentbranch.DecisionEngine.from_env(env, **kwargs) (the reason is its "
        ".selection_reason)",
        DeprecationWarning,
        stacklevel=2,
    )
    engine = DecisionEngine.from_env(env, **engine_kwargs)
    return engine, engine.selection_reason or ""
