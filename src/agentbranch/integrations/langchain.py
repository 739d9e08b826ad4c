"""LangChain integration: ``AgentBranchDecisionModel``, a ``langchain_core.decisions``
``BaseDecisionModel`` over the engine (``batch`` is ONE ``decide_many`` read), and
``decision_tool``, a ``StructuredTool`` whose model reads a short summary while the
``ToolMessage.artifact`` holds every decision record (docs/langchain.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, get_type_hints

from langchain_core.decisions import BaseDecisionModel, ClassifierResponse, ScoreAnswer
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_config_list
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentbranch.core.errors import AgentBranchError, InvalidQuestionError
from agentbranch.core.questions import Question, validate_questions
from agentbranch.core.state import render_state
from agentbranch.integrations.observability import aemit_all, emit_all
from agentbranch.policy import DecisionRecord, PolicyArg, Resolver
from agentbranch.policy.resolving import Call, Steps, run_async, run_sync

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine


class AgentBranchDecisionModel(BaseDecisionModel):
    """A ``BaseDecisionModel`` answered by an agentbranch ``DecisionEngine``.

    ``model`` defaults to the engine reader's model id. Confidence in the answers is
    agentbranch's (``1 − H/ln K``); use the engine directly for entropy and label mass.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any = Field(exclude=True)  # an Engine (pydantic cannot check a Protocol)
    model: str = ""

    @model_validator(mode="after")
    def _default_model(self) -> AgentBranchDecisionModel:
        if not self.model:
            self.model = str(getattr(self.engine.reader, "model", "agentbranch"))
        return self

    @property
    def _provider(self) -> str:
        return "agentbranch"

    def _classify(self, state: Any, questions: dict[str, Any]) -> ClassifierResponse:
        qs = validate_questions(questions)
        return _response(self.engine.decide(state, qs), qs)

    async def _aclassify(self, state: Any, questions: dict[str, Any]) -> ClassifierResponse:
        qs = validate_questions(questions)
        return _response(await self.engine.adecide(state, qs), qs)

    # -- batches: one decide_many read for every input -------------------------------

    def batch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[ClassifierResponse]:
        """Classify every input in ONE engine read (``decide_many``); each input still
        gets its own traced run. An input with bad questions or state fails alone."""
        return self._batch_with_config(
            lambda inputs: run_sync(self._classify_many(inputs)),
            list(inputs),
            [self._traced_config(c) for c in get_config_list(config, len(inputs))],
            return_exceptions=return_exceptions,
            run_type="llm",
        )

    async def abatch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[ClassifierResponse]:
        """Async ``batch``: ONE ``adecide_many`` read."""
        return await self._abatch_with_config(
            lambda inputs: run_async(self._classify_many(inputs)),
            list(inputs),
            [self._traced_config(c) for c in get_config_list(config, len(inputs))],
            return_exceptions=return_exceptions,
            run_type="llm",
        )

    def _classify_many(self, inputs: list[Any]) -> Steps[list[ClassifierResponse | Exception]]:
        """Each input's response or error, from one read of the good ones (sync or async)."""
        out, ok = _checked(inputs)
        if ok:
            states, questions = [s for _, s, _ in ok], [q for _, _, q in ok]
            many = yield Call(self.engine.decide_many, self.engine.adecide_many, states, questions)
            for (i, _, qs), decisions in zip(ok, many, strict=True):
                out[i] = _response(decisions, qs)
        return out


def _checked(
    inputs: list[Any],
) -> tuple[list[Any], list[tuple[int, Any, dict[str, Question]]]]:
    """Each input's error (bad request, questions or state) or its place in the batch."""
    out: list[Any] = [None] * len(inputs)
    ok = []
    for i, request in enumerate(inputs):
        try:
            if not isinstance(request, Mapping) or "questions" not in request:
                raise InvalidQuestionError(
                    "a decision model input is {'state': ..., 'questions': {id: question}}"
                )
            qs = validate_questions(request["questions"])
            render_state(request.get("state"))
        except AgentBranchError as e:
            out[i] = e
            continue
        ok.append((i, request.get("state"), qs))
    return out, ok


def _response(decisions: Any, questions: Mapping[str, Question]) -> ClassifierResponse:
    """The ``ClassifierResponse``, with each score's legend the question's original levels
    (JSON values as given, not the text the model read)."""
    response: ClassifierResponse = decisions.to_langchain()
    for question_id, answer in response.answers.items():
        q = questions.get(question_id)
        if isinstance(answer, ScoreAnswer) and q is not None and q.type == "score":
            answer.legend = dict(enumerate(q.criteria))
    return response


class _DecisionInput(BaseModel):
    text: str = Field(description="The text (request, ticket, tool call) to decide about.")


def summarize(records: Mapping[str, DecisionRecord]) -> str:
    """``id=label (confidence 0.91, decided_by)`` per decision, for a model to read."""
    parts = []
    for question_id, rec in records.items():
        conf = rec.get("confidence")
        conf_s = f"confidence {conf:.2f}" if isinstance(conf, float) else "no confidence"
        by = rec.get("decided_by")
        extra = f", {by}" if by and by != "engine" else ""
        target = f" -> {rec['goto']}" if rec.get("goto") else ""
        parts.append(f"{question_id}={rec.get('label')}{target} ({conf_s}{extra})")
    return "; ".join(parts)


def decision_tool(
    engine: Engine,
    questions: Mapping[str, Question],
    *,
    name: str = "decide",
    description: str | None = None,
    policy: PolicyArg = None,
    include_state: bool = False,
) -> StructuredTool:
    """A tool that answers ``questions`` about the ``text`` it is called with.

    Returns ``(summary, {question_id: record})`` (``content_and_artifact``). ``policy``
    may use take/fallback bands with ``Generate``/``MoreDraws`` fallbacks and
    ``FailOpen``; a review band calls LangGraph's ``interrupt`` (run the agent in a graph
    with a checkpointer, e.g. through ``ToolNode``).
    """
    from agentbranch.integrations.langgraph import review_with_interrupt

    resolver = Resolver(engine, questions, policy, review=review_with_interrupt, allow_goto=False)
    if description is None:
        description = "Decide, with measured confidence: " + "; ".join(
            f"{question_id}: {q.instructions}" for question_id, q in resolver.questions.items()
        )

    def _run(text: str, config: RunnableConfig) -> tuple[str, dict[str, DecisionRecord]]:
        records = resolver.resolve(text)
        emit_all(records.values(), config=config, state=text, include_state=include_state)
        return summarize(records), records

    async def _arun(text: str, config: RunnableConfig) -> tuple[str, dict[str, DecisionRecord]]:
        records = await resolver.aresolve(text)
        await aemit_all(records.values(), config=config, state=text, include_state=include_state)
        return summarize(records), records

    # LangChain reads the function's type hints on every call (to find its config
    # parameter); resolved once here, they are not compiled from strings every time.
    for fn in (_run, _arun):
        fn.__annotations__ = get_type_hints(fn, include_extras=True)
    return StructuredTool.from_function(
        func=_run,
        coroutine=_arun,
        name=name,
        description=description,
        args_schema=_DecisionInput,
        response_format="content_and_artifact",
    )


__all__ = ["AgentBranchDecisionModel", "decision_tool", "summarize"]

# The agent middleware, re-exported here, loads on first use: it needs the ``langchain``
# package; the decision model and the tool need only langchain-core.
_MIDDLEWARE = ("ToolGateMiddleware", "ToolSelectorMiddleware")
__all__ += list(_MIDDLEWARE)


def __getattr__(name: str) -> Any:
    if name in _MIDDLEWARE:
        import agentbranch.integrations.middleware

        return getattr(agentbranch.integrations.middleware, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
