"""LangGraph integration: routers, decide nodes and Command nodes on typed decisions.

Three shapes, every label mapped and checked when the graph is built (docs/langgraph.md):
``route`` (a conditional edge that records nothing), ``decide_node`` (several questions
in one engine call, records under ``state["decisions"]``, read by ``RecordRouter``) and
``command_node`` (returns ``Command(goto=...)``). Each takes a ``policy``; review goes
through ``review_with_interrupt``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import ensure_config, get_callback_manager_for_config
from langgraph.config import get_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER, END
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from agentbranch.core.errors import AgentBranchError, ConfigurationError
from agentbranch.core.questions import Question, validate_questions
from agentbranch.integrations.observability import NO_HANDLERS, aemit_all, emit_all
from agentbranch.policy import (
    DecisionRecord,
    PolicyArg,
    Resolver,
    options_of,
    policy_for,
)
from agentbranch.policy.resolving import ANSWERED_BY_THE_GRAPH, Call, Steps, run_async, run_sync

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

DEFAULT_KEY = "decisions"

Renderer = Callable[[Any], Any]


def merge_records(
    left: dict[str, DecisionRecord] | None, right: dict[str, DecisionRecord] | None
) -> dict[str, DecisionRecord]:
    """State reducer for decision records: later records replace earlier ones per id."""
    return {**(left or {}), **(right or {})}


#: Annotate the records key of your state with this: ``decisions: DecisionRecords``.
DecisionRecords = Annotated[dict[str, dict[str, Any]], merge_records]


# -- helpers ----------------------------------------------------------------------------


def check_resumable(what: str, fix: str) -> None:
    """Refuse to interrupt a run that cannot be resumed (``what`` needs a human; ``fix``
    says how else to go on): without a checkpointer LangGraph returns ``__interrupt__``
    silently and the run would wait for an answer that can never arrive. Outside a graph
    run nothing is checked (``interrupt`` raises its own error there)."""
    try:
        config = get_config()
    except RuntimeError:
        return
    if config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER) is None:
        raise ConfigurationError(
            f"{what} needs a human review, but the graph has no checkpointer, so its "
            "interrupt could never be resumed. Compile it with one (e.g. "
            "checkpointer=InMemorySaver(); create_agent(..., checkpointer=...)) and invoke "
            f"with config={{'configurable': {{'thread_id': ...}}}}; {fix}"
        )


def review_with_interrupt(payload: dict[str, Any]) -> str:
    """Ask a human through LangGraph's ``interrupt``; the allowed responses are the
    question's option names (validated on resume). A graph without a checkpointer is a
    ``ConfigurationError`` (``check_resumable``)."""
    check_resumable(
        f"question {payload['question_id']!r}",
        "or leave humans out with a policy without review_below",
    )
    schema = Literal[tuple(payload["options"])]  # type: ignore[valid-type]
    return interrupt(payload, response_schema=schema)  # type: ignore[arg-type]


# The human's answer comes back through the checkpointer and Command(resume=...): a
# replay cassette does not record it (agentbranch.policy.resolving).
setattr(review_with_interrupt, ANSWERED_BY_THE_GRAPH, True)


def build_path_map(
    question_id: str, options: list[str], path_map: Mapping[str, str] | None
) -> dict[str, str]:
    """Validated option → node mapping (identity when ``path_map`` is None)."""
    if path_map is None:
        return {o: o for o in options}
    if not isinstance(path_map, Mapping):
        raise ConfigurationError(f"question {question_id!r}: path_map must map option -> node name")
    missing = [o for o in options if o not in path_map]
    extra = [k for k in path_map if k not in options]
    if missing or extra:
        raise ConfigurationError(
            f"question {question_id!r}: path_map must map every option to a node. "
            + (f"Missing options: {missing}. " if missing else "")
            + (f"Not options of this question: {extra}. " if extra else "")
            + f"Options are {options}; map an option to END to end the run there."
        )
    for label, node in path_map.items():
        if not isinstance(node, str) or not node:
            raise ConfigurationError(
                f"question {question_id!r}: option {label!r} maps to {node!r}, not a node name"
            )
    return dict(path_map)


def _targets(path_map: Mapping[str, str], extra: list[str]) -> dict[str, str]:
    return {node: node for node in [*path_map.values(), *extra]}


def _reader_input(state: Any, renderer: Renderer | None, state_key: str | None, key: str) -> Any:
    if renderer is not None:
        return renderer(state)
    if state_key is not None:
        if isinstance(state, Mapping):
            if state_key not in state:
                raise ConfigurationError(
                    f"state has no key {state_key!r} for the engine to read; keys: {sorted(state)}"
                )
            return state[state_key]
        return getattr(state, state_key)
    if isinstance(state, BaseModel):
        return state.model_dump(mode="json", exclude={key})
    if isinstance(state, Mapping):
        return {k: v for k, v in state.items() if k != key}
    return state


def _select(record: DecisionRecord, path_map: Mapping[str, str], question_id: str) -> str:
    goto = record.get("goto")
    if goto:
        return goto
    label = record.get("label")
    if label not in path_map:
        raise AgentBranchError(
            f"question {question_id!r}: label {label!r} has no branch (options: "
            f"{sorted(path_map)}); the record was changed or built for other options"
        )
    return path_map[label]


# -- routers ----------------------------------------------------------------------------


def _unheard(config: RunnableConfig) -> RunnableConfig:
    """``config`` marked as having no callback handler (a copy: the caller's stays as it
    is)."""
    return cast(RunnableConfig, {**config, NO_HANDLERS: True})


class _ResolvingRunnable(RunnableLambda):
    """What routers and nodes share: render what the engine reads, resolve the questions
    by the policy, and emit every record (the "agentbranch" logger, custom stream, callbacks)."""

    key: str  # the records' state key, left out of what the engine reads

    def __init__(
        self,
        resolver: Resolver,
        renderer: Renderer | None,
        state_key: str | None,
        include_state: bool,
        name: str,
    ) -> None:
        self.resolver = resolver
        self._renderer, self._state_key, self._include_state = renderer, state_key, include_state
        super().__init__(self._run, afunc=self._arun, name=name)

    def _run(self, state: Any, config: RunnableConfig) -> Any:
        return run_sync(self._steps(state, config))

    async def _arun(self, state: Any, config: RunnableConfig) -> Any:
        return await run_async(self._steps(state, config))

    def _steps(self, state: Any, config: RunnableConfig) -> Steps[Any]:
        """Read, resolve and emit, run sync or async; what the graph is given is
        ``_answer``'s."""
        seen = _reader_input(state, self._renderer, self._state_key, self.key)
        records = yield Call(self.resolver.resolve, self.resolver.aresolve, seen)
        emitted = {"config": config, "state": seen, "include_state": self._include_state}
        yield Call(emit_all, aemit_all, records.values(), **emitted)
        return self._answer(state, records)

    def _answer(self, state: Any, records: dict[str, DecisionRecord]) -> Any:
        raise NotImplementedError

    # ``RunnableLambda.invoke`` opens a callback run around every call (about a fifth of a
    # decide node's cost); with no callback handler nobody can see that run, so it is
    # skipped, and the records' emit is told so (``NO_HANDLERS``) rather than looking again.

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        config = ensure_config(config)
        if kwargs or get_callback_manager_for_config(config).handlers:
            return super().invoke(input, config, **kwargs)
        return self.func(input, _unheard(config))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        config = ensure_config(config)
        if kwargs or get_callback_manager_for_config(config).handlers:
            return await super().ainvoke(input, config, **kwargs)
        return await self.afunc(input, _unheard(config))


class DecisionRouter(_ResolvingRunnable):
    """A conditional edge that asks the engine one question and returns the node:
    ``graph.add_conditional_edges(source, router, router.path_map)``.

    ``path_map`` maps every option to a node name (or ``END``); without it the option
    names are the node names. A policy may add ``GotoNode``/``FailClosed`` targets; review
    is not possible in a router (use ``decide_node`` or ``command_node``). The engine reads
    ``renderer(state)``, else ``state[state_key]``, else the whole state minus records.
    ``router.path_map`` (the attribute) lists every node it may return, so LangGraph
    checks them when compiling.
    """

    key = DEFAULT_KEY  # left out of what the engine reads
    _asks_review = False  # a conditional edge cannot interrupt for a human
    _prefix = "route"

    def __init__(
        self,
        engine: Engine,
        question_id: str,
        question: Question,
        *,
        path_map: Mapping[str, str] | None = None,
        policy: PolicyArg = None,
        renderer: Renderer | None = None,
        state_key: str | None = None,
        include_state: bool = False,
        name: str | None = None,
    ) -> None:
        review = {"review": review_with_interrupt} if self._asks_review else {"allow_review": False}
        resolver = Resolver(engine, {question_id: question}, policy, **review)
        self.question_id = question_id
        options = options_of(question_id, resolver.questions[question_id])
        self.branches = build_path_map(question_id, options, path_map)
        self.path_map = _targets(self.branches, policy_for(policy, question_id).targets())
        name = name or f"{self._prefix}_{question_id}"
        super().__init__(resolver, renderer, state_key, include_state, name)

    def _answer(self, state: Any, records: dict[str, DecisionRecord]) -> Any:
        return _select(records[self.question_id], self.branches, self.question_id)


class RecordRouter(RunnableLambda):
    """A conditional edge that branches on a recorded decision (no engine call)."""

    def __init__(
        self,
        question_id: str,
        branches: dict[str, str],
        extra_targets: list[str],
        *,
        key: str = DEFAULT_KEY,
    ) -> None:
        self.question_id = question_id
        self.key = key
        self.branches = branches
        self.path_map = _targets(branches, extra_targets)
        super().__init__(self._route, name=f"route_on_{question_id}")

    def _route(self, state: Any) -> str:
        records = state.get(self.key) if isinstance(state, Mapping) else getattr(state, self.key)
        record = (records or {}).get(self.question_id)
        if record is None:
            raise AgentBranchError(
                f"no decision record for {self.question_id!r} under state[{self.key!r}]; "
                "the decide node must run before this edge (and the key needs the "
                "DecisionRecords reducer when several nodes write it)"
            )
        return _select(record, self.branches, self.question_id)


# -- decide nodes -----------------------------------------------------------------------


class DecideNode(_ResolvingRunnable):
    """A node that answers several questions in ONE engine call and writes
    ``{key: {question_id: record}}`` (plus, with ``write_labels``, each label under its
    question id or the given state key). ``output(state, records)`` replaces that update
    (e.g. to append to a list in a fan-out). ``policy`` is one ``Policy`` or a mapping
    question id → ``Policy`` (``"*"`` = default). ``node.router(question_id, path_map)``
    is the conditional edge that branches on the record."""

    def __init__(
        self,
        engine: Engine,
        questions: Mapping[str, Question],
        *,
        policy: PolicyArg = None,
        key: str = DEFAULT_KEY,
        write_labels: bool | Mapping[str, str] = False,
        output: Callable[[Any, dict[str, DecisionRecord]], dict[str, Any]] | None = None,
        renderer: Renderer | None = None,
        state_key: str | None = None,
        include_state: bool = False,
        name: str | None = None,
    ) -> None:
        self.questions = validate_questions(questions)
        self.policy = policy
        self.key = key
        resolver = Resolver(engine, self.questions, policy, review=review_with_interrupt)
        every = {question_id: question_id for question_id in self.questions}
        self.label_keys = every if write_labels is True else dict(write_labels or {})
        unknown = sorted(set(self.label_keys) - set(self.questions))
        if unknown:
            raise ConfigurationError(f"write_labels names unknown question ids {unknown}")
        self._output = output
        super().__init__(resolver, renderer, state_key, include_state, name or "decide")

    def router(self, question_id: str, path_map: Mapping[str, str] | None = None) -> RecordRouter:
        """The conditional edge branching on this node's record of ``question_id``."""
        if question_id not in self.questions:
            raise ConfigurationError(
                f"this node does not ask {question_id!r}; it asks {sorted(self.questions)}"
            )
        options = options_of(question_id, self.questions[question_id])
        branches = build_path_map(question_id, options, path_map)
        return RecordRouter(
            question_id,
            branches,
            policy_for(self.policy, question_id).targets(),
            key=self.key,
        )

    def _answer(self, state: Any, records: dict[str, DecisionRecord]) -> dict[str, Any]:
        if self._output is not None:
            return self._output(state, records)
        update: dict[str, Any] = {self.key: records}
        for question_id, state_key in self.label_keys.items():
            update[state_key] = records[question_id]["label"]
        return update


# -- Command nodes ----------------------------------------------------------------------


class CommandNode(DecisionRouter):
    """A node that decides one question and returns
    ``Command(goto=<node>, update={key: {question_id: record}})``, with the label under
    ``write_label`` too if given. Add it with
    ``graph.add_node(name, node, destinations=node.destinations)``. ``options`` are
    ``route``'s: ``path_map``, ``policy``, ``renderer``, ``state_key``, ``include_state``
    and ``name``; unlike a router, a Command node may ask a human for review."""

    _asks_review = True
    _prefix = "decide"

    def __init__(
        self,
        engine: Engine,
        question_id: str,
        question: Question,
        *,
        key: str = DEFAULT_KEY,
        write_label: str | None = None,
        **options: Any,
    ) -> None:
        self.key = key
        self.write_label = write_label
        super().__init__(engine, question_id, question, **options)
        #: pass to ``add_node(..., destinations=node.destinations)`` for graph drawing
        self.destinations = tuple(self.path_map)

    def _answer(self, state: Any, records: dict[str, DecisionRecord]) -> Command:
        record = records[self.question_id]
        update: dict[str, Any] = {self.key: {self.question_id: record}}
        if self.write_label:
            update[self.write_label] = record["label"]
        return Command(goto=_select(record, self.branches, self.question_id), update=update)


# The builders read as verbs in graph code: ``route(engine, "urgent", question, ...)``.
route = DecisionRouter
decide_node = DecideNode
command_node = CommandNode

__all__ = [
    "END",
    "CommandNode",
    "DecideNode",
    "DecisionRecords",
    "DecisionRouter",
    "RecordRouter",
    "build_path_map",
    "command_node",
    "decide_node",
    "merge_records",
    "review_with_interrupt",
    "route",
]
