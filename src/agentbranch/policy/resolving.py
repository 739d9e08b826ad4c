"""Resolving decisions by their policies: the steps written once for every caller.

Render each state once, ask the engine (one batched read for several states), band each
answer at the threshold in force, let a human review, run the fallbacks, store the labels
as evidence and queue the audits. ``resolve_many`` is a generator that yields each
blocking ``Call`` (a call's error is raised at its ``yield``); ``run_sync``/``run_async``
drive it, so every caller runs the same steps on either path. Everything after the render
reads the rendered text. With a replay cassette, an ``Earned`` threshold and a reviewer
function's answers are recorded and replayed (LangGraph's interrupt is not: the human's
answer comes back through the checkpointer).

Over 500 lines: the steps of one resolution, their driver and the ``Resolver`` are one
path, read in order.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.any_of import AnyOf, member_questions, set_record
from agentbranch.core.decisions import Decision
from agentbranch.core.errors import ConfigurationError, FallbackError
from agentbranch.core.questions import Question, validate_questions
from agentbranch.core.state import render_state
from agentbranch.core.teacher_calls import TeacherCall
from agentbranch.policy.config import (
    DecisionRecord,
    Generate,
    MoreDraws,
    Policy,
    PolicyArg,
    ReviewFn,
    check_policies,
    policy_for,
)
from agentbranch.policy.generation import (
    Expired,
    agenerate,
    ask,
    fallback_record,
    generate,
    generation_messages,
    model_name,
    parse_label,
    state_text,
)
from agentbranch.policy.records import (
    decision_identity,
    engine_record,
    langgraph_thread,
    records_for_error,
    review_payload,
)
from agentbranch.policy.trust import Asked, TeacherLabel, Threshold, TrustSource

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine


@dataclass
class Resolution:
    """One state's decisions while they are resolved.

    ``state`` is the state as text (rendered once); ``records`` the decision records;
    ``pending`` the ids still in the review and fallback bands; ``banded`` copies of the
    banded records of ``Earned`` questions (the reads whose labels become evidence; a
    hook removes one to store no label for it); ``asked`` the questions the engine was
    asked (a learning question's version in force)."""

    state: str | None
    records: dict[str, DecisionRecord]
    asked: Mapping[str, Any]
    pending: dict[str, list[str]] = field(default_factory=lambda: {"review": [], "fallback": []})
    banded: dict[str, DecisionRecord] = field(default_factory=dict)


Hook = Callable[[list[Resolution]], None]


def resolve_many(
    engine: Engine,
    questions: Mapping[str, Question],
    policy: PolicyArg,
    states: Sequence[Any],
    *,
    review: Hook,
    finish: Hook | None = None,
    batched: bool = True,
) -> Steps[list[Resolution]]:
    """Resolve ``questions`` about each of ``states`` (see module doc).

    ``review`` answers the review band of every state at once, before any fallback (a
    resumed LangGraph node re-runs from its start, so a fallback called before an
    interrupt would be called twice); ``finish`` completes the records before they are
    audited. ``batched``: one ``decide_many`` read (else one ``decide`` of the single
    state). An engine error gives the policy's fail-open/closed records (or raises). With
    a tracer provider set, each decision gets a span to its final record."""
    spans = telemetry.DecisionSpans(list(questions), len(states))
    try:
        out = yield from _resolve_many(
            engine, questions, policy, states, review, finish, batched, spans
        )
    except BaseException as e:
        spans.fail(e)
        raise
    spans.finish([r.records for r in out], [r.state for r in out])
    return out


def _resolve_many(
    engine: Engine,
    questions: Mapping[str, Question],
    policy: PolicyArg,
    states: Sequence[Any],
    review: Hook,
    finish: Hook | None,
    batched: bool,
    spans: telemetry.DecisionSpans,
) -> Steps[list[Resolution]]:
    learns = any(policy_for(policy, question_id).trust.asks_versions for question_id in questions)
    earned = any(policy_for(policy, question_id).earned is not None for question_id in questions)
    try:
        texts: list[str | None] = [render_state(s) for s in states]
    except BaseException as e:  # noqa: BLE001 - the engine's read would raise it
        out = _failed(e, engine, questions, policy, [None] * len(states))
    else:
        # learning hook: each learning question's version in force is what is asked (a
        # learning question may embed the state or read its store: off the event loop)
        def ask() -> list[Looked]:
            return [_asked(engine, questions, policy, t) for t in texts]

        looked = (yield offload(ask)) if learns else ask()
        reads = [r for _, r, _ in looked]
        try:
            if batched:
                batch = yield Call(
                    engine.decide_many, engine.adecide_many, texts, reads, log_decisions=False
                )
            else:
                one = yield Call(
                    engine.decide, engine.adecide, texts[0], reads[0], log_decisions=False
                )
                batch = [one]
        except GeneratorExit:
            raise
        except BaseException as e:  # noqa: BLE001 - re-raised unless the policy handles it
            out = _failed(e, engine, questions, policy, texts)
        else:
            # A due store re-read is blocking I/O: the async path does it off the event loop
            # now (the sync path does it inline, while banding).
            if earned:
                yield Call(
                    lambda *a: None, asyncio.to_thread, _thresholds_now, policy, batch, looked
                )
            out = [
                _banded(engine, policy, text, decisions, got)
                for text, decisions, got in zip(texts, batch, looked, strict=True)
            ]
    review(out)
    for i, r in enumerate(out):
        for question_id in r.pending["fallback"]:
            p = policy_for(policy, question_id)
            question, rec = questions[question_id], r.records[question_id]
            span = spans.spans[i].get(question_id)
            steps = fallback_steps(engine, question_id, question, p, rec, r.state, span)
            r.records[question_id] = yield from steps
    if any(r.banded for r in out):  # evidence stores do blocking I/O: off the event loop
        yield offload(_collect, policy, out)
    if finish is not None:
        finish(out)
    if any(policy_for(policy, question_id).audit is not None for question_id in questions):
        from agentbranch.policy.auditing.shadow import shadow

        for r in out:  # never blocks, never raises (``agentbranch.audit``)
            shadow(engine, questions, policy, r.records, r.state)
    return out


Looked = tuple[dict[str, Question], dict[str, Question], dict[str, Asked]]


def _asked(
    engine: Engine, questions: Mapping[str, Question], policy: PolicyArg, text: Any
) -> Looked:
    """The questions asked about ``text`` (the version in force of a question whose source
    learns versions: its evidence and threshold are that version's), the questions the
    engine reads, and what each source said of its questions (``TrustSource.asked``)."""
    asked: dict[str, Question] = dict(questions)
    reads: dict[str, Question] = dict(questions)
    sources: dict[int, tuple[TrustSource, dict[str, Question]]] = {}
    for question_id, q in questions.items():
        trust = policy_for(policy, question_id).trust
        if trust.asks_versions:
            sources.setdefault(id(trust), (trust, {}))[1][question_id] = q
    said: dict[str, Asked] = {}
    for trust, theirs in sources.values():
        said.update(trust.asked(engine, theirs, text))
    for question_id, a in said.items():
        asked[question_id], reads[question_id] = a.question, a.read
    return asked, reads, said


def _failed(
    error: BaseException,
    engine: Engine,
    questions: Mapping[str, Question],
    policy: PolicyArg,
    texts: list[str | None],
) -> list[Resolution]:
    return [
        Resolution(t, records_for_error(error, questions, policy, engine.reader), questions)
        for t in texts
    ]


def _banded(
    engine: Engine, policy: PolicyArg, text: str | None, decisions: Any, looked: Looked
) -> Resolution:
    asked, _, said = looked
    out = Resolution(text, {}, asked)
    cassette = cassette_of(engine)
    for question_id, q in asked.items():
        d, p = decisions[question_id], policy_for(policy, question_id)
        threshold = _threshold(cassette, text, question_id, q, d, p)
        band = p.band(d, threshold)
        out.records[question_id] = engine_record(d, q, band=band, threshold=threshold)
        if band != "take":
            out.pending[band].append(question_id)
    # Each decision of an ``Earned`` question gets its identity, so its teacher labels
    # count once (``decision_identity``).
    earned = [q for q in out.records if policy_for(policy, q).earned is not None]
    thread = langgraph_thread() if earned else None
    for question_id in earned:
        out.records[question_id]["decision_id"] = decision_identity(question_id, text or "", thread)
    for question_id, a in said.items():  # the read that decided, for audits and replays
        policy_for(policy, question_id).trust.mark(out.records[question_id], a)
    # Their banded records, copied before review and fallbacks run: the engine's first
    # read, which the labels they obtain are evidence about.
    out.banded = {q: dict(out.records[q]) for q in earned}
    return out


def _thresholds_now(policy: PolicyArg, batch: list[Any], looked: list[Looked]) -> None:
    """Bring every ``Earned`` threshold up to date (re-reading the store when due)."""
    for decisions, (asked, _, _) in zip(batch, looked, strict=True):
        for question_id, q in asked.items():
            p = policy_for(policy, question_id)
            if p.earned is not None:
                p.threshold(question_id, q, decisions[question_id])


# -- labels the resolution obtained (a ``Generate`` answer, a human's): evidence for the
# policy's trust source. Audited takes reach it from ``agentbranch.policy.auditing.shadow``.


def _collect(policy: PolicyArg, out: list[Resolution]) -> None:
    """Give the labels each resolution obtained to each question's trust source, with
    the engine's first read and the state read (a learning policy keeps it)."""
    for r in out:
        for question_id, first in r.banded.items():
            final = r.records[question_id]
            # a "fallback" decision is a Generate answer (``fallback_record``)
            source = {"human": "review", "fallback": "fallback"}.get(final.get("decided_by"))
            if source is None:  # no label: taken, a GotoNode, a MoreDraws re-read
                continue
            chosen = policy_for(policy, question_id)
            audit_rate = chosen.audit.rate if chosen.audit is not None else 0.0
            label = TeacherLabel(final["label"], source, 1.0, state=r.state, audit_rate=audit_rate)
            chosen.trust.observe_label(question_id, r.asked[question_id], first, label)


def fallback_steps(
    engine: Engine,
    qid: str,
    question: Question,
    policy: Policy,
    rec: DecisionRecord,
    state: Any,
    span: Any = None,
) -> Steps[DecisionRecord]:
    """Run ``policy.fallbacks`` for question ``qid`` until one resolves it; ``span``, the
    decision's OpenTelemetry span, is the parent of each teacher call's."""
    asked = {qid: question}
    errors: list[str] = []
    threshold = Threshold(rec.get("take_at"), rec.get("trust") or "fixed")
    for fb in policy.fallbacks:
        if isinstance(fb, MoreDraws):
            reader = fb.engine or engine
            decisions = yield Call(
                reader.decide, reader.adecide, state, asked, draws=fb.draws, log_decisions=False
            )
            d = decisions[qid]
            rec = engine_record(d, question, band="fallback", draws=fb.draws, threshold=threshold)
            if policy.band(d, threshold) == "take":
                rec["fallback"] = {"kind": "more_draws", "draws": fb.draws}
                return rec
        elif isinstance(fb, Generate):
            messages = generation_messages(fb, qid, question, state_text(state))
            started, teacher = time.perf_counter(), model_name(fb.model)

            try:
                reply = yield Call(generate, agenerate, engine, fb, qid, messages, rec["options"])
            except Exception as e:  # counted where it was raised (generation._raising)
                _ended(span, qid, teacher, started, type(e).__name__, counted=False)
                raise
            if isinstance(reply, Expired):  # a failed fallback: the next one runs
                if reply.made:
                    _ended(span, qid, teacher, started, "timeout")
                else:  # refused behind stuck calls: no call, no duration
                    telemetry.teacher_refused(qid, "fallback")
                telemetry.logger.warning("agentbranch: question %r: %s", qid, reply.message)
                errors.append(reply.message)
                continue
            try:
                label = parse_label(reply, rec["options"])
            except FallbackError as e:
                _ended(span, qid, teacher, started, "invalid_reply")
                errors.append(str(e))
                continue
            _ended(span, qid, teacher, started, None)
            return fallback_record(rec, label, fb.model, reply)
        else:
            goto = {"goto": fb.node, "decided_by": "fallback_node"}
            return {**rec, **goto, "fallback": {"kind": "goto", "node": fb.node}}
    raise FallbackError(
        f"question {qid!r}: confidence {rec['confidence']:.3f} is below take_at="
        f"{threshold.take_at} ({threshold.trust}) and no fallback resolved it: " + "; ".join(errors)
    )


def _ended(
    span: Any, qid: str, teacher: str, started: float, error: str | None, counted: bool = True
) -> None:
    """A fallback's teacher call ended: counted (unless it was where it raised) and spanned."""
    took = time.perf_counter() - started
    if counted:
        telemetry.teacher_call(qid, "fallback", took, error)
    telemetry.teacher_span(span, qid, "fallback", teacher, took, error)


def cassette_of(engine: Engine) -> Any:
    """The replay cassette the engine's reader (or a reader it wraps) reads through."""
    for reader in engine.reader.chain():
        if reader.cassette is not None:
            return reader.cassette
    return None


def _threshold(
    cassette: Any, state: str, question_id: str, question: Question, decision: Decision, p: Policy
) -> Threshold:
    """The threshold in force; an ``Earned`` one recorded and replayed by ``cassette``."""
    if cassette is None or p.earned is None:
        return p.threshold(question_id, question, decision)
    blob = json.dumps([question_id, question.model_dump(mode="json"), state], sort_keys=True)
    key = "earned:" + hashlib.sha256(blob.encode()).hexdigest()[:24]

    def now() -> dict[str, Any]:
        t = p.threshold(question_id, question, decision)
        return {"take_at": t.take_at, "trust": t.trust}

    got = cassette.threshold(key, now)
    return Threshold(got["take_at"], got["trust"])


#: Set on a reviewer whose answers the graph itself records and gives again on replay.
ANSWERED_BY_THE_GRAPH = "agentbranch_answered_by_the_graph"


def review_all(resolved: Resolution, review: ReviewFn | None, engine: Engine) -> None:
    """Ask ``review`` for each question of ``resolved`` in the review band and record the
    validated answer (through ``engine``'s replay cassette, if any)."""
    for question_id in resolved.pending["review"]:
        if review is None:
            raise ConfigurationError(
                f"question {question_id!r} is in the review band but no reviewer is configured"
            )
        rec = resolved.records[question_id]
        payload = review_payload(rec)
        if getattr(review, ANSWERED_BY_THE_GRAPH, False):
            answer = review(payload)
        else:
            call = TeacherCall(
                "review", question_id, review, {"state": state_text(resolved.state), **payload}
            )
            answer = ask(engine, call, lambda fn, shown=payload: fn(shown))
        if answer not in rec["options"]:
            raise FallbackError(
                f"question {question_id!r}: the reviewer answered {answer!r}, "
                f"not one of {rec['options']}"
            )
        rec["label"] = answer
        rec["decided_by"] = "human"


T = TypeVar("T")


class Call:
    """One engine or model call of the steps, runnable sync (``run()``) or async
    (``await arun()``)."""

    def __init__(
        self,
        sync: Callable[..., Any],
        async_: Callable[..., Awaitable[Any]],
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self.run = functools.partial(sync, *args, **kwargs)
        self.arun = functools.partial(async_, *args, **kwargs)


Steps = Generator[Call, Any, T]


def offload(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    """Blocking work (a store read or write): inline on the sync path, in a worker
    thread on the async one, so the event loop never waits on it."""
    return Call(fn, functools.partial(asyncio.to_thread, fn), *args, **kwargs)


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value


def _advance(steps: Steps[Any], result: Any, error: BaseException | None) -> Call | _Done:
    """Give ``steps`` the last call's result (or raise its error at the ``yield``)."""
    try:
        return steps.send(result) if error is None else steps.throw(error)
    except StopIteration as done:
        return _Done(done.value)


def run_sync(steps: Steps[T]) -> T:
    """Drive ``steps`` with blocking calls."""
    result, error = None, None
    while not isinstance(call := _advance(steps, result, error), _Done):
        try:
            result, error = call.run(), None
        except BaseException as e:  # noqa: BLE001 - raised inside the steps, at the yield
            result, error = None, e
    return call.value


async def run_async(steps: Steps[T]) -> T:
    """Drive ``steps`` with awaited calls."""
    result, error = None, None
    while not isinstance(call := _advance(steps, result, error), _Done):
        try:
            result, error = await call.arun(), None
        except BaseException as e:  # noqa: BLE001 - raised inside the steps, at the yield
            result, error = None, e
    return call.value


@dataclass
class Resolver:
    """Asks the engine, bands each answer and resolves it by the policy.

    Integrations (LangGraph routers/nodes, the LangChain tool) build one per question
    set and call ``resolve``/``aresolve`` with the state the engine should read.
    ``review`` answers review-band decisions; ``allow_goto`` says whether routing to a
    node (``GotoNode``, ``FailClosed``) makes sense where the resolver is used.
    """

    engine: Engine
    questions: dict[str, Question]
    policy: PolicyArg = None
    review: ReviewFn | None = None
    allow_goto: bool = True
    allow_review: bool = True
    #: the questions the engine reads (each ``AnyOf`` as its members) and their policies
    _asked: dict[str, Question] = field(init=False, repr=False)
    _policies: PolicyArg = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.questions = validate_questions(self.questions)
        sets = {qid: q for qid, q in self.questions.items() if isinstance(q, AnyOf)}
        try:
            self._asked = member_questions(self.questions) if sets else self.questions
        except ValueError as e:
            raise ConfigurationError(str(e)) from None
        self._policies = _member_policies(self.policy, sets)
        check_policies(self._policies, self._asked)
        for question_id in self._asked:
            p = policy_for(self._policies, question_id)
            if not self.allow_goto and p.targets():
                raise ConfigurationError(
                    f"question {question_id!r}: GotoNode/FailClosed route to a node, which is not "
                    "possible here; use them in a router, decide node or Command node"
                )
            if p.can_review and not self.allow_review:
                raise ConfigurationError(
                    f"question {question_id!r}: the policy has a review band (review_below="
                    f"{p.review_below}), which needs a decide node or Command node "
                    "(a router cannot interrupt and record the answer)"
                )

    def resolve(self, state: Any) -> dict[str, DecisionRecord]:
        return run_sync(self._steps(state))

    async def aresolve(self, state: Any) -> dict[str, DecisionRecord]:
        return await run_async(self._steps(state))

    def _steps(self, state: Any) -> Steps[dict[str, DecisionRecord]]:
        """The resolving steps (``agentbranch.policy.resolving``) for one state."""
        (resolved,) = yield from resolve_many(
            self.engine,
            self._asked,
            self._policies,
            [state],
            review=lambda out: review_all(out[0], self.review, self.engine),
            batched=False,
        )
        records = resolved.records
        return {
            qid: set_record(qid, q, records) if isinstance(q, AnyOf) else records[qid]
            for qid, q in self.questions.items()
        }


def _member_policies(policy: PolicyArg, sets: Mapping[str, AnyOf]) -> PolicyArg:
    """``policy`` with each set's policy given to its members by id (one ``Policy`` or
    none already applies to every question)."""
    if not sets or not isinstance(policy, Mapping):
        return policy
    out = {k: v for k, v in policy.items() if k not in sets}
    for qid, q in sets.items():
        if qid in policy or "*" in policy:
            out.update({member: policy_for(policy, qid) for member in q.members(qid)})
    return out


__all__ = [
    "ANSWERED_BY_THE_GRAPH",
    "Call",
    "Resolution",
    "Resolver",
    "Steps",
    "cassette_of",
    "resolve_many",
    "run_async",
    "run_sync",
]
