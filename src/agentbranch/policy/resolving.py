"""The steps of resolving decisions, written once for every caller.

Render each state once, ask the engine (one batched read for several states), band each
answer, let a human review, run the fallbacks, store the labels as evidence and queue
the audits. ``resolve_many`` yields the blocking calls (``agentbranch.policy.steps``), so
``Resolver`` (LangGraph nodes and routers, the LangChain tool) and ``ToolGateMiddleware``
drive the same steps with ``run_sync`` or ``run_async``. Everything after the render
reads the rendered text, so the engine, identities, few-shot picks, ``Generate``
prompts and audits all see one text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentbranch.core import _tracing as tracing
from agentbranch.core.questions import Question
from agentbranch.core.state import render_state
from agentbranch.policy.bands import band_all
from agentbranch.policy.config import DecisionRecord, PolicyArg, policy_for
from agentbranch.policy.earned._collect import collect, snapshot
from agentbranch.policy.earned._identity import decision_identity, langgraph_thread
from agentbranch.policy.earned._in_force import thresholds_for
from agentbranch.policy.earned.learn.hooks import asked_questions, learner_of, mark_versions
from agentbranch.policy.failure import records_for_error
from agentbranch.policy.fallbacks import fallback_steps
from agentbranch.policy.steps import Call, Steps, offload, on_async_only

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["Resolution", "identify", "resolve_many"]


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

    ``review`` answers the review band of every state at once (before any fallback: a
    resumed LangGraph node re-runs from its start, so a fallback model called before an
    interrupt would be called twice); ``finish`` completes the records before they are
    audited. ``batched``: one ``decide_many`` read (else one ``decide`` of the single
    state). An engine error gives the policy's fail-open/closed records (or raises).

    With an OpenTelemetry tracer provider set (``agentbranch.core._tracing``), each
    decision gets a span from here to its final record; a fallback's teacher call is a
    child of it."""
    spans = tracing.decisions(list(questions), len(states))
    if spans is None:
        return (
            yield from _resolve_many(engine, questions, policy, states, review, finish, batched)
        )
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
    spans: tracing.Decisions | None = None,
) -> Steps[list[Resolution]]:
    learns = any(learner_of(policy, question_id) is not None for question_id in questions)
    earned = any(policy_for(policy, question_id).earned is not None for question_id in questions)
    try:
        texts: list[str | None] = [render_state(s) for s in states]
    except BaseException as e:  # noqa: BLE001 - the engine's read would raise it
        out = _failed(e, engine, questions, policy, [None] * len(states))
    else:
        # learning hook: each learning question's version in force is what is asked (a
        # learning question may embed the state or read its store: off the event loop)
        looked = (
            (yield offload(_ask, engine, questions, policy, texts))
            if learns
            else _ask(engine, questions, policy, texts)
        )
        reads = [r for _, _, r, _ in looked]
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
            if earned:  # a due store re-read is blocking I/O: off the event loop
                yield on_async_only(_thresholds_now, policy, batch, looked)
            out = [
                _banded(engine, policy, text, decisions, got)
                for text, decisions, got in zip(texts, batch, looked, strict=True)
            ]
    review(out)
    for i, r in enumerate(out):
        for question_id in r.pending["fallback"]:
            p = policy_for(policy, question_id)
            question, rec = questions[question_id], r.records[question_id]
            span = None if spans is None else spans.span(i, question_id)
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


def identify(records: dict[str, DecisionRecord], policy: PolicyArg, text: str) -> None:
    """Give each decision of an ``Earned`` question its identity (``decision_id``;
    ``agentbranch.policy.earned._identity``), so its teacher labels count once."""
    earned = [q for q in records if policy_for(policy, q).earned is not None]
    if not earned:
        return
    thread = langgraph_thread()
    for question_id in earned:
        records[question_id]["decision_id"] = decision_identity(question_id, text, thread)


def _ask(
    engine: Engine, questions: Mapping[str, Question], policy: PolicyArg, texts: list[Any]
) -> list[tuple[dict, dict, dict, dict]]:
    return [asked_questions(engine, questions, policy, t) for t in texts]


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
    engine: Engine, policy: PolicyArg, text: str | None, decisions: Any, looked: tuple
) -> Resolution:
    asked, versions, _, maps = looked
    records, pending = band_all(decisions, asked, policy, thresholds_for(engine, text))
    identify(records, policy, text or "")
    mark_versions(records, versions, maps)  # learning hook
    return Resolution(text, records, asked, pending, snapshot(records, policy))


def _thresholds_now(policy: PolicyArg, batch: list[Any], looked: list[tuple]) -> None:
    """Bring every ``Earned`` threshold up to date (re-reading the store when due)."""
    for decisions, (asked, _, _, _) in zip(batch, looked, strict=True):
        for question_id, q in asked.items():
            p = policy_for(policy, question_id)
            if p.earned is not None:
                p.threshold(question_id, q, decisions[question_id])


def _collect(policy: PolicyArg, out: list[Resolution]) -> None:
    for r in out:
        collect(r.asked, policy, r.banded, r.records, state=r.state)
