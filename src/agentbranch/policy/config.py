"""What a policy says: bands, fallbacks and error handling for one decision."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentbranch.core.decisions import Decision
from agentbranch.core.errors import ConfigurationError, ReaderError, timeout_seconds
from agentbranch.core.questions import Question, instructions_text, to_spec
from agentbranch.policy.trust import Fixed, QuestionKey, Threshold, TrustSource

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = [
    "Band",
    "DecidedBy",
    "DecisionRecord",
    "FailClosed",
    "FailOpen",
    "Fallback",
    "Generate",
    "GotoNode",
    "MoreDraws",
    "OnError",
    "Policy",
    "PolicyArg",
    "ReviewFn",
    "TAKE_EVERY_ANSWER",
    "check_policies",
    "options_of",
    "policy_for",
    "question_text",
]

Band = Literal["take", "fallback", "review", "error"]
DecidedBy = Literal["engine", "fallback", "fallback_node", "human", "fail_open", "fail_closed"]
DecisionRecord = dict[str, Any]

#: ``review(payload) -> label``: called for decisions in the review band.
ReviewFn = Callable[[dict[str, Any]], str]


# -- fallbacks ------------------------------------------------------------------------


@dataclass(frozen=True)
class MoreDraws:
    """More engine effort: re-read with ``draws`` noise draws (averaged), taken when it
    clears the take threshold (else the next fallback runs). With ``engine``, the re-read
    goes through that engine instead (e.g. more denoising steps on the same vLLM)."""

    draws: int = 8
    engine: Engine | None = None

    def __post_init__(self) -> None:
        if self.draws < (1 if self.engine is not None else 2):
            raise ConfigurationError(
                "MoreDraws(draws=...) needs at least 2 draws (or another engine=...)"
            )


@dataclass(frozen=True)
class Generate:
    """Generation fallback: ``model`` (a LangChain chat model) answers the same question
    over the same options. Its reply must name exactly one option (``parse_label``);
    anything else is a failed fallback: the next one runs, or ``FallbackError``.
    ``instructions`` is an optional system prompt prepended to the request.
    ``timeout_s`` bounds one call (60 s; ``None`` waits for ever): past it the call is a
    failed fallback (cancelled on the async path, left to finish on the sync one)."""

    model: Any
    instructions: str | None = None
    timeout_s: float | None = 60.0

    def __post_init__(self) -> None:
        timeout_seconds(self.timeout_s, "Generate(timeout_s=...)")


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
        take_at: take the engine's label when ``confidence >= take_at``; or
            ``Earned(precision=..., level=..., store=...)``: a threshold earned per question
            from the teacher's labels (``agentbranch.policy.earned``), which needs a label
            source: a ``Generate`` fallback or an ``Audit`` with a teacher ``model``.
        review_below: ask a human when ``confidence < review_below`` (``None``: never).
            With ``Earned``, review comes first: a decision below ``review_below`` goes to
            a human whatever threshold is earned, and the human's answer is evidence.
        min_label_mass: below it, a confident read is not taken either (the model put
            its probability outside the labels); it falls back (or goes to review). A
            decision whose label mass is unknown (``label_mass=None``: a server that does
            not report it) is never taken under a floor above 0.
        fallbacks: what runs in the fallback band, in order.
        on_error: ``"raise"`` (default), ``FailOpen(label)`` or ``FailClosed(node)``.
        audit: ``Audit(...)``: a sampled share of the taken decisions is also asked of a
            teacher in the background; never changes a route.

    ``Policy()`` takes every answer. A fallback band without fallbacks is a
    ``ConfigurationError``: say what should happen to uncertain answers.
    """

    take_at: float | TrustSource = 0.0
    review_below: float | None = None
    min_label_mass: float = 0.0
    fallbacks: Sequence[Fallback] = field(default_factory=tuple)
    on_error: OnError = "raise"
    audit: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "fallbacks", tuple(self.fallbacks))
        if isinstance(self.take_at, Fixed):
            object.__setattr__(self, "take_at", self.take_at.take_at)
        self._check_audit()
        self._check_take_at()
        trust = self.take_at if isinstance(self.take_at, TrustSource) else Fixed(self.take_at)
        object.__setattr__(self, "_trust", trust)
        top = trust.max_take_at
        if self.review_below is not None and not 0.0 <= self.review_below <= top:
            raise ConfigurationError(
                f"review_below must be in [0, take_at={top}], got {self.review_below}"
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

    def _check_take_at(self) -> None:
        if isinstance(self.take_at, TrustSource):
            has_generate = any(isinstance(f, Generate) for f in self.fallbacks)
            teacher = self.audit is not None and self.audit.model is not None
            if not has_generate and not teacher:
                raise ConfigurationError(
                    "Policy(take_at=Earned(...)) learns from a teacher's labels and this "
                    "policy has no way to get them; add fallbacks=[Generate(chat_model)] "
                    "(labels every uncertain decision) or audit=Audit(model=chat_model, "
                    "rate=...) (labels a sampled share)"
                )
            if any(isinstance(f, MoreDraws) for f in self.fallbacks):
                # An earned threshold holds for the read it was earned on (its evidence
                # key: question, reader version, model, draws); a re-read with more
                # draws or another engine is another read, with no evidence of its own.
                raise ConfigurationError(
                    "Policy(take_at=Earned(...)) cannot take a MoreDraws re-read: its "
                    "threshold was earned on the first read (its reader, model and draws) "
                    "and says nothing about another read's confidence; drop MoreDraws "
                    "(fallbacks=[Generate(chat_model)]) or use a fixed take_at with it"
                )
            if not has_generate and self.audit.rate <= 0.0:
                raise ConfigurationError(
                    "Policy(take_at=Earned(...)) with Audit(rate=0) and no Generate fallback "
                    "never gets a label; give Audit(rate=...) > 0 or a Generate fallback"
                )
            if self._unaudited():
                # Allowed (the fallback's labels still earn a threshold), but once a band is
                # open nothing checks what it takes: say so once, where it is set up.
                logging.getLogger("agentbranch").warning(
                    "Policy(take_at=Earned(...)) without audit=Audit(rate=...) > 0: decisions "
                    "taken above an earned threshold are never checked against the teacher, "
                    "so drift cannot withdraw it; add audit=Audit(rate=0.05) to watch the "
                    "take band"
                )
            return
        ok = isinstance(self.take_at, int | float) and not isinstance(self.take_at, bool)
        if not ok or not 0.0 <= self.take_at <= 1.0:
            raise ConfigurationError(
                f"take_at must be a number in [0, 1] or Earned(...), got {self.take_at!r}"
            )

    def _unaudited(self) -> bool:
        """Whether nothing audits the take band of an ``Earned`` policy. A policy whose
        caller audits the takes itself (``decide_first``: the router it stands in front
        of labels a share of them) overrides it."""
        return self.audit is None or self.audit.rate <= 0.0

    @property
    def trust(self) -> TrustSource:
        """Where this policy's threshold comes from (``agentbranch.policy.trust``): its
        ``take_at`` when that is a source (``Earned``), else ``Fixed(take_at)``."""
        return self._trust  # set in __post_init__ (a frozen dataclass: no field of its own)

    @property
    def earned(self) -> TrustSource | None:
        """The source of this policy's threshold when it learns from labels (``Earned``),
        else ``None`` (a fixed ``take_at``)."""
        return self.take_at if isinstance(self.take_at, TrustSource) else None

    def threshold(self, qid: str, question: Question, decision: Decision) -> Threshold:
        """The threshold in force for ``decision`` of question ``qid``: the fixed
        ``take_at`` (trust ``"fixed"``) or what ``Earned`` has earned for this question,
        reader, model and reading settings (``decision.reading``: a threshold earned on
        one confidence scale never serves another)."""
        key = QuestionKey(qid, question, decision.reader, decision.model, decision.reading)
        return self.trust.in_force(key)

    def _check_audit(self) -> None:
        from agentbranch.policy.auditing.config import Audit

        if self.audit is None:
            return
        if not isinstance(self.audit, Audit):
            raise ConfigurationError(f"audit must be an Audit(...), got {self.audit!r}")
        if self.audit.model is None and not any(isinstance(f, Generate) for f in self.fallbacks):
            raise ConfigurationError(
                "Audit() without a model audits with the policy's Generate fallback model, "
                "and this policy has none; give Audit(model=chat_model)"
            )

    @property
    def has_fallback_band(self) -> bool:
        if isinstance(self.take_at, TrustSource):
            return True
        return self.take_at > (self.review_below or 0.0) or self.min_label_mass > 0.0

    @property
    def can_review(self) -> bool:
        return self.review_below is not None and self.review_below > 0.0

    def band(self, decision: Decision, take_at: float | None | Threshold = None) -> Band:
        """The band of one engine decision, at threshold ``take_at`` (a ``Threshold`` or
        a number; ``Threshold(None, ...)`` takes nothing). Without it, the fixed
        ``take_at`` (an ``Earned`` policy must be given the threshold in force)."""
        if take_at is None and isinstance(self.take_at, TrustSource):
            raise ConfigurationError(
                "Policy(take_at=Earned(...)).band() needs the threshold in force: "
                "band(decision, policy.threshold(qid, question, decision))"
            )
        at = self.take_at if take_at is None else take_at
        at = at.take_at if isinstance(at, Threshold) else at
        if self.review_below is not None and decision.confidence < self.review_below:
            return "review"
        # An unknown label mass (``None``) clears only a floor of 0: a floor asks for a
        # mass nobody reported, so it fails closed.
        mass = decision.label_mass
        mass_ok = self.min_label_mass <= 0.0 if mass is None else mass >= self.min_label_mass
        return "take" if at is not None and decision.confidence >= at and mass_ok else "fallback"

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


#: ``Policy()``, shared (it is frozen): asked for on every decision of a question
#: without a policy of its own.
TAKE_EVERY_ANSWER = Policy()


def policy_for(policy: PolicyArg, qid: str) -> Policy:
    """The policy of question ``qid`` (a mapping may give ``"*"`` as the default)."""
    if policy is None:
        return TAKE_EVERY_ANSWER
    if isinstance(policy, Policy):
        return policy
    found = policy.get(qid, policy.get("*"))
    return found if found is not None else TAKE_EVERY_ANSWER


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
    for question_id, q in questions.items():
        policy_for(policy, question_id).check_options(question_id, options_of(question_id, q))


def options_of(qid: str, question: Question) -> list[str]:
    return list(to_spec(qid, question).options)


def question_text(qid: str, question: Question) -> str:
    """The question as the engine asks it (its instructions as text). ``qid`` is kept
    for callers; the question was validated when its node or tool was built."""
    return instructions_text(question)
