"""``decide_first``: the engine in front of a router a graph already has (docs/langgraph.md,
"In front of your existing router"), and what it reports (``ShadowReport``).

The router stays the teacher: the engine reads the state first and, when it is not sure,
the router answers through the policy's own ``Generate`` fallback (a teacher label like
any other); taken decisions are checked against it at ``audit_rate``. In shadow mode the
router always decides and the engine is only counted; live, what the engine is sure of
is taken without calling the router. Both keep the same evidence store.

Over 500 lines: one feature, whose parts (what a router says about itself, the router
as a teacher, the node, the report) only it uses.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin, get_type_hints

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.errors import (
    AgentBranchError,
    ConfigurationError,
    InvalidStateError,
    ReaderError,
)
from agentbranch.core.questions import Question, choice
from agentbranch.core.state import render_state
from agentbranch.core.teacher_calls import TeacherCall, teacher_calls_of
from agentbranch.integrations.langgraph import DEFAULT_KEY, _reader_input
from agentbranch.integrations.observability import aemit_all, emit_all
from agentbranch.policy import (
    DecisionRecord,
    Earned,
    Generate,
    Policy,
    Resolver,
    options_of,
    parse_label,
)
from agentbranch.policy.generation import aask, ask, generation_messages
from agentbranch.policy.resolving import Call, Steps, offload, run_async, run_sync
from agentbranch.policy.trust import TeacherLabel

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["DecideFirst", "Mode", "RouterTeacher", "ShadowReport", "decide_first"]

# -- the report: what the engine did in front of the router -----------------------------

Mode = Literal["shadow", "live"]


@dataclass
class ShadowReport:
    """What the engine did in front of the router (``DecideFirst.report()``; ``print`` it).

    ``taken``: decisions the engine was sure of (shadow: would have taken); ``compared``
    / ``agreed``: decisions both answered, and those they answered alike (``taken_*``:
    among the taken ones); ``calls_saved``: router calls not made (shadow: that live
    mode would not make); ``take_at`` / ``trust``: the threshold at the last decision."""

    question_id: str
    mode: Mode
    decisions: int = 0
    taken: int = 0
    compared: int = 0
    agreed: int = 0
    taken_compared: int = 0
    taken_agreed: int = 0
    router_calls: int = 0
    engine_errors: int = 0
    audit_rate: float = 0.0
    price_per_call: float | None = None
    take_at: float | None = None
    trust: str | None = None

    @property
    def calls_saved(self) -> float:
        if self.mode == "live":
            return float(self.decisions - self.router_calls)
        return self.taken * (1.0 - self.audit_rate)

    @property
    def money_saved(self) -> float | None:
        if self.price_per_call is None:
            return None
        return self.calls_saved * self.price_per_call

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.compared if self.compared else None

    @property
    def take_agreement(self) -> float | None:
        return self.taken_agreed / self.taken_compared if self.taken_compared else None

    def as_dict(self) -> dict[str, Any]:
        derived = ("calls_saved", "money_saved", "agreement", "take_agreement")
        return {**dataclasses.asdict(self), **{k: getattr(self, k) for k in derived}}

    def __str__(self) -> str:
        def share(n: int, d: int) -> str:
            return f"{n}/{d} ({n / d:.0%})" if d else f"{n}/0"

        would = "would have taken" if self.mode == "shadow" else "taken"
        lines = [
            f"{self.question_id} ({self.mode}): {self.decisions} decisions",
            f"  engine agreed with the router: {share(self.agreed, self.compared)}",
            f"  {would} without the router: {share(self.taken, self.decisions)}, "
            f"right on {share(self.taken_agreed, self.taken_compared)} checked",
            f"  router calls made: {self.router_calls}",
        ]
        if self.decisions:
            at = "nothing taken yet" if self.take_at is None else f"take_at {self.take_at:.2f}"
            lines.insert(1, f"  threshold in force now: {at} ({self.trust})")
        if self.mode == "shadow":
            saved = f"  router calls live mode would save: {self.calls_saved:.4g}"
            if self.audit_rate:
                saved += f" (it would still audit {self.audit_rate:.0%} of the takes)"
        else:
            saved = f"  router calls saved: {self.calls_saved:.4g}"
        if self.money_saved is not None:
            saved += f", {self.money_saved:.4g} at {self.price_per_call:g} a call"
        lines.append(saved)
        if self.engine_errors:
            lines.append(f"  engine errors (the router decided): {self.engine_errors}")
        return "\n".join(lines)


# -- what a router says about itself: its name, its answers, the question asked ----------


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
    text = question
    if not text:  # the first paragraph of the router's docstring
        fn = router.func if isinstance(router, RunnableLambda) else router  # type: ignore[attr-defined]
        doc = inspect.getdoc(fn) if not isinstance(fn, Runnable) else None
        text = doc.split("\n\n")[0].strip() if doc else None
    if not text:
        raise ConfigurationError(
            f"decide_first: what should the engine be asked for router {name!r}? Give "
            "question='Which team should handle this ticket?' (or a docstring)"
        )
    return choice(text, options, examples=examples)


# -- the engine in front of the router ---------------------------------------------------

log = logging.getLogger("agentbranch")

#: The graph state the router is being asked about: the ``Generate`` fallback hands the
#: router teacher its prompt, but the router wants the state (contexts are copied onto
#: the thread or task a fallback call runs on).
_ASKED: contextvars.ContextVar[_Asked | None] = contextvars.ContextVar(
    "agentbranch_router_state", default=None
)


@dataclass
class _Asked:
    state: Any
    error: BaseException | None = None  # what the router itself raised, if it did


class RouterTeacher(RunnableLambda):
    """The router as a teacher: invoked with a teacher's prompt (the policy's
    ``Generate`` fallback, an audit), it calls the router on the graph state being
    decided and returns the router's label. Named after the router, which is its
    identity on a replay cassette (``RouterTeacher route_ticket``)."""

    def __init__(self, router: Any, options: Sequence[str], name: str) -> None:
        self.router = router
        self.options = list(options)
        super().__init__(self._ask, afunc=self._aask, name=name)

    def _ask(self, messages: Any) -> str:
        return run_sync(self._answer())

    async def _aask(self, messages: Any) -> str:
        return await run_async(self._answer())

    def _answer(self) -> Steps[str]:
        """The router's label for the graph state being decided, sync or async."""
        asked = _ASKED.get()
        if asked is None:
            raise AgentBranchError(
                f"the router teacher {self.name!r} was called outside its decide_first "
                "wrapper, so there is no graph state to give the router; it answers only "
                "for the decisions the wrapper makes"
            )

        def on_sync_run(state: Any) -> Any:
            raise ConfigurationError(
                f"router {self.name!r} is async; run the graph with ainvoke/astream "
                "(an async router cannot answer a sync run)"
            )

        try:
            if isinstance(self.router, Runnable):
                got = yield Call(self.router.invoke, self.router.ainvoke, asked.state)
            elif inspect.iscoroutinefunction(self.router):
                got = yield Call(on_sync_run, self.router, asked.state)
            else:  # a sync router on an async run: off the event loop, as LangGraph does
                got = yield offload(self.router, asked.state)
            if not isinstance(got, str) or got not in self.options:
                raise AgentBranchError(
                    f"router {self.name!r} returned {got!r}, which is not one of its options "
                    f"{self.options}; add it to the router's Literal[...] return type (or to "
                    "decide_first(options=...)), or make the router return one of them"
                )
            return got
        except BaseException as e:
            asked.error = e
            raise


@dataclass(frozen=True)
class _RouterPolicy(Policy):
    """The wrapper's policy: its takes are audited by the wrapper itself (``audit_rate``,
    which warns when that is 0), not by an ``Audit``."""

    def _unaudited(self) -> bool:
        return False


class DecideFirst(RunnableLambda):
    """An existing router with the engine in front of it (built by ``decide_first``,
    which documents the arguments).

    Use it where the router was: ``graph.add_conditional_edges(source, wrapped)``
    (the router's ``Literal`` return type is kept, so LangGraph still sees every branch)
    or call ``wrapped.invoke(state)``/``await wrapped.ainvoke(state)``. It returns the
    router's kind of answer: one of the options. ``report()`` says what the engine did.
    """

    def __init__(
        self,
        router: Any,
        *,
        engine: Engine,
        question: str | Question | None = None,
        options: Sequence[str] | Mapping[str, str | None] | None = None,
        examples: Mapping[str, Sequence[str]] | None = None,
        mode: Mode = "shadow",
        take_at: float | Earned | None = None,
        store: Any = None,
        audit_rate: float = 0.05,
        price_per_call: float | None = None,
        timeout_s: float | None = None,
        question_id: str | None = None,
        renderer: Callable[[Any], Any] | None = None,
        state_key: str | None = None,
        include_state: bool = False,
        seed: int | None = None,
    ) -> None:
        if mode not in ("shadow", "live"):
            raise ConfigurationError(f"decide_first(mode=...) is 'shadow' or 'live', got {mode!r}")
        ok = isinstance(audit_rate, int | float) and not isinstance(audit_rate, bool)
        if not ok or not 0.0 <= audit_rate <= 1.0:
            raise ConfigurationError(
                f"decide_first(audit_rate=...) must be a share in [0, 1], got {audit_rate!r}"
            )
        if price_per_call is not None and not (
            isinstance(price_per_call, int | float) and price_per_call >= 0
        ):
            raise ConfigurationError(
                f"decide_first(price_per_call=...) must be a number >= 0, got {price_per_call!r}"
            )
        if isinstance(router, Runnable):
            name = router.get_name()
        elif callable(router):
            name = getattr(router, "__name__", None) or type(router).__name__
        else:
            raise ConfigurationError(
                f"decide_first needs a router: a function state -> label or a Runnable, got "
                f"{type(router).__name__}"
            )
        if take_at is None:
            take_at = Earned(store=store)
        elif store is not None:
            raise ConfigurationError(
                "decide_first: give store=... or take_at=Earned(store=...), not both"
            )
        self.question_id = question_id or name
        self.question = router_question(router, name, question, options, examples)
        self.options = options_of(self.question_id, self.question)
        self.mode: Mode = mode
        self.audit_rate = float(audit_rate)
        self.teacher = RouterTeacher(router, self.options, name)
        self.policy = _RouterPolicy(
            take_at=take_at,
            fallbacks=[Generate(self.teacher, timeout_s=timeout_s)],
        )
        if self.policy.earned is not None and self.audit_rate == 0.0:
            log.warning(
                "decide_first(audit_rate=0): what the engine takes live is never checked "
                "against the router, so drift cannot withdraw its threshold; give "
                "audit_rate=0.05 to watch the take band"
            )
        self.engine = engine
        self.resolver = Resolver(engine, {self.question_id: self.question}, self.policy)
        self._renderer, self._state_key, self._include_state = renderer, state_key, include_state
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._report = ShadowReport(
            self.question_id, mode, audit_rate=self.audit_rate, price_per_call=price_per_call
        )

        def decide(state: Any, config: RunnableConfig) -> Any:
            return run_sync(self._steps(state, config))

        async def adecide(state: Any, config: RunnableConfig) -> Any:
            return await run_async(self._steps(state, config))

        # LangGraph reads the branches from the function's return type: the router's own.
        for fn in (decide, adecide):
            fn.__annotations__["return"] = Literal[tuple(self.options)]  # type: ignore[valid-type]
        super().__init__(decide, afunc=adecide, name=name)

    # -- reporting ---------------------------------------------------------------------

    def report(self) -> ShadowReport:
        """A copy of the counts so far (``print(wrapped.report())``)."""
        with self._lock:
            return dataclasses.replace(self._report)

    # -- deciding ----------------------------------------------------------------------

    def _steps(self, state: Any, config: RunnableConfig) -> Steps[str]:
        """One decision, run sync or async (``agentbranch.policy.resolving``'s steps)."""
        seen = _reader_input(state, self._renderer, self._state_key, DEFAULT_KEY)
        asked = _Asked(state)
        token = _ASKED.set(asked)
        try:
            try:
                got = yield Call(self.resolver.resolve, self.resolver.aresolve, seen)
            except (ReaderError, InvalidStateError) as e:
                if asked.error is e:
                    raise  # the router's own error, as without the wrapper
                # The reader failed, or cannot read the state (too long, special tokens):
                # the router decides, as it did before the wrapper. Anything else (a replay
                # miss, a bad question) is raised: a replay must not call the router.
                label = yield Call(self.teacher.invoke, self.teacher.ainvoke, None)
                log.warning(
                    "agentbranch: question %r: the engine failed (%s: %s); the router decided",
                    self.question_id,
                    type(e).__name__,
                    e,
                )
                with self._lock:
                    self._report.decisions += 1
                    self._report.router_calls += 1
                    self._report.engine_errors += 1
                return label
            record = got[self.question_id]
            audited = None
            if record["decided_by"] == "engine":
                audited = yield from self._audit(record, render_state(seen))
            routed, record = self._done(record, audited)
        finally:
            _ASKED.reset(token)
        emitted = {"config": config, "state": seen, "include_state": self._include_state}
        yield Call(emit_all, aemit_all, [record], **emitted)
        return routed

    def _audit(self, record: DecisionRecord, text: str) -> Steps[str | None]:
        """The router's answer to a decision the engine took, when it answers one: always
        in shadow mode, at ``audit_rate`` live (a replay audits what its recording
        audited)."""
        messages = generation_messages(
            Generate(self.teacher), self.question_id, self.question, text
        )
        call = TeacherCall("audit", self.question_id, self.teacher, messages)
        if self.mode != "shadow":

            def draw() -> bool:
                return self._random.random() < self.audit_rate

            calls = teacher_calls_of(self.engine)
            if not (calls.audited(call, text, draw) if calls is not None else draw()):
                return None
        started = time.perf_counter()
        reply = yield Call(
            lambda: ask(self.engine, call, lambda teacher: teacher.invoke(call.input)),
            lambda: aask(self.engine, call, lambda teacher: teacher.ainvoke(call.input)),
        )
        # Stored as evidence: an audit at the rate it was drawn with (every take in shadow).
        telemetry.teacher_call(self.question_id, "audit", time.perf_counter() - started, None)
        label = parse_label(reply, self.options, source=f"router {self.teacher.name!r}")
        earned = self.policy.earned
        if earned is not None:
            rate = 1.0 if self.mode == "shadow" else self.audit_rate
            taught = TeacherLabel(label, "audit", rate, state=text, audit_rate=rate)
            earned.observe_label(self.question_id, self.question, record, taught)
        return label

    def _done(self, record: DecisionRecord, audited: str | None) -> tuple[str, DecisionRecord]:
        """What the graph is given (the router's answer in shadow mode, whenever it was
        asked) and the record emitted, with the counts updated."""
        took = record["decided_by"] == "engine"
        engine_label = record.get("engine_label")
        router_label = audited if took else record["label"]
        shadowed = self.mode == "shadow" and router_label is not None
        routed = router_label if shadowed else record["label"]
        out = {**record, "mode": self.mode, "router_label": router_label, "label": routed}
        with self._lock:
            r = self._report
            r.decisions += 1
            r.take_at, r.trust = record.get("take_at"), record.get("trust")
            r.taken += took
            r.router_calls += router_label is not None
            if router_label is not None and engine_label is not None:
                agree = router_label == engine_label
                r.compared += 1
                r.agreed += agree
                if took:
                    r.taken_compared += 1
                    r.taken_agreed += agree
        return routed, out


def decide_first(router: Any = None, **options: Any) -> Any:
    """Put the engine in front of ``router`` (a ``DecideFirst``); without ``router``, a
    decorator: ``@decide_first(engine=engine, store="evidence.jsonl")``. ``options`` are
    the keyword arguments of ``DecideFirst``:

    Args:
        router: a function ``state -> label`` (sync or async) or a Runnable (an LLM
            classifier chain). It is the teacher: it answers what the engine is unsure of.
        engine: the ``DecisionEngine`` that reads first.
        question: what the engine is asked: text (the router's docstring by default) or
            a question built with ``choice(...)`` (described options, examples).
        options: the router's answers, when its return type is not ``Literal[...]``: a
            list, or a mapping answer -> description (the engine reads descriptions).
        examples: example states per answer (as ``choice(..., examples=...)``).
        mode: ``"shadow"`` (default: the router always decides; the engine is counted
            and its answers stored as evidence) or ``"live"`` (the engine decides what it
            is sure of).
        take_at: ``Earned(...)`` (default: ``Earned(store=store)``, a threshold earned
            from the router's answers) or a fixed confidence.
        store: where the router's answers are kept as evidence (a JSON Lines path, a
            LangGraph store); keep it across restarts and from shadow to live.
        audit_rate: the share of the engine's takes the router still answers in live
            mode (what watches the take band); shadow mode asks it every time.
        price_per_call: what a router call costs, for ``report().money_saved``.
        timeout_s: how long one router call may take (``Generate(timeout_s=...)``: past
            it the call counts as failed); ``None`` (default): as long as it takes, on the
            caller's thread, as without the wrapper.
        question_id: the question's id (default: the router's name).
        renderer / state_key: what the engine reads of the state (default: all of it).
    """
    if router is None:
        return lambda fn: DecideFirst(fn, **options)
    return DecideFirst(router, **options)
