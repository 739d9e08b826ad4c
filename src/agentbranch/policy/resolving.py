"""The steps of resolving decisions, written once for every caller.

Render each state once, ask the engine (one batched read for several states), band each
answer, let a human review, run the fallbacks, store the labels as evidence and queue
the audits. ``resolve_many`` yields the blocking calls (``agentbranch.policy.steps``), so
``Resolver`` (LangGraph nodes and routers, the LangChain tool) and ``ToolGateMiddleware``
drive the same steps with ``run_sync`` or ``run_async``. Everything after the render
reads the rendered text, so the engine, identities, few-shot picks, ``Generate``
prompts and audits all see one text. A policy's trust source is reached through its
seam alone (``agentbranch.policy.trust``): the question asked, the threshold in force,
the labels the resolution obtained (``collect``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentbranch.core import _tracing as tracing
from agentbranch.core.questions import Question
from agentbranch.core.state import render_state
from agentbranch.policy.bands import band_all, thresholds_for
from agentbranch.policy.config import DecisionRecord, PolicyArg, policy_for
from agentbranch.policy.failure import records_for_error
from agentbranch.policy.fallbacks import fallback_steps
from agentbranch.policy.records import decision_identity, langgraph_thread
from agentbranch.policy.steps import Call, Steps, offload, on_async_only
from agentbranch.policy.trust import Asked, TrustSource

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["Resolution", "collect", "identify", "label_of", "resolve_many", "snapshot"]


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
    learns = any(policy_for(policy, question_id).trust.asks_versions for question_id in questions)
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
    ``agentbranch.policy.records.decision_identity``), so its teacher labels count once."""
    earned = [q for q in records if policy_for(policy, q).earned is not None]
    if not earned:
        return
    thread = langgraph_thread()
    for question_id in earned:
        records[question_id]["decision_id"] = decision_identity(question_id, text, thread)


Looked = tuple[dict[str, Question], dict[str, Question], dict[str, Asked]]


def _ask(
    engine: Engine, questions: Mapping[str, Question], policy: PolicyArg, texts: list[Any]
) -> list[Looked]:
    return [_asked(engine, questions, policy, t) for t in texts]


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
    if not sources:
        return asked, reads, {}
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
    records, pending = band_all(decisions, asked, policy, thresholds_for(engine, text))
    identify(records, policy, text or "")
    for question_id, a in said.items():  # the read that decided, for audits and replays
        policy_for(policy, question_id).trust.mark(records[question_id], a)
    return Resolution(text, records, asked, pending, snapshot(records, policy))


def _thresholds_now(policy: PolicyArg, batch: list[Any], looked: list[Looked]) -> None:
    """Bring every ``Earned`` threshold up to date (re-reading the store when due)."""
    for decisions, (asked, _, _) in zip(batch, looked, strict=True):
        for question_id, q in asked.items():
            p = policy_for(policy, question_id)
            if p.earned is not None:
                p.threshold(question_id, q, decisions[question_id])


def _collect(policy: PolicyArg, out: list[Resolution]) -> None:
    for r in out:
        collect(r.asked, policy, r.banded, r.records, state=r.state)


# -- labels the resolution obtained: evidence for the policy's trust source ---------------
#
# The resolver keeps the banded records (``snapshot``) before review and fallbacks run,
# then ``collect`` gives every label the policy obtained (a ``Generate`` answer in the
# fallback band, a human's answer in the review band) to the source, with the engine's
# first read (the one the threshold is compared with). Audited takes reach it from the
# audit worker (``agentbranch.policy.auditing.shadow``).


def snapshot(records: Mapping[str, DecisionRecord], policy: PolicyArg) -> dict[str, DecisionRecord]:
    """Copies of the banded records of questions whose policy is ``Earned``."""
    return {
        question_id: dict(rec)
        for question_id, rec in records.items()
        if policy_for(policy, question_id).earned is not None
    }


def label_of(final: DecisionRecord) -> tuple[str, str] | None:
    """``(source, teacher label)`` when the resolution gave a label, else ``None``."""
    fallback = final.get("fallback") or {}
    if final.get("decided_by") == "fallback" and fallback.get("kind") == "generate":
        return "fallback", final["label"]
    if final.get("decided_by") == "human":
        return "review", final["label"]
    return None


def collect(
    questions: Mapping[str, Question],
    policy: PolicyArg,
    banded: Mapping[str, DecisionRecord],
    final: Mapping[str, DecisionRecord],
    state: Any = None,
) -> None:
    """Give the labels the resolution of ``final`` obtained to each question's trust
    source (see above); with ``state`` (the state read), a learning policy keeps it with
    the label."""
    for question_id, first in banded.items():
        got = label_of(final[question_id])
        if got is None:
            continue
        chosen = policy_for(policy, question_id)
        chosen.trust.observe_label(
            question_id,
            questions[question_id],
            first,
            source=got[0],
            teacher_label=got[1],
            rate=1.0,
            state=state,
            audit_rate=chosen.audit.rate if chosen.audit is not None else 0.0,
        )
