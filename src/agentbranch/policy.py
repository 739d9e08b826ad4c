"""Confidence policy: put each decision in a band and resolve it.

A ``Policy`` holds the thresholds for one decision (or a default for all):

* **take**: ``confidence >= take_at`` and ``label_mass >= min_label_mass`` — the engine's
  label is taken (``decided_by="engine"``);
* **review**: ``confidence < review_below`` — a human answers (LangGraph ``interrupt``),
  ``decided_by="human"``;
* **fallback**: everything in between (and a take-worthy confidence on too little label
  mass) — the ``fallbacks`` run in order until one resolves the decision:
  ``MoreDraws`` (re-read with more noise draws; taken if it now clears ``take_at``),
  ``Generate`` (a LangChain chat model answers the same question over the same options,
  validated; ``decided_by="fallback"``) and ``GotoNode`` (route to a named node,
  ``decided_by="fallback_node"``).

Engine errors are errors unless the policy says otherwise, explicitly:
``on_error=FailOpen("no")`` takes a named default option (``decided_by="fail_open"``),
``on_error=FailClosed("safe_node")`` routes to a named safe node
(``decided_by="fail_closed"``).

Every resolved decision is a plain dict (``DecisionRecord``), safe to keep in graph state
and checkpoints. This module knows nothing of LangGraph: review is a callback the
integration supplies.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentbranch import logs
from agentbranch.decisions import Decision, Decisions
from agentbranch.errors import ConfigurationError, FallbackError, ReaderError
from agentbranch.questions import Question, to_spec, validate_questions

log = logging.getLogger("agentbranch")

Band = Literal["take", "fallback", "review", "error"]
DecidedBy = Literal["engine", "fallback", "fallback_node", "human", "fail_open", "fail_closed"]
DecisionRecord = dict[str, Any]

#: ``review(payload) -> label``: called for decisions in the review band.
ReviewFn = Callable[[dict[str, Any]], str]


# -- fallbacks ------------------------------------------------------------------------


@dataclass(frozen=True)
class MoreDraws:
    """More engine effort: re-read with ``draws`` noise draws (averaged). The new read is
    taken when it clears the policy's take threshold; otherwise the next fallback runs.

    With ``engine``, the re-read goes through that engine instead — e.g. more denoising
    steps on the same vLLM instance:
    ``MoreDraws(draws=1, engine=DecisionEngine(vllm_reader.variant(max_steps=4)))``.
    """

    draws: int = 8
    engine: Any = None

    def __post_init__(self) -> None:
        if self.draws < (1 if self.engine is not None else 2):
            raise ConfigurationError(
                "MoreDraws(draws=...) needs at least 2 draws (or another engine=...)"
            )


@dataclass(frozen=True)
class Generate:
    """Generation fallback: ``model`` (a LangChain chat model) answers the same question
    over the same options. Its reply must name exactly one option, as JSON
    (``{"label": "<option>"}``) or as the bare option name; anything else is rejected
    (``FallbackError``, or the next fallback runs). ``instructions`` is an optional system
    prompt prepended to the request."""

    model: Any
    instructions: str | None = None


@dataclass(frozen=True)
class GotoNode:
    """Route to the named graph node instead of branching on an uncertain label."""

    node: str


Fallback = MoreDraws | Generate | GotoNode


@dataclass(frozen=True)
class FailOpen:
    """On an engine error (``ReaderError`` by default), take the option ``label``."""

    label: str
    errors: tuple[type[BaseException], ...] = (ReaderError,)


@dataclass(frozen=True)
class FailClosed:
    """On an engine error (``ReaderError`` by default), go to the safe node ``node``."""

    node: str
    errors: tuple[type[BaseException], ...] = (ReaderError,)


OnError = Literal["raise"] | FailOpen | FailClosed


# -- policy ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """Thresholds and fallbacks for one decision.

    Args:
        take_at: take the engine's label when ``confidence >= take_at``.
        review_below: ask a human when ``confidence < review_below`` (``None``: never).
        min_label_mass: below it, a confident read is not taken either (the model put
            its probability outside the labels); it falls back (or goes to review).
        fallbacks: what runs in the fallback band, in order.
        on_error: ``"raise"`` (default), ``FailOpen(label)`` or ``FailClosed(node)``.

    ``Policy()`` takes every answer. A policy with a non-empty fallback band and no
    fallbacks is a configuration error: say what should happen to uncertain answers.
    """

    take_at: float = 0.0
    review_below: float | None = None
    min_label_mass: float = 0.0
    fallbacks: Sequence[Fallback] = field(default_factory=tuple)
    on_error: OnError = "raise"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fallbacks", tuple(self.fallbacks))
        if not 0.0 <= self.take_at <= 1.0:
            raise ConfigurationError(f"take_at must be in [0, 1], got {self.take_at}")
        if self.review_below is not None and not 0.0 <= self.review_below <= self.take_at:
            raise ConfigurationError(
                f"review_below must be in [0, take_at={self.take_at}], got {self.review_below}"
            )
        if not 0.0 <= self.min_label_mass <= 1.0:
            raise ConfigurationError(f"min_label_mass must be in [0, 1], got {self.min_label_mass}")
        for fb in self.fallbacks:
            if not isinstance(fb, MoreDraws | Generate | GotoNode):
                raise ConfigurationError(
                    f"unknown fallback {fb!r}; use MoreDraws, Generate or GotoNode"
                )
        if not (self.on_error == "raise" or isinstance(self.on_error, FailOpen | FailClosed)):
            raise ConfigurationError(
                f"on_error must be 'raise', FailOpen(label) or FailClosed(node), got "
                f"{self.on_error!r}"
            )
        if self.has_fallback_band and not self.fallbacks:
            raise ConfigurationError(
                f"Policy(take_at={self.take_at}, review_below={self.review_below}) has a "
                "fallback band but no fallbacks; add fallbacks=[Generate(model)], "
                "[GotoNode('node')] or [MoreDraws(8), ...], or set review_below=take_at "
                "to send every uncertain answer to review"
            )
        if self.fallbacks and not any(isinstance(f, Generate | GotoNode) for f in self.fallbacks):
            raise ConfigurationError(
                "MoreDraws alone cannot resolve an answer that stays uncertain; end the "
                "fallbacks with Generate(model) or GotoNode('node')"
            )

    @property
    def has_fallback_band(self) -> bool:
        return self.take_at > (self.review_below or 0.0) or self.min_label_mass > 0.0

    @property
    def can_review(self) -> bool:
        return self.review_below is not None and self.review_below > 0.0

    def band(self, decision: Decision) -> Band:
        """The band of one engine decision."""
        if self.review_below is not None and decision.confidence < self.review_below:
            return "review"
        if decision.confidence >= self.take_at and decision.label_mass >= self.min_label_mass:
            return "take"
        return "fallback"

    def targets(self) -> list[str]:
        """Node names this policy may route to besides the options' nodes."""
        out = [f.node for f in self.fallbacks if isinstance(f, GotoNode)]
        if isinstance(self.on_error, FailClosed):
            out.append(self.on_error.node)
        return out

    def check_options(self, qid: str, options: Sequence[str]) -> None:
        """Validate ``FailOpen`` labels against the question's options."""
        if isinstance(self.on_error, FailOpen) and self.on_error.label not in options:
            raise ConfigurationError(
                f"question {qid!r}: FailOpen label {self.on_error.label!r} is not one of its "
                f"options {list(options)}"
            )


PolicyArg = Policy | Mapping[str, Policy] | None


def policy_for(policy: PolicyArg, qid: str) -> Policy:
    """The policy of question ``qid`` (a mapping may give ``"*"`` as the default)."""
    if policy is None:
        return Policy()
    if isinstance(policy, Policy):
        return policy
    found = policy.get(qid, policy.get("*"))
    return found if found is not None else Policy()


def check_policies(policy: PolicyArg, questions: Mapping[str, Question]) -> None:
    if isinstance(policy, Mapping):
        unknown = sorted(set(policy) - set(questions) - {"*"})
        if unknown:
            raise ConfigurationError(
                f"policies given for unknown question ids {unknown}; questions are "
                f"{sorted(questions)}"
            )
        for p in policy.values():
            if not isinstance(p, Policy):
                raise ConfigurationError(f"expected a Policy, got {type(p).__name__}")
    elif policy is not None and not isinstance(policy, Policy):
        raise ConfigurationError(
            f"policy must be a Policy or a mapping question id -> Policy, got "
            f"{type(policy).__name__}"
        )
    for qid, q in questions.items():
        policy_for(policy, qid).check_options(qid, options_of(qid, q))


def options_of(qid: str, question: Question) -> list[str]:
    return list(to_spec(qid, question).options)


def question_text(qid: str, question: Question) -> str:
    return to_spec(qid, question).instructions


# -- records --------------------------------------------------------------------------


def engine_record(
    decision: Decision, question: Question, *, band: Band, draws: int | None = None
) -> DecisionRecord:
    """The plain-dict record of an engine decision taken as is."""
    return {
        "question_id": decision.question_id,
        "question": question_text(decision.question_id, question),
        "type": decision.type,
        "label": decision.label,
        "options": list(decision.options),
        "probabilities": dict(decision.probabilities),
        "entropy": decision.entropy,
        "confidence": decision.confidence,
        "margin": decision.margin,
        "label_mass": decision.label_mass,
        "agreement": decision.agreement,
        "expected": decision.expected,
        "band": band,
        "decided_by": "engine",
        "engine_label": decision.label,
        "goto": None,
        "reader": decision.reader,
        "model": decision.model,
        "latency_s": decision.latency_s,
        "draws": draws,
        "fallback": None,
        "error": None,
    }


def error_record(
    qid: str, question: Question, error: BaseException, policy: Policy, reader: Any
) -> DecisionRecord:
    on_error = policy.on_error
    options = options_of(qid, question)
    qtype = question.type
    rec: DecisionRecord = {
        "question_id": qid,
        "question": question_text(qid, question),
        "type": qtype,
        "label": on_error.label if isinstance(on_error, FailOpen) else None,
        "options": options,
        "probabilities": None,
        "entropy": None,
        "confidence": None,
        "margin": None,
        "label_mass": None,
        "agreement": None,
        "expected": None,
        "band": "error",
        "decided_by": "fail_open" if isinstance(on_error, FailOpen) else "fail_closed",
        "engine_label": None,
        "goto": on_error.node if isinstance(on_error, FailClosed) else None,
        "reader": getattr(reader, "name", None),
        "model": getattr(reader, "model", None),
        "latency_s": None,
        "draws": None,
        "fallback": None,
        "error": f"{type(error).__name__}: {error}",
    }
    return rec


# -- generation fallback --------------------------------------------------------------


def _generation_messages(fb: Generate, qid: str, question: Question, state_text: str) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    spec = to_spec(qid, question)
    lines = []
    for name, desc in zip(spec.options, spec.descriptions):
        lines.append(f"- {name}" + (f": {desc}" if desc else ""))
    system = (fb.instructions + "\n\n" if fb.instructions else "") + (
        "Answer the question about the input with exactly one of the allowed options. "
        'Reply with JSON only: {"label": "<option>"}.'
    )
    human = (
        f"Input:\n{state_text}\n\nQuestion: {spec.instructions}\n\nAllowed options:\n"
        + "\n".join(lines)
    )
    return [SystemMessage(system), HumanMessage(human)]


def parse_label(reply: Any, options: Sequence[str], *, source: str = "fallback model") -> str:
    """The option named by a chat model's reply (JSON ``{"label": ...}`` or the bare
    option name), or ``FallbackError``. Never returns anything outside ``options``."""
    text = getattr(reply, "content", reply)
    if isinstance(text, list):  # content blocks
        text = "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in text if b)
    if not isinstance(text, str):
        raise FallbackError(f"{source} returned {type(text).__name__}, not text")
    raw = text.strip()
    candidate: Any = raw
    fenced = re.search(r"\{.*\}", raw, re.DOTALL)
    if fenced:
        try:
            obj = json.loads(fenced.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            candidate = obj.get("label", obj.get("choice", obj.get("answer")))
    if isinstance(candidate, str):
        candidate = candidate.strip().strip("\"'`.").strip()
        if candidate in options:
            return candidate
        lowered = {o.lower(): o for o in options}
        if candidate.lower() in lowered:
            return lowered[candidate.lower()]
    raise FallbackError(
        f"{source} answered {raw[:200]!r}, which names none of the allowed options "
        f"{list(options)}; the answer was rejected"
    )


def _fallback_record(rec: DecisionRecord, label: str, model: Any, reply: Any) -> DecisionRecord:
    out = dict(rec)
    out["label"] = label
    out["decided_by"] = "fallback"
    out["fallback"] = {
        "kind": "generate",
        "model": _model_name(model),
        "reply": str(getattr(reply, "content", reply))[:500],
    }
    return out


def _model_name(model: Any) -> str:
    for attr in ("model_name", "model", "model_id"):
        v = getattr(model, attr, None)
        if isinstance(v, str) and v:
            return v
    return type(model).__name__


# -- resolution -----------------------------------------------------------------------


class _Call:
    """One engine or model call of a fallback, runnable sync or async."""

    def __init__(
        self,
        sync: Callable[..., Any],
        async_: Callable[..., Awaitable[Any]],
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self.sync, self.async_, self.args, self.kwargs = sync, async_, args, kwargs

    def run(self) -> Any:
        return self.sync(*self.args, **self.kwargs)

    async def arun(self) -> Any:
        return await self.async_(*self.args, **self.kwargs)


@dataclass
class Resolver:
    """Asks the engine, bands each answer and resolves it by the policy.

    Integrations (LangGraph routers/nodes, the LangChain tool) build one per question
    set and call ``resolve``/``aresolve`` with the state the engine should read.
    ``review`` answers review-band decisions; ``allow_goto`` says whether routing to a
    node (``GotoNode``, ``FailClosed``) makes sense where the resolver is used.
    """

    engine: Any
    questions: dict[str, Question]
    policy: PolicyArg = None
    review: ReviewFn | None = None
    allow_goto: bool = True
    allow_review: bool = True

    def __post_init__(self) -> None:
        self.questions = validate_questions(self.questions)
        check_policies(self.policy, self.questions)
        for qid in self.questions:
            p = policy_for(self.policy, qid)
            if not self.allow_goto and p.targets():
                raise ConfigurationError(
                    f"question {qid!r}: GotoNode/FailClosed route to a node, which is not "
                    "possible here; use them in a router, decide node or Command node"
                )
            if p.can_review and not self.allow_review:
                raise ConfigurationError(
                    f"question {qid!r}: the policy has a review band (review_below="
                    f"{p.review_below}), which needs a decide node or Command node "
                    "(a router cannot interrupt and record the answer)"
                )

    # sync ---------------------------------------------------------------------------

    def resolve(self, state: Any) -> dict[str, DecisionRecord]:
        try:
            decisions = self.engine.decide(state, self.questions, log_decisions=False)
        except BaseException as e:  # noqa: BLE001 - re-raised unless a policy handles it
            return self._on_error(e)
        records, pending = self._band_all(decisions)
        self._review_all(records, pending)
        for qid in pending["fallback"]:
            records[qid] = self._fallback_sync(qid, records[qid], state)
        return records

    def _fallback_sync(self, qid: str, rec: DecisionRecord, state: Any) -> DecisionRecord:
        steps = self._fallback_steps(qid, rec, state)
        result: Any = None
        while True:
            try:
                call = steps.send(result)
            except StopIteration as done:
                return done.value
            result = call.run()

    # async --------------------------------------------------------------------------

    async def aresolve(self, state: Any) -> dict[str, DecisionRecord]:
        try:
            decisions = await self.engine.adecide(state, self.questions, log_decisions=False)
        except BaseException as e:  # noqa: BLE001
            return self._on_error(e)
        records, pending = self._band_all(decisions)
        self._review_all(records, pending)
        for qid in pending["fallback"]:
            records[qid] = await self._fallback_async(qid, records[qid], state)
        return records

    async def _fallback_async(self, qid: str, rec: DecisionRecord, state: Any) -> DecisionRecord:
        steps = self._fallback_steps(qid, rec, state)
        result: Any = None
        while True:
            try:
                call = steps.send(result)
            except StopIteration as done:
                return done.value
            result = await call.arun()

    # shared -------------------------------------------------------------------------

    def _fallback_steps(
        self, qid: str, rec: DecisionRecord, state: Any
    ) -> Generator[_Call, Any, DecisionRecord]:
        """The fallbacks of one question, in order, written once for both paths: each
        engine or model call is yielded as a ``_Call`` that the sync or async driver
        runs and sends back."""
        policy = policy_for(self.policy, qid)
        question = {qid: self.questions[qid]}
        errors: list[str] = []
        for fb in policy.fallbacks:
            if isinstance(fb, MoreDraws):
                engine = fb.engine or self.engine
                decisions = yield _Call(
                    engine.decide,
                    engine.adecide,
                    state,
                    question,
                    draws=fb.draws,
                    log_decisions=False,
                )
                d = decisions[qid]
                new = self._redo(qid, d, policy, fb.draws)
                if new is not None:
                    return new
                rec = self._keep_effort(rec, d, fb.draws)
            elif isinstance(fb, Generate):
                messages = _generation_messages(fb, qid, self.questions[qid], _text(state))
                reply = yield _Call(fb.model.invoke, fb.model.ainvoke, messages)
                try:
                    label = parse_label(reply, rec["options"])
                except FallbackError as e:
                    errors.append(str(e))
                    continue
                return _fallback_record(rec, label, fb.model, reply)
            else:
                return self._goto(rec, fb.node)
        raise FallbackError(
            f"question {qid!r}: confidence {rec['confidence']:.3f} is below take_at="
            f"{policy.take_at} and no fallback resolved it: " + "; ".join(errors)
        )

    def _on_error(self, e: BaseException) -> dict[str, DecisionRecord]:
        records = {}
        for qid, q in self.questions.items():
            p = policy_for(self.policy, qid)
            on_error = p.on_error
            if not isinstance(on_error, FailOpen | FailClosed) or not isinstance(
                e, on_error.errors
            ):
                raise e
            records[qid] = error_record(qid, q, e, p, self.engine.reader)
        for rec in records.values():
            logs.event(
                log,
                logging.WARNING,
                "agentbranch.decision.error",
                question_id=rec["question_id"],
                decided_by=rec["decided_by"],
                label=rec["label"],
                goto=rec["goto"],
                error=rec["error"],
            )
        return records

    def _band_all(
        self, decisions: Decisions
    ) -> tuple[dict[str, DecisionRecord], dict[str, list[str]]]:
        records: dict[str, DecisionRecord] = {}
        pending: dict[str, list[str]] = {"review": [], "fallback": []}
        for qid, q in self.questions.items():
            d = decisions[qid]
            band = policy_for(self.policy, qid).band(d)
            records[qid] = engine_record(d, q, band=band)
            if band != "take":
                pending[band].append(qid)
        return records, pending

    def _review_all(
        self, records: dict[str, DecisionRecord], pending: dict[str, list[str]]
    ) -> None:
        # Reviews run before any fallback: a resumed node re-runs from its start, so a
        # fallback model called before an interrupt would be called twice.
        for qid in pending["review"]:
            if self.review is None:
                raise ConfigurationError(
                    f"question {qid!r} is in the review band but no reviewer is configured"
                )
            rec = records[qid]
            payload = review_payload(rec)
            answer = self.review(payload)
            if answer not in rec["options"]:
                raise FallbackError(
                    f"question {qid!r}: the reviewer answered {answer!r}, not one of "
                    f"{rec['options']}"
                )
            rec["label"] = answer
            rec["decided_by"] = "human"

    def _redo(self, qid: str, d: Decision, policy: Policy, draws: int) -> DecisionRecord | None:
        if policy.band(d) != "take":
            return None
        rec = engine_record(d, self.questions[qid], band="fallback", draws=draws)
        rec["fallback"] = {"kind": "more_draws", "draws": draws}
        return rec

    def _keep_effort(self, rec: DecisionRecord, d: Decision, draws: int) -> DecisionRecord:
        new = engine_record(d, self.questions[rec["question_id"]], band="fallback", draws=draws)
        return new

    def _goto(self, rec: DecisionRecord, node: str) -> DecisionRecord:
        out = dict(rec)
        out["goto"] = node
        out["decided_by"] = "fallback_node"
        out["fallback"] = {"kind": "goto", "node": node}
        return out


def review_payload(rec: DecisionRecord) -> dict[str, Any]:
    """What a human reviewer sees (never the raw state)."""
    return {
        "kind": "agentbranch.review",
        "question_id": rec["question_id"],
        "question": rec["question"],
        "options": list(rec["options"]),
        "suggested": rec["engine_label"],
        "probabilities": rec["probabilities"],
        "confidence": rec["confidence"],
    }


def _text(state: Any) -> str:
    from agentbranch.state import render_state

    return render_state(state)


__all__ = [
    "Band",
    "DecisionRecord",
    "FailClosed",
    "FailOpen",
    "Fallback",
    "Generate",
    "GotoNode",
    "MoreDraws",
    "Policy",
    "Resolver",
    "parse_label",
    "policy_for",
]
