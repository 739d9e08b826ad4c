"""What a router says about itself, for ``decide_first``: its name, its answers (a
``Literal[...]`` return type or the options given) and the question the engine is asked
(its docstring, or the text or question given)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args, get_origin, get_type_hints

from langchain_core.runnables import Runnable, RunnableLambda

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import Question, choice
from agentbranch.policy import Earned, options_of

__all__ = ["router_name", "router_question", "router_take_at"]


def router_name(router: Any) -> str:
    if isinstance(router, Runnable):
        return router.get_name()
    if not callable(router):
        raise ConfigurationError(
            f"decide_first needs a router: a function state -> label or a Runnable, got "
            f"{type(router).__name__}"
        )
    return getattr(router, "__name__", None) or type(router).__name__


def _literal_options(router: Any) -> list[str] | None:
    """The options of a router annotated ``-> Literal["a", "b", ...]``, else ``None``."""
    fn = router
    if isinstance(router, RunnableLambda):
        fn = router.func or router.afunc  # type: ignore[attr-defined]
    elif isinstance(router, Runnable):
        return None
    try:
        hint = get_type_hints(fn).get("return")
    except Exception:  # noqa: BLE001 - an unresolvable annotation gives no options
        return None
    if get_origin(hint) is not Literal:
        return None
    values = list(get_args(hint))
    if not all(isinstance(v, str) for v in values):
        raise ConfigurationError(
            f"the router's Literal return type holds {values}; decide_first needs text "
            "answers (node names or labels)"
        )
    return values


def router_question(
    router: Any,
    name: str,
    question: str | Question | None,
    options: Sequence[str] | Mapping[str, str | None] | None,
    examples: Mapping[str, Sequence[str]] | None,
) -> Question:
    typed = _literal_options(router)
    if question is not None and not isinstance(question, str):
        if options is not None or examples is not None:
            raise ConfigurationError(
                "decide_first: give options/examples in the question you built "
                "(choice(..., examples=...)) or as arguments, not both"
            )
        got = options_of(name, question)
        if typed is not None and sorted(got) != sorted(typed):
            raise ConfigurationError(
                f"decide_first: the question's options {got} are not the router's "
                f"Literal[...] answers {typed}; they must be the same"
            )
        return question
    if options is None:
        options = typed
    elif typed is not None and sorted(options) != sorted(typed):
        raise ConfigurationError(
            f"decide_first(options=...) names {list(options)} but the router returns "
            f"Literal{typed}; they must be the same answers"
        )
    if options is None:
        raise ConfigurationError(
            f"decide_first: router {name!r} says nothing of its answers; annotate it "
            "-> Literal['a', 'b', ...] or give options=['a', 'b', ...]"
        )
    text = question or _docstring(router)
    if not text:
        raise ConfigurationError(
            f"decide_first: what should the engine be asked for router {name!r}? Give "
            "question='Which team should handle this ticket?' (or a docstring)"
        )
    return choice(text, options, examples=examples)


def _docstring(router: Any) -> str | None:
    fn = router.func if isinstance(router, RunnableLambda) else router  # type: ignore[attr-defined]
    doc = inspect.getdoc(fn) if not isinstance(fn, Runnable) else None
    return doc.split("\n\n")[0].strip() if doc else None


def router_take_at(take_at: float | Earned | None, store: Any) -> float | Earned:
    if take_at is None:
        return Earned(store=store)
    if store is not None:
        raise ConfigurationError(
            "decide_first: give store=... or take_at=Earned(store=...), not both"
        )
    return take_at
