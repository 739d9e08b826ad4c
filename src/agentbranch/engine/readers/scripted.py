"""``ScriptedReader``: the mock transport for tests of the layers above the reader.

Scripts give each question a distribution over its option names, fixed or computed
from the state. Every batch the reader receives is recorded in ``calls``, so tests can
assert that concurrent decisions reached it as one batch.
"""

from __future__ import annotations

import difflib
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.engine.readers.base import Reader

__all__ = ["Distribution", "Script", "ScriptedReader"]

Distribution = Mapping[str, float]
Script = Distribution | Callable[[str, QuestionSpec], Distribution]


@dataclass(eq=False, repr=False)
class ScriptedReader(Reader):
    """Answers from a script instead of a model.

    ``script`` maps a question id to a distribution over option names (missing
    options get 0), or to a callable ``(state, question) -> distribution``; ``default``
    answers questions the script does not name (uniform when ``None``). A script keyed
    by ids the read does not ask is a ``ConfigurationError`` when every question of the
    read would go unscripted, or an unscripted id is close to a scripted one (a typo);
    ``default=ScriptedReader.uniform`` answers unscripted questions without the check.
    ``error`` makes every read raise it; ``delay_s`` sleeps before answering.
    """

    name = "scripted"
    #: A script is answers, not a confidence scale (a subclass's new arguments count).
    reading_ignores = (
        "script",
        "default",
        "label_mass",
        "model",
        "error",
        "delay_s",
        "max_options",
    )

    script: Mapping[str, Script] | None = None
    _: KW_ONLY
    default: Callable[[str, QuestionSpec], Distribution] | None = None
    label_mass: float = 1.0
    model: str = "scripted"
    error: BaseException | None = None
    delay_s: float = 0.0
    max_options: int = 26
    #: Every batch received, in order.
    calls: list[list[ReadRequest]] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.script = dict(self.script or {})

    @staticmethod
    def uniform(state: str, q: QuestionSpec) -> Distribution:
        """Every option equally likely (a ``default`` for unscripted questions)."""
        return dict.fromkeys(q.options, 1.0 / len(q.options))

    def _distribution(self, state: str, q: QuestionSpec) -> Distribution:
        entry = self.script.get(q.id, self.default)
        if entry is None:
            return self.uniform(state, q)
        return entry(state, q) if callable(entry) else entry

    def _check_ids(self, asked: list[str]) -> None:
        """Refuse a script keyed by ids the read does not ask (see class doc)."""
        if not self.script or self.default is not None:
            return
        unscripted = [i for i in asked if i not in self.script]
        unknown = sorted(set(self.script) - set(asked))
        if not unscripted or not unknown:
            return
        typos = {i: difflib.get_close_matches(i, unknown, n=1, cutoff=0.6) for i in unscripted}
        if len(unscripted) < len(asked) and not any(typos.values()):
            return  # a partial script: the other questions are uniform on purpose
        hint = "; ".join(
            f"{i!r} (did you mean to script it as {t[0]!r}?)" for i, t in typos.items() if t
        )
        raise ConfigurationError(
            f"ScriptedReader: its script names {unknown}, which this read does not ask, "
            f"and the read's questions {unscripted} have no script"
            + (f": {hint}" if hint else "")
            + f". The read asks {asked}; key the script by those ids (ToolGateMiddleware "
            "asks 'risky', ToolSelectorMiddleware 'tool' or one id per tool name), or "
            "pass default=ScriptedReader.uniform to answer unscripted questions uniformly"
        )

    def _answer(self, state: str, q: QuestionSpec) -> LabelRead:
        dist = self._distribution(state, q)
        probs = [float(dist.get(o, 0.0)) for o in q.options]
        mass = self.label_mass
        logprobs = tuple(math.log(p * mass) if p > 0 else -math.inf for p in probs)
        return LabelRead(logprobs=logprobs, label_mass=mass, argmax_is_label=mass > 0.5)

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        with self._lock:
            self.calls.append(list(requests))
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        for r in requests:
            self._check_ids([q.id for q in r.questions])
        return [[self._answer(r.state, q) for q in r.questions] for r in requests]
