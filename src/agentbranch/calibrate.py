"""Calibration: fit temperatures on labelled examples, measure, suggest thresholds.

A reader's raw probabilities are rarely calibrated: a sentence embedder's softmax or a
one-step diffusion read can say 0.95 and be right 70% of the time. Temperature scaling
(``p_i ∝ p̃_i^(1/T)``, the rule ``DecisionEngine`` applies with a ``Calibration``) fixes
most of that with one number per question (or per question type) and never changes
which option wins, so accuracy is unchanged and confidence becomes trustworthy.

Labelled file format (JSON Lines, one object per line; see docs/calibration.md):

* an optional header line ``{"questions": {"<id>": <wire question>, ...}}`` defining
  named questions (wire questions are ``{"type": "choice"|"noul"|"score",
  "instructions": ..., "criteria": ...}`` as in ``/v1/systemone``);
* example lines ``{"state": <text or JSON>, "question": "<id>", "label": "<option>"}``;
  ``question`` may also be a wire question inline, with ``"id"`` naming it; or
  ``{"state": ..., "labels": {"<id>": "<option>", ...}}`` for several questions about
  one state (read in one request).

Common shapes work too: ``"text"`` or ``"input"`` instead of ``"state"``, and lines
without a question (``{"text": ..., "label": ...}``, as most labelled sets come) when a
``default_question`` id names the question they answer (``--question`` on the CLI).

Labels are option names; yes/no labels may be ``yes``/``no``/``true``/``false``; choice
and score labels may be the option (level) name or its 0-based index.

Metrics: accuracy; ECE (expected calibration error of the top probability, 10 equal
bins); Brier (multi-class, Σ (p_i − y_i)², averaged); NLL; and the confidence threshold
(on ``Decision.confidence = 1 − H/ln K``, what policies compare) that reaches a target
precision, with the coverage (share of decisions taken) it leaves.

Over 500 lines: fitting, labelled-file parsing and validation, the evaluation report and
the diagram; to be split into a calibration folder by the planned layout restructuring.
"""

from __future__ import annotations

import logging
import math
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from agentbranch.core.decisions import confidence_from
from agentbranch.core.errors import ConfigurationError, InvalidFileError, InvalidQuestionError
from agentbranch.core.files import json_lines, loads, short_repr
from agentbranch.core.questions import Question, coerce_question, to_spec
from agentbranch.engine.calibration import Calibration
from agentbranch.engine.plan import normalise

By = Literal["question", "type"]

#: The temperature search range of ``fit_temperature``.
T_LOW, T_HIGH = 0.02, 50.0

logger = logging.getLogger("agentbranch.calibration")

#: How the warning about a fit that made the evaluation split worse begins.
WORSE_FIT = "the fit makes"

# -- labelled data -------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """One labelled question about one state."""

    state: Any
    question_id: str
    question: Question
    label: str
    #: Line number in the source file (1-based), for error messages and grouping.
    line: int = 0


def _label_for(qid: str, question: Question, raw: Any, where: str) -> str:
    spec = to_spec(qid, question)
    options = list(spec.options)
    if spec.type == "noul":
        text = str(raw).strip().lower()
        mapped = {"yes": "yes", "true": "yes", "1": "yes", "no": "no", "false": "no", "0": "no"}
        if text in mapped:
            return mapped[text]
    elif (
        spec.type in ("score", "choice")  # integer class labels, as most datasets ship
        and not isinstance(raw, bool)
        and (isinstance(raw, int) or _DIGITS.fullmatch(str(raw)))
        and str(raw) not in options
        and 0 <= int(raw) < len(options)
    ):
        return options[int(raw)]
    if str(raw) in options:
        return str(raw)
    raise InvalidQuestionError(
        f"{where}: label {short_repr(raw)} is not an option of question {qid!r}; options: {options}"
    )


_DIGITS = re.compile(r"[0-9]+")

#: Keys a labelled line may hold its state under, in order of preference.
STATE_KEYS = ("state", "text", "input")

EXPECTED_SHAPES = (
    'expected JSON Lines, one object per line, such as {"state": "...", "question": "<id>", '
    '"label": "<option>"}, {"state": "...", "labels": {"<id>": "<option>"}}, or '
    '{"text": "...", "label": "<option>"} with the question named by --question ID '
    '(questions defined in a header line {"questions": {...}} or --questions FILE.json); '
    "see docs/calibration.md"
)


def _label(value: Any) -> Any:
    # An option's name or its 0-based index (yes/no also true/false): a list, an object
    # or 1.5 is refused rather than turned into a string.
    if not isinstance(value, str | int):  # bool is an int
        raise ValueError(
            f"a label is an option name (a string) or its 0-based index, got {short_repr(value)}"
        )
    return value


def _question_ref(value: Any) -> Any:
    if not isinstance(value, str | dict):
        raise ValueError(
            "a question is an id (a string) or an inline question object, got " + short_repr(value)
        )
    return value


Label = Annotated[Any, AfterValidator(_label)]


class HeaderLine(BaseModel):
    """``{"questions": {"<id>": <wire question>, ...}}``: names the questions."""

    model_config = ConfigDict(extra="forbid", strict=True)
    questions: dict[str, dict[str, Any]]


class ExampleLine(BaseModel):
    """One labelled line, its state already under ``state``. Other keys (a dataset's own
    columns) are ignored."""

    model_config = ConfigDict(extra="allow", strict=True)
    state: Any
    question: Annotated[Any, AfterValidator(_question_ref)] = None
    label: Label | None = None
    labels: dict[str, Label] | None = None


def _validated(model: type[BaseModel], obj: dict[str, Any], where: str) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        from agentbranch.core.audit_records import describe

        raise ConfigurationError(f"{where}: {describe(e)}; {EXPECTED_SHAPES}") from None


def _examples_from(
    numbered: Iterable[tuple[int, Any]],
    questions: Mapping[str, Any] | None,
    source: str,
    default_question: str | None,
) -> list[Example]:
    named: dict[str, Question] = {
        qid: coerce_question(qid, q) for qid, q in (questions or {}).items()
    }
    examples: list[Example] = []
    for number, obj in numbered:
        where = f"{source}:{number}"
        if not isinstance(obj, dict):
            raise ConfigurationError(f"{where}: each line must be a JSON object; {EXPECTED_SHAPES}")
        key = next((k for k in STATE_KEYS if k in obj), None)
        if "questions" in obj and key is None:
            for qid, q in _validated(HeaderLine, obj, where).questions.items():
                named[qid] = _question(qid, q, where)
            continue
        if key is None:
            raise ConfigurationError(
                f"{where}: no state ('state', 'text' or 'input'); found keys {sorted(obj)}; "
                + EXPECTED_SHAPES
            )
        line = _validated(ExampleLine, {**obj, "state": obj[key]}, where)
        if line.labels is not None:
            pairs: list[tuple[Any, Any]] = list(line.labels.items())
        elif line.question is not None and line.label is not None:
            pairs = [(line.question, line.label)]
        elif line.label is not None and default_question:
            pairs = [(default_question, line.label)]
        elif line.label is not None:
            raise ConfigurationError(
                f"{where}: a label without a question; name the question these lines answer "
                '(--question ID, or default_question=) or add "question": "<id>" to each line'
            )
        else:
            raise ConfigurationError(f"{where}: no label; {EXPECTED_SHAPES}")
        for ref, raw in pairs:
            if isinstance(ref, Mapping):
                qid = obj.get("id") or ref.get("id") or ""
                if not isinstance(qid, str) or not qid.strip():
                    raise ConfigurationError(
                        f"{where}: an inline question needs an 'id' (a non-empty string)"
                    )
                question = _question(qid, {k: v for k, v in ref.items() if k != "id"}, where)
                named.setdefault(qid, question)
            else:
                qid = str(ref)
                if qid not in named:
                    raise ConfigurationError(
                        f"{where}: unknown question {qid!r}; define it in a header line "
                        '{"questions": {...}} or pass --questions FILE.json'
                    )
                question = named[qid]
            examples.append(
                Example(line.state, qid, question, _label_for(qid, question, raw, where), number)
            )
    if not examples:
        raise ConfigurationError(f"{source}: no labelled examples found")
    return examples


def _question(qid: str, spec: Any, where: str) -> Question:
    try:
        return coerce_question(qid, spec)
    except InvalidQuestionError as e:
        raise InvalidQuestionError(f"{where}: {e}") from None


def parse_labelled(
    lines: Iterable[str],
    questions: Mapping[str, Any] | None = None,
    *,
    source: str = "<data>",
    default_question: str | None = None,
) -> list[Example]:
    """Examples from JSON Lines text (see the module doc for the format). Every line is
    checked (``HeaderLine``, ``ExampleLine``); errors name ``source``, the line and the
    field."""

    def numbered() -> Iterator[tuple[int, Any]]:
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if line and not line.startswith("//"):
                yield number, loads(line, f"{source}:{number}")

    try:
        return _examples_from(numbered(), questions, source, default_question)
    except InvalidFileError as e:
        raise ConfigurationError(f"{e}; {EXPECTED_SHAPES}") from None


def load_labelled(
    path: str | Path,
    questions: Mapping[str, Any] | None = None,
    *,
    default_question: str | None = None,
) -> list[Example]:
    """Examples from a labelled JSON Lines file, streamed and checked line by line; a
    file that cannot be read as one is an ``InvalidFileError`` naming it."""
    path = Path(path)
    if path.suffix.lower() in (".csv", ".tsv", ".parquet", ".xlsx"):
        raise InvalidFileError(f"{path}: {path.suffix} is not read; {EXPECTED_SHAPES}")
    return _examples_from(json_lines(path, "labelled file"), questions, str(path), default_question)


def split(
    examples: Sequence[Example], holdout: float, *, seed: int = 0
) -> tuple[list[Example], list[Example]]:
    """A deterministic (fit, held-out) split, stratified by question id and label.
    Examples from one source line stay on one side."""
    if not (isinstance(holdout, int | float) and 0.0 <= holdout < 1.0):
        raise ConfigurationError(f"holdout must be in [0, 1), got {holdout!r}")
    if holdout == 0.0:
        return list(examples), []
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    lines: dict[int, list[Example]] = defaultdict(list)
    for i, ex in enumerate(examples):
        key = ex.line or -(i + 1)
        if key not in lines:
            groups[(ex.question_id, ex.label)].append(key)
        lines[key].append(ex)
    rng = random.Random(seed)
    held: set[int] = set()
    for key in sorted(groups):
        keys = sorted(set(groups[key]) - held)
        rng.shuffle(keys)
        held.update(keys[: round(len(keys) * holdout)])
    fit = [ex for k, exs in lines.items() if k not in held for ex in exs]
    test = [ex for k, exs in lines.items() if k in held for ex in exs]
    return fit, test


# -- reading ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    """One example read by the engine, uncalibrated."""

    question_id: str
    type: str
    options: tuple[str, ...]
    probs: tuple[float, ...]
    label_index: int


def read_examples(
    engine: Any,
    examples: Sequence[Example],
    *,
    batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
) -> list[Scored]:
    """Read every example with ``engine`` ignoring its calibration (temperature 1),
    batched: one ``decide_many`` per ``batch_size`` states; questions about the same
    source line share one request."""
    import copy

    raw = copy.copy(engine)
    raw.calibration = None
    # Group examples of one line (same state) into one request.
    requests: list[tuple[Any, dict[str, Question], list[Example]]] = []
    by_line: dict[int, int] = {}
    for i, ex in enumerate(examples):
        key = ex.line or -(i + 1)
        if key in by_line and ex.question_id not in requests[by_line[key]][1]:
            requests[by_line[key]][1][ex.question_id] = ex.question
            requests[by_line[key]][2].append(ex)
            continue
        by_line[key] = len(requests)
        requests.append((ex.state, {ex.question_id: ex.question}, [ex]))
    scored: list[Scored] = []
    for start in range(0, len(requests), batch_size):
        chunk = requests[start : start + batch_size]
        results = raw.decide_many([c[0] for c in chunk], [c[1] for c in chunk])
        for (_, _, exs), decisions in zip(chunk, results):
            for ex in exs:
                d = decisions[ex.question_id]
                scored.append(
                    Scored(
                        ex.question_id,
                        d.type,
                        tuple(d.options),
                        tuple(d.probs),
                        d.options.index(ex.label),
                    )
                )
        if progress is not None:
            progress(len(chunk))
    return scored


# -- temperature --------------------------------------------------------------------


def apply_temperature(probs: Sequence[float], temperature: float) -> list[float]:
    """``p_i ∝ p_i^(1/T)``, exactly as the engine applies a ``Calibration``."""
    out = normalise(probs, temperature)
    if out is None:
        return [1.0 / len(probs)] * len(probs)
    return out


def _log_probs_at(scored: Sequence[Scored], temperature: float) -> list[float]:
    """log p(true label) at ``temperature`` for each example."""
    out = []
    for s in scored:
        logs = [math.log(p) / temperature if p > 0 else -math.inf for p in s.probs]
        top = max(logs)
        log_z = top + math.log(sum(math.exp(x - top) for x in logs if x > -math.inf))
        out.append(logs[s.label_index] - log_z)
    return out


def nll(scored: Sequence[Scored], temperature: float = 1.0) -> float:
    """Mean negative log-likelihood of the true labels (capped at 50 nats each)."""
    if not scored:
        return float("nan")
    return sum(min(50.0, -lp) for lp in _log_probs_at(scored, temperature)) / len(scored)


def fit_temperature(
    scored: Sequence[Scored], *, low: float = T_LOW, high: float = T_HIGH, tol: float = 1e-4
) -> float:
    """The temperature minimising NLL: a log-spaced grid, then golden-section search
    around the best grid point. 1.0 when there is nothing to fit."""
    if not scored:
        return 1.0
    a, b = math.log(low), math.log(high)
    grid = [a + (b - a) * i / 60 for i in range(61)]
    losses = [nll(scored, math.exp(x)) for x in grid]
    if max(losses) - min(losses) < 1e-9:
        return high  # uniform reads: no signal, nothing a temperature can sharpen
    best = min(range(len(grid)), key=losses.__getitem__)
    lo, hi = grid[max(0, best - 1)], grid[min(len(grid) - 1, best + 1)]
    ratio = (math.sqrt(5) - 1) / 2
    c, d = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fc, fd = nll(scored, math.exp(c)), nll(scored, math.exp(d))
    while hi - lo > tol:
        if fc < fd:
            hi, d, fd = d, c, fc
            c = hi - ratio * (hi - lo)
            fc = nll(scored, math.exp(c))
        else:
            lo, c, fc = c, d, fd
            d = lo + ratio * (hi - lo)
            fd = nll(scored, math.exp(d))
    x = (lo + hi) / 2
    return math.exp(x) if nll(scored, math.exp(x)) <= losses[best] else math.exp(grid[best])


def fit(scored: Sequence[Scored], *, by: By = "question", min_examples: int = 10) -> Calibration:
    """A ``Calibration``: a temperature per question type, and with ``by="question"`` one
    per question id that has at least ``min_examples`` examples (others use their type's)."""
    if by not in ("question", "type"):
        raise ConfigurationError("by must be 'question' or 'type'")
    by_type: dict[str, list[Scored]] = defaultdict(list)
    by_id: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        by_type[s.type].append(s)
        by_id[s.question_id].append(s)
    calibration = Calibration(by_type={t: fit_temperature(g) for t, g in by_type.items()})
    if by == "question":
        calibration.temperatures = {
            q: fit_temperature(g) for q, g in by_id.items() if len(g) >= min_examples
        }
    return calibration


def calibrated(scored: Sequence[Scored], calibration: Calibration | None) -> list[Scored]:
    """``scored`` with the calibration's temperatures applied."""
    if calibration is None:
        return list(scored)
    return [
        Scored(
            s.question_id,
            s.type,
            s.options,
            tuple(apply_temperature(s.probs, calibration.temperature(s.question_id, s.type))),
            s.label_index,
        )
        for s in scored
    ]


# -- metrics ------------------------------------------------------------------------


@dataclass(frozen=True)
class Threshold:
    """The lowest confidence threshold whose kept decisions reach the target precision."""

    target_precision: float
    threshold: float | None  # None: no threshold reaches the target
    coverage: float  # share of decisions at or above the threshold
    precision: float  # precision of those decisions (nan when none kept)


@dataclass(frozen=True)
class Metrics:
    n: int
    accuracy: float
    ece: float
    brier: float
    nll: float
    mean_confidence: float
    threshold: Threshold

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN becomes ``None``)."""
        return {
            k: None if isinstance(v, float) and math.isnan(v) else v
            for k, v in self._fields().items()
        }

    def _fields(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "accuracy": self.accuracy,
            "ece": self.ece,
            "brier": self.brier,
            "nll": self.nll,
            "mean_confidence": self.mean_confidence,
            "target_precision": self.threshold.target_precision,
            "threshold": self.threshold.threshold,
            "coverage": self.threshold.coverage,
            "precision_at_threshold": self.threshold.precision,
        }


def _top(s: Scored) -> int:
    return max(range(len(s.probs)), key=s.probs.__getitem__)


def ece(scored: Sequence[Scored], bins: int = 10) -> float:
    """Expected calibration error of the top probability over ``bins`` equal-width bins."""
    if not scored:
        return float("nan")
    totals = [[0, 0.0, 0.0] for _ in range(bins)]  # count, Σ p_top, Σ correct
    for s in scored:
        top = _top(s)
        p = s.probs[top]
        b = min(bins - 1, int(p * bins))
        totals[b][0] += 1
        totals[b][1] += p
        totals[b][2] += float(top == s.label_index)
    return sum(abs(c - p) for n, p, c in totals if n) / len(scored)


def brier(scored: Sequence[Scored]) -> float:
    """Multi-class Brier score, averaged over examples."""
    if not scored:
        return float("nan")
    return sum(
        sum((p - (i == s.label_index)) ** 2 for i, p in enumerate(s.probs)) for s in scored
    ) / len(scored)


def suggest_threshold(
    confidences: Sequence[float], correct: Sequence[bool], target_precision: float
) -> Threshold:
    """The lowest confidence threshold at which the decisions kept (confidence ≥ it)
    are correct at least ``target_precision`` of the time: maximum coverage."""
    pairs = sorted(zip(confidences, correct), key=lambda x: -x[0])
    best: Threshold = Threshold(target_precision, None, 0.0, float("nan"))
    hits = 0
    for k, (conf, ok) in enumerate(pairs, 1):
        hits += ok
        if k < len(pairs) and pairs[k][0] == conf:
            continue  # a threshold keeps every tie
        if hits / k >= target_precision:
            best = Threshold(target_precision, conf, k / len(pairs), hits / k)
    return best


def metrics(scored: Sequence[Scored], *, target_precision: float = 0.9, bins: int = 10) -> Metrics:
    """Accuracy, ECE, Brier, NLL and the target-precision threshold of ``scored``."""
    n = len(scored)
    if n == 0:
        nan = float("nan")
        return Metrics(0, nan, nan, nan, nan, nan, Threshold(target_precision, None, 0.0, nan))
    correct = [_top(s) == s.label_index for s in scored]
    confidences = [confidence_from(s.probs) for s in scored]
    return Metrics(
        n=n,
        accuracy=sum(correct) / n,
        ece=ece(scored, bins),
        brier=brier(scored),
        nll=nll(scored),
        mean_confidence=sum(confidences) / n,
        threshold=suggest_threshold(confidences, correct, target_precision),
    )


def check_threshold(
    scored: Sequence[Scored], threshold: float | None, target_precision: float
) -> Threshold:
    """Coverage and precision of a given threshold on ``scored`` (e.g. a held-out split)."""
    if threshold is None or not scored:
        return Threshold(target_precision, threshold, 0.0, float("nan"))
    kept = [_top(s) == s.label_index for s in scored if confidence_from(s.probs) >= threshold]
    return Threshold(
        target_precision,
        threshold,
        len(kept) / len(scored),
        sum(kept) / len(kept) if kept else float("nan"),
    )


# -- the whole job ------------------------------------------------------------------


@dataclass
class Report:
    """What ``calibrate`` found: the calibration, and metrics before and after it on the
    evaluation split (the held-out split, or the fit split when there is none)."""

    calibration: Calibration
    before: Metrics
    after: Metrics
    per_question: dict[str, tuple[Metrics, Metrics]]
    #: The suggested thresholds (fit split, calibrated) checked on the evaluation split.
    held_out_thresholds: dict[str, Threshold]
    n_fit: int
    n_eval: int
    held_out: bool
    eval_before: list[Scored] = field(repr=False, default_factory=list)
    eval_after: list[Scored] = field(repr=False, default_factory=list)
    #: Fits that hit a bound of the temperature search, and a fit that made the
    #: evaluation split worse, said plainly.
    warnings: list[str] = field(default_factory=list)

    @property
    def worse(self) -> bool:
        """Whether the calibration made both ECE and Brier worse on the evaluation split:
        such a fit should not replace the calibration in use (``agentbranch calibrate``
        refuses to save it without ``--force``)."""
        return _worse(self.before, self.after)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calibration": self.calibration.model_dump(),
            "warnings": list(self.warnings),
            "worse": self.worse,
            "n_fit": self.n_fit,
            "n_eval": self.n_eval,
            "held_out": self.held_out,
            "before": self.before.as_dict(),
            "after": self.after.as_dict(),
            "per_question": {
                q: {"before": b.as_dict(), "after": a.as_dict()}
                for q, (b, a) in self.per_question.items()
            },
        }


def _per_question(
    before: Sequence[Scored],
    after: Sequence[Scored],
    calibration: Calibration,
    target_precision: float,
) -> tuple[dict[str, tuple[Metrics, Metrics]], dict[str, Threshold]]:
    """Per question: metrics before and after calibration, and its stored threshold
    checked on the calibrated reads."""
    per_question: dict[str, tuple[Metrics, Metrics]] = {}
    thresholds: dict[str, Threshold] = {}
    for qid in dict.fromkeys(s.question_id for s in before):
        b = [s for s in before if s.question_id == qid]
        a = [s for s in after if s.question_id == qid]
        per_question[qid] = (
            metrics(b, target_precision=target_precision),
            metrics(a, target_precision=target_precision),
        )
        thresholds[qid] = check_threshold(a, calibration.thresholds.get(qid), target_precision)
    return per_question, thresholds


def calibrate_scored(
    fit_scored: Sequence[Scored],
    eval_scored: Sequence[Scored] | None = None,
    *,
    by: By = "question",
    target_precision: float = 0.9,
    min_examples: int = 10,
) -> Report:
    """Fit on ``fit_scored``; measure on ``eval_scored`` (or the fit set when ``None``).
    Suggested thresholds (per question id, on calibrated confidence) come from the fit
    set and are stored in ``calibration.thresholds``. A fit that makes both ECE and
    Brier worse on the evaluation split is logged as a warning (logger
    ``agentbranch.calibration``) and in ``Report.warnings``; ``Report.worse`` says so."""
    _check_settings(target_precision, min_examples)
    if not fit_scored:
        raise ConfigurationError(
            "nothing to fit: every example went to the held-out split; lower the holdout "
            "share or add labelled examples"
        )
    calibration = fit(fit_scored, by=by, min_examples=min_examples)
    fit_after = calibrated(fit_scored, calibration)
    groups: dict[str, list[Scored]] = defaultdict(list)
    for s in fit_after:
        groups[s.question_id].append(s)
    for qid, group in groups.items():
        t = metrics(group, target_precision=target_precision).threshold
        if t.threshold is not None:
            calibration.thresholds[qid] = round(t.threshold, 4)
    held_out = eval_scored is not None and len(eval_scored) > 0
    ev = list(eval_scored) if held_out else list(fit_scored)
    ev_after = calibrated(ev, calibration)
    per_question, thresholds = _per_question(ev, ev_after, calibration, target_precision)
    before = metrics(ev, target_precision=target_precision)
    after = metrics(ev_after, target_precision=target_precision)
    warnings = bound_warnings(calibration)
    if _worse(before, after):
        split_name = "held-out" if held_out else "fitted"
        warnings.append(
            f"{WORSE_FIT} the {split_name} examples worse: ECE {before.ece:.3f} → "
            f"{after.ece:.3f}, Brier {before.brier:.3f} → {after.brier:.3f}. Keep the "
            "calibration you have (or none) and collect more labelled examples or audits "
            "before fitting again"
        )
        logger.warning("agentbranch.calibrate: %s", warnings[-1])
    return Report(
        warnings=warnings,
        calibration=calibration,
        before=before,
        after=after,
        per_question=per_question,
        held_out_thresholds=thresholds,
        n_fit=len(fit_scored),
        n_eval=len(ev),
        held_out=held_out,
        eval_before=ev,
        eval_after=ev_after,
    )


def _worse(before: Metrics, after: Metrics) -> bool:
    # NaN (no examples) compares False: nothing measured is not "worse".
    return after.ece > before.ece and after.brier > before.brier


def _check_settings(target_precision: float, min_examples: int) -> None:
    if not (isinstance(target_precision, int | float) and 0.0 < target_precision <= 1.0):
        raise ConfigurationError(f"target_precision must be in (0, 1], got {target_precision!r}")
    if isinstance(min_examples, bool) or not isinstance(min_examples, int) or min_examples < 1:
        raise ConfigurationError(f"min_examples must be a whole number >= 1, got {min_examples!r}")


def bound_warnings(calibration: Calibration) -> list[str]:
    """One sentence per fitted temperature at a bound of the search: at the top the
    reader had no signal for that question (every answer gets flattened to uniform),
    at the bottom the fit wanted sharper reads than the search allows."""
    out = []
    fitted = [("question", q, t) for q, t in calibration.temperatures.items()]
    fitted += [("questions of type", q, t) for q, t in calibration.by_type.items()]
    for kind, name, t in fitted:
        if t >= T_HIGH * 0.99:
            out.append(
                f"no signal for {kind} {name!r}: its temperature hit the upper bound "
                f"(T = {T_HIGH:g}), so its answers are flattened to near-uniform. Add "
                "examples or descriptions to the question (or use a stronger reader)"
            )
        elif t <= T_LOW * 1.01:
            out.append(
                f"{kind} {name!r}: temperature hit the lower bound (T = {T_LOW:g}); the "
                "reader is far under-confident there or the labelled set is too easy/small"
            )
    return out


def evaluate(
    engine: Any,
    examples: Sequence[Example],
    calibration: Calibration | None,
    *,
    target_precision: float = 0.9,
    progress: Callable[[int], None] | None = None,
) -> Report:
    """Score an existing ``calibration`` (``None``: the engine's own) on ``examples``
    without fitting anything: metrics of the raw reads (before) and of the calibrated
    ones (after), and the calibration's stored thresholds checked on them."""
    _check_settings(target_precision, 1)
    calibration = calibration if calibration is not None else engine.calibration
    calibration = calibration if calibration is not None else Calibration()
    scored = read_examples(engine, examples, progress=progress)
    after = calibrated(scored, calibration)
    per_question, thresholds = _per_question(scored, after, calibration, target_precision)
    m_before = metrics(scored, target_precision=target_precision)
    m_after = metrics(after, target_precision=target_precision)
    warnings = bound_warnings(calibration)
    if _worse(m_before, m_after):
        warnings.append(
            f"this calibration makes these examples worse than the raw reads: ECE "
            f"{m_before.ece:.3f} → {m_after.ece:.3f}, Brier {m_before.brier:.3f} → "
            f"{m_after.brier:.3f}; refit it on labels like these"
        )
    return Report(
        calibration=calibration,
        before=m_before,
        after=m_after,
        per_question=per_question,
        held_out_thresholds=thresholds,
        n_fit=0,
        n_eval=len(scored),
        held_out=True,
        eval_before=scored,
        eval_after=after,
        warnings=warnings,
    )


def calibrate(
    engine: Any,
    examples: Sequence[Example],
    *,
    by: By = "question",
    holdout: float = 0.3,
    target_precision: float = 0.9,
    seed: int = 0,
    min_examples: int = 10,
    progress: Callable[[int], None] | None = None,
) -> Report:
    """Read ``examples`` with ``engine`` (uncalibrated, batched), fit temperatures on a
    split and report before/after on the held-out part."""
    _check_settings(target_precision, min_examples)
    fit_ex, test_ex = split(examples, holdout, seed=seed)
    scored = read_examples(engine, list(fit_ex) + list(test_ex), progress=progress)
    return calibrate_scored(
        scored[: len(fit_ex)],
        scored[len(fit_ex) :] or None,
        by=by,
        target_precision=target_precision,
        min_examples=min_examples,
    )


def reliability_diagram(
    before: Sequence[Scored],
    after: Sequence[Scored] | None,
    path: str | Path,
    *,
    bins: int = 10,
    title: str = "Reliability",
) -> Path:
    """A PNG reliability diagram (accuracy vs top probability per bin), before and
    after calibration side by side."""
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= 1000:
        raise ConfigurationError(f"bins must be a whole number from 1 to 1000, got {bins!r}")
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    panels = [("before", before)] + ([("after", after)] if after is not None else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.6), squeeze=False)
    for ax, (name, scored) in zip(axes[0], panels):
        counts = [0] * bins
        conf = [0.0] * bins
        acc = [0.0] * bins
        for s in scored:
            top = _top(s)
            b = min(bins - 1, int(s.probs[top] * bins))
            counts[b] += 1
            conf[b] += s.probs[top]
            acc[b] += float(top == s.label_index)
        centers = [(i + 0.5) / bins for i in range(bins)]
        heights = [acc[i] / counts[i] if counts[i] else 0.0 for i in range(bins)]
        ax.bar(centers, heights, width=1 / bins, edgecolor="black", alpha=0.75, label="accuracy")
        gaps = [conf[i] / counts[i] if counts[i] else 0.0 for i in range(bins)]
        ax.plot(
            [c for c, n in zip(centers, counts) if n],
            [g for g, n in zip(gaps, counts) if n],
            "o",
            color="tab:red",
            label="mean top probability",
        )
        ax.plot([0, 1], [0, 1], "--", color="gray", label="perfect calibration")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("top probability")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{title}: {name} (ECE {ece(scored, bins):.3f}, n={len(scored)})")
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
