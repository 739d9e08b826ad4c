"""``ToolSelectorMiddleware``: one engine read picks the tools a model call binds.

The same interface shape as LangChain's ``LLMToolSelectorMiddleware`` (``max_tools``,
``always_include``, instructions for the selector), with no generation: before each model
call the engine reads the latest user message against the available tools and the call
binds only the tools it selects (``mode="choice"`` or ``"yes_no"``: docs/langchain.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelResponse,
)
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import Question, any_of, choice
from agentbranch.integrations.observability import aemit_all, emit_all
from agentbranch.policy import (
    DecisionRecord,
    GotoNode,
    Policy,
    Resolver,
    Threshold,
    engine_record,
)
from agentbranch.policy.resolving import Call, Steps, run_async, run_sync

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_YES_NO_INSTRUCTIONS",
    "SET_ID",
    "Mode",
    "ToolSelectorMiddleware",
]

DEFAULT_INSTRUCTIONS = "Which tool is most relevant for answering the user's latest request?"
DEFAULT_YES_NO_INSTRUCTIONS = "Does answering the user's latest request need the tool `{name}`?"

Mode = Literal["choice", "yes_no"]

#: yes/no mode: the id of the ``AnyOf`` question over the tools (each tool's read is
#: ``"tools/<tool name>"``).
SET_ID = "tools"


class _SelectionState(AgentState):
    tool_selection: NotRequired[dict[str, Any]]


class ToolSelectorMiddleware(AgentMiddleware):
    """Bind only the tools one engine read selects.

    Args:
        engine: the ``DecisionEngine`` that reads.
        mode: ``"choice"`` (one choice over the tools) or ``"yes_no"`` (one yes/no per
            tool, in one read).
        instructions: the question (choice mode), or a template with ``{name}`` (yes/no
            mode).
        max_tools: at most this many selected tools (choice mode: default 1).
        min_probability: choice mode: a tool after the most probable one is bound only
            when the read gives it at least this probability (default 0.1).
        always_include: tool names always bound, never read about, not counted.
        min_confidence: the confidence floor (below).
        policy: yes/no mode: the ``Policy`` each tool's read is resolved by (default:
            ``Policy(take_at=min_confidence, fallbacks=[GotoNode("keep_tools")])``).
        on_error: ``"raise"`` (default) or ``"all"`` — an engine error binds every tool.
        include_state: also put the latest user message in emitted events.

    Choice mode (question id ``"tool"``) binds the most probable tool, and the next ones
    up to ``max_tools`` only when the read gives each ``min_probability``. Yes/no mode asks
    one ``AnyOf`` question (id ``"tools"``, a member ``"tools/<name>"`` per tool) resolved
    by ``policy``, and binds the tools answered ``yes`` (the most probable first when
    ``max_tools`` caps them). ``min_confidence`` is the floor: a choice read below it keeps
    every tool; in yes/no mode a tool whose read is not taken is kept unless the policy's
    fallback answered it. The selection and its records go to agent state under
    ``tool_selection`` and are emitted like every decision.
    """

    state_schema = _SelectionState

    def __init__(
        self,
        engine: Engine,
        *,
        mode: Mode = "choice",
        instructions: str | None = None,
        max_tools: int | None = None,
        min_probability: float = 0.1,
        always_include: Sequence[str] | None = None,
        min_confidence: float = 0.5,
        policy: Policy | None = None,
        on_error: Literal["raise", "all"] = "raise",
        include_state: bool = False,
    ) -> None:
        super().__init__()
        if mode not in ("choice", "yes_no"):
            raise ConfigurationError(f"mode must be 'choice' or 'yes_no', got {mode!r}")
        if max_tools is not None and max_tools < 1:
            raise ConfigurationError(f"max_tools must be >= 1, got {max_tools}")
        if not 0.0 <= min_probability <= 1.0:
            raise ConfigurationError(f"min_probability must be in [0, 1], got {min_probability}")
        if not 0.0 <= min_confidence <= 1.0:
            raise ConfigurationError(f"min_confidence must be in [0, 1], got {min_confidence}")
        if on_error not in ("raise", "all"):
            raise ConfigurationError(f"on_error must be 'raise' or 'all', got {on_error!r}")
        if policy is not None and (mode != "yes_no" or not isinstance(policy, Policy)):
            raise ConfigurationError(
                f"policy= is a Policy for yes_no mode's reads, got {policy!r} in {mode} mode"
            )
        if policy is not None and policy.can_review:
            raise ConfigurationError(
                "the selector's policy cannot have a review band (a model call cannot wait "
                "for a human); use fallbacks=[Generate(model)] or GotoNode('keep_tools')"
            )
        self.engine = engine
        self.mode: Mode = mode
        self.instructions = instructions or (
            DEFAULT_INSTRUCTIONS if mode == "choice" else DEFAULT_YES_NO_INSTRUCTIONS
        )
        if mode == "yes_no" and "{name}" not in self.instructions:
            raise ConfigurationError(
                "in yes_no mode, instructions is a template with {name}, e.g. "
                "'Does the request need the tool `{name}`?'"
            )
        self.max_tools = max_tools if max_tools is not None else (1 if mode == "choice" else None)
        self.min_probability = min_probability
        self.always_include = list(always_include or [])
        self.min_confidence = min_confidence
        self.policy = policy or Policy(
            take_at=min_confidence, fallbacks=[GotoNode("keep_tools")], on_error="raise"
        )
        self.on_error = on_error
        self.include_state = include_state

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return run_sync(self._wrap(request, handler))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await run_async(self._wrap(request, handler))

    def _wrap(self, request: Any, handler: Any) -> Steps[Any]:
        """The model call, run sync or async (``handler`` is the path's own): the engine's
        read, then the call with the tools it selected."""
        plan = self._plan(request)
        if plan is None:
            return (yield Call(handler, handler, request))
        candidates, questions, state = plan
        try:
            if self.mode == "yes_no":
                resolver = Resolver(self.engine, questions, self.policy, allow_review=False)
                decisions: Any = yield Call(resolver.resolve, resolver.aresolve, state)
            else:
                decide, adecide = self.engine.decide, self.engine.adecide
                decisions = yield Call(decide, adecide, state, questions, log_decisions=False)
        except Exception as e:
            if self.on_error == "raise":
                raise
            decisions = e
        selection = self._select(candidates, questions, decisions)
        records = selection["decisions"].values()
        yield Call(emit_all, aemit_all, records, state=state, include_state=self.include_state)
        response = yield Call(handler, handler, self._bind(request, selection))
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        if isinstance(response, ExtendedModelResponse):
            response = response.model_response
        update = Command(update={"tool_selection": selection})
        return ExtendedModelResponse(model_response=response, command=update)

    def _plan(self, request: Any) -> tuple[list[Any], dict[str, Question], Any] | None:
        """The tools to choose among, their questions, and what the engine reads; None
        when there is nothing to choose."""
        tools = [t for t in request.tools if not isinstance(t, dict)]
        names = {t.name for t in tools}
        missing = [n for n in self.always_include if n not in names]
        if missing:
            raise ConfigurationError(
                f"always_include names tools the agent does not have: {missing}; "
                f"available: {sorted(names)}"
            )
        candidates = [t for t in tools if t.name not in self.always_include]
        user = next((m for m in reversed(request.messages) if isinstance(m, HumanMessage)), None)
        if user is None or len(candidates) < (2 if self.mode == "choice" else 1):
            return None
        if self.mode == "choice":
            questions: dict[str, Question] = {
                "tool": choice(self.instructions, {t.name: t.description for t in candidates})
            }
        else:
            # Each member's "yes" is described by its tool; no "no" description: a
            # sentence embedder reads a negated description as the same topic, so the
            # reader uses its baseline instead (``AnyOf.member``).
            template = self.instructions.replace("{name}", "{option}")
            tools = {t.name: t.description or None for t in candidates}
            questions = {SET_ID: any_of(template, tools)}
        return candidates, questions, user

    def _select(
        self, candidates: list[Any], questions: dict[str, Question], decisions: Any
    ) -> dict[str, Any]:
        names = [t.name for t in candidates]
        if isinstance(decisions, Exception):
            return _selection(
                self.mode, names, True, {}, f"{type(decisions).__name__}: {decisions}"
            )
        if self.mode == "yes_no":
            return self._select_any(names, decisions[SET_ID])
        d = decisions["tool"]
        sure = d.confidence >= self.min_confidence
        floor = Threshold(self.min_confidence, "fixed")
        rec = engine_record(
            d, questions["tool"], band="take" if sure else "fallback", threshold=floor
        )
        records = {"tool": rec}
        if not sure:
            rec["fallback"] = {"kind": "keep_tools", "floor": self.min_confidence}
            return _selection(self.mode, names, True, records)
        probs = rec["probabilities"]
        ranked = sorted(names, key=lambda n: -probs[n])
        # The top tool, then only the ones the read supports (see the class docstring).
        chosen = ranked[:1] + [n for n in ranked[1:] if probs[n] >= self.min_probability]
        return _selection(self.mode, chosen[: self.max_tools], False, records)

    def _select_any(self, names: list[str], tools: DecisionRecord) -> dict[str, Any]:
        """yes/no mode: the tools whose read was answered yes, or was not answered (a
        fallback that routed elsewhere: ``keep_tools`` by default); per tool its record
        (``tools["members"]``, the ``AnyOf``'s)."""
        by_tool = {n: tools["members"][n] for n in names}
        kept = [n for n, r in by_tool.items() if r["label"] == "yes" or r.get("goto")]
        kept.sort(key=lambda n: -((by_tool[n].get("probabilities") or {}).get("yes") or 0.0))
        kept = kept[: self.max_tools]  # (None: no cap)
        return _selection(self.mode, kept, len(kept) == len(names), by_tool)

    def _bind(self, request: Any, selection: dict[str, Any]) -> Any:
        keep = set(selection["selected"]) | set(self.always_include)
        tools = [t for t in request.tools if isinstance(t, dict) or t.name in keep]
        return request.override(tools=tools)


def _selection(
    mode: str,
    selected: list[str],
    kept_all: bool,
    records: dict[str, DecisionRecord],
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "mode": mode,
        "selected": list(selected),
        "kept_all": kept_all,
        "decisions": records,
        "error": error,
    }
