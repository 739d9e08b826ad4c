"""What the embedder compares a state with (each option's text, examples and
prototype), the option scores the similarities give (``combine``), and the read they
become at a temperature (shipped per type, or fitted on a question's examples)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.reads import LabelRead, QuestionSpec
from agentbranch.engine.calibration import golden_section


def prototypes(examples: Sequence[Sequence[str]], vecs: dict[str, Any]) -> list[Any]:
    """Each option's prototype: the L2-normalised mean of its example embeddings
    (``None`` for an option without examples)."""
    import torch

    return [
        torch.nn.functional.normalize(torch.stack([vecs[e] for e in ex]).mean(0), dim=0)
        if ex
        else None
        for ex in examples
    ]


@dataclass(frozen=True)
class Comparisons:
    """Everything a state is compared with for one question, stacked into one matrix
    (one product per read instead of one per text: every small torch operation gives
    the GIL away and must win it back), and where each option's part sits in it."""

    #: ``(rows, dim)`` embeddings: descriptions, examples, prototypes (``None``: no row).
    matrix: Any
    #: Row of each option's description (``None``: it has none).
    descriptions: tuple[int | None, ...]
    #: Rows ``[start, end)`` of each option's examples.
    examples: tuple[tuple[int, int], ...]
    #: Row of each option's prototype (``None``: it has no examples).
    prototypes: tuple[int | None, ...]

    @classmethod
    def of(
        cls, texts: Sequence[str | None], examples: Sequence[Sequence[str]], vecs: dict[str, Any]
    ) -> Comparisons:
        """The comparisons of options described by ``texts`` (``hypothesis_texts``)
        with ``examples`` (``option_examples``), from their embeddings ``vecs``."""
        import torch

        rows: list[Any] = []

        def add(vec: Any) -> int:
            rows.append(vec)
            return len(rows) - 1

        described = tuple(add(vecs[t]) if t else None for t in texts)
        spans = []
        for ex in examples:
            start = len(rows)
            rows.extend(vecs[e] for e in ex)
            spans.append((start, len(rows)))
        protos = tuple(add(p) if p is not None else None for p in prototypes(examples, vecs))
        matrix = torch.stack(rows) if rows else None
        return cls(matrix, described, tuple(spans), protos)

    def similarities(self, states: Any) -> list[list[float]]:
        """Each state's (``(n, dim)`` embeddings) similarity with every row."""
        return (states.to(self.matrix.dtype) @ self.matrix.T).tolist()

    def parts(
        self, sims: Sequence[float]
    ) -> tuple[list[float | None], list[list[float]], list[float | None]]:
        """One state's similarities (a row of ``similarities``) split per option: with
        its description, with each of its examples, with its prototype."""
        return (
            [sims[i] if i is not None else None for i in self.descriptions],
            [list(sims[a:b]) for a, b in self.examples],
            [sims[i] if i is not None else None for i in self.prototypes],
        )


def uniform(q: QuestionSpec, reason: str) -> LabelRead:
    """Every option equally likely: the reader has nothing to read (``reason``)."""
    n = len(q.options)
    return LabelRead(
        logprobs=tuple([-math.log(n)] * n), extras={"no_signal": reason, "temperature": None}
    )


def combine(
    description: Sequence[float | None],
    examples: Sequence[Sequence[float]],
    top_k: int = 3,
    example_weight: float = 0.7,
    prototypes: Sequence[float | None] | None = None,
    prototype_weight: float = 0.75,
    described: Sequence[bool] | None = None,
    full_weight_examples: int = 1,
) -> list[float]:
    """Per option: its example score (``prototype_weight`` × its prototype similarity +
    the rest × the mean of its ``top_k`` best example similarities; the top-k mean alone
    without ``prototypes``), blended with its description similarity by
    ``example_weight`` (whichever it has, when only one). An option ``described`` by a
    text of its own with fewer than ``full_weight_examples`` examples blends them by
    that share of ``example_weight`` (few examples are a weaker sign than a
    description). An option with neither scores -1 (the lowest cosine)."""
    out = []
    protos = list(prototypes) if prototypes is not None else [None] * len(description)
    own = list(described) if described is not None else [False] * len(description)
    for d, ex, p, has_text in zip(description, examples, protos, own):
        if ex:
            best = sorted(ex, reverse=True)[:top_k]
            e = sum(best) / len(best)
            if p is not None:
                e = prototype_weight * p + (1 - prototype_weight) * e
            w = example_weight
            if has_text:
                w *= min(1.0, len(ex) / full_weight_examples)
            out.append(e if d is None else w * e + (1 - w) * d)
        else:
            out.append(d if d is not None else -1.0)
    return out


def head_reads(q: QuestionSpec, states: Any, written: Any = None) -> list[LabelRead] | None:
    """The reads of ``q`` by its learned head (``QuestionSpec.head``) for ``states``
    (``(n, dim)`` embeddings), one matrix product for them all; a head that reads the
    question as written too (``LinearHead.written``) is given ``written``, the written
    read's option scores for the same states (``(n, len(q.options))``). ``None`` when
    ``q`` carries no head, or one that cannot read it (other options, another
    embedder's size, written scores it needs and does not have): then the question is
    read by similarity as written."""
    head = q.head
    if head is None or not head.reads(q.options) or states.shape[-1] != head.embedding_dim:
        return None
    x = states.detach().cpu().numpy()
    if head.written:
        if written is None or tuple(head.options) != tuple(q.options):
            return None
        import numpy as np

        with np.errstate(all="ignore"):  # (scores that are not finite read uniform)
            x = np.hstack([x, head.written * np.asarray(written, dtype=np.float64)])
    logp = head.log_probs(x, q.options)
    return [
        LabelRead(
            logprobs=tuple(row),
            extras={"source": "head", "head": head.digest, "calibrated": False},
        )
        for row in logp.tolist()
    ]


def label_read(scores: list[float], temperature: float, source: str) -> LabelRead:
    """The read of one question: the options' similarity ``scores`` at ``temperature``
    (``source``: where the temperature came from; fitted unless ``"explicit"``)."""
    return LabelRead(
        logprobs=tuple(log_softmax(scores, temperature)),
        label_mass=1.0,
        argmax_is_label=True,
        agreement=1.0,
        extras={
            "similarities": scores,
            "temperature": temperature,
            "source": source,
            # a fitted temperature (shipped, or leave-one-out on the examples)
            "calibrated": source != "explicit",
        },
    )


#: Bounds of every temperature this reader fits (on the similarity scale).
T_MIN, T_MAX = 0.005, 1.0


#: How many leave-one-out reads the shipped with-examples temperature is worth as a
#: prior (chosen on the benchmark; docs/quality.md).
PRIOR_WEIGHT = 3.0
#: What the with-examples temperatures (shipped and leave-one-out) minimise: the log
#: loss of the top answer's probability (docs/quality.md).
OBJECTIVE = "top_label"


def temperature_file() -> Path:
    return Path(__file__).with_name("embedded_temperatures.json")


def shipped_temperatures(with_examples: bool = False) -> dict[str, float]:
    """The per-type temperatures fitted on public labelled data
    (``benchmarks/embedded_calibration.py``; see docs/quality.md): for questions read
    by descriptions, or (``with_examples=True``) for questions with examples."""
    data = json.loads(temperature_file().read_text())
    key = "with_examples" if with_examples else "by_type"
    return {k: float(v) for k, v in data[key].items()}


def log_softmax(scores: Sequence[float], temperature: float) -> list[float]:
    """``log_softmax(scores / temperature)``."""
    scaled = [x / temperature for x in scores]
    top = max(scaled)
    log_z = top + math.log(sum(math.exp(x - top) for x in scaled))
    return [x - log_z for x in scaled]


def top_label_log_likelihood(row: Sequence[float], target: int, temperature: float) -> float:
    """Log-likelihood of whether the top answer of ``softmax(row / temperature)`` is
    ``target``: ``log p_top`` when it is, ``log(1 − p_top)`` when it is not (the log
    loss of the confidence in the top answer, what ECE and thresholds look at). For
    two options it is the log-likelihood of ``target``."""
    logp = log_softmax(row, temperature)
    top = max(range(len(logp)), key=logp.__getitem__)
    if top == target:
        return logp[top]
    rest = [x for i, x in enumerate(logp) if i != top]
    high = max(rest)
    return high + math.log(sum(math.exp(x - high) for x in rest))


def fit_temperature(
    rows: Sequence[Sequence[float]],
    targets: Sequence[int],
    prior: float | None = None,
    prior_weight: float = 1.0,
    objective: str = "nll",
) -> float:
    """The temperature in ``[T_MIN, T_MAX]`` minimising the mean NLL of ``targets`` under
    ``softmax(row / T)`` (golden-section search on log T).

    ``objective="top_label"``: minimise instead the log loss of the top answer's
    probability (``top_label_log_likelihood``), which the NLL trades for the split of
    the rest when wrong answers are confused evenly.

    ``prior``: a temperature to shrink towards, by a penalty
    ``prior_weight × (log T/prior)² / n`` (a Gaussian prior on log T worth about
    ``prior_weight`` observations), so a few examples that separate perfectly (or fail
    to by chance) do not fit T at a bound."""
    if objective not in ("nll", "top_label"):
        raise ConfigurationError(f"objective must be 'nll' or 'top_label', not {objective!r}")
    n = max(1, len(rows))

    def log_lik(r: Sequence[float], y: int, t: float) -> float:
        return (
            top_label_log_likelihood(r, y, t) if objective == "top_label" else log_softmax(r, t)[y]
        )

    def nll(log_t: float) -> float:
        t = math.exp(log_t)
        value = -sum(log_lik(r, y, t) for r, y in zip(rows, targets)) / n
        if prior is not None:
            value += prior_weight * (log_t - math.log(prior)) ** 2 / n
        return value

    a, b = math.log(T_MIN), math.log(T_MAX)
    if objective == "top_label":
        # Not always unimodal in log T (each read's loss is monotone, the sum need not
        # be): bracket the best of a coarse grid first.
        grid = [a + (b - a) * i / 40 for i in range(41)]
        i = min(range(41), key=lambda k: nll(grid[k]))
        a, b = grid[max(0, i - 1)], grid[min(40, i + 1)]
    a, b = golden_section(nll, a, b, steps=60)
    best = (a + b) / 2
    # The ends are candidates too (a monotone NLL sits on a bound).
    return math.exp(min((nll(x), x) for x in (best, math.log(T_MIN), math.log(T_MAX)))[1])


#: Word boundaries inside an identifier: ``AddToPlaylist``, ``getWeather``, ``URLCheck``.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _readable(name: str) -> str:
    """An option name as words (``add_to_playlist``, ``AddToPlaylist``, ``add-to-playlist``
    → ``add to playlist``): the embedder is uncased, so ``AddToPlaylist`` would read as
    one unknown word."""
    words = _CAMEL.sub(" ", name).replace("_", " ").replace("-", " ")
    return " ".join(words.split()) or name


def hypothesis_texts(q: QuestionSpec) -> list[str | None]:
    """The description text that stands for each option of ``q`` (``None``: none).

    Yes/no: the ``yes``/``no`` descriptions only; the question's instructions are not
    used (a question text attracts every state on its topic, whatever the answer)."""
    if q.type == "noul":
        yes_desc, no_desc = (q.descriptions + (None, None))[:2]
        return [yes_desc if option == "yes" else no_desc for option in q.options]
    if q.type == "score":
        return [_readable(o) for o in q.options]
    return [
        f"{_readable(o)}: {d}" if d else _readable(o) for o, d in zip(q.options, q.descriptions)
    ]


def option_examples(q: QuestionSpec) -> list[tuple[str, ...]]:
    """Each option's example texts (empty tuples when the question has none)."""
    return list(q.examples) if q.examples else [() for _ in q.options]


def option_texts(q: QuestionSpec) -> list[str]:
    """Every text ``q``'s options are compared with: descriptions, then examples."""
    return [t for t in hypothesis_texts(q) if t] + [e for ex in option_examples(q) for e in ex]


def missing_signal(q: QuestionSpec) -> str | None:
    """Why the embedder has nothing to read ``q`` by (``None``: it has something).

    Found from the question alone; a yes/no whose two descriptions embed alike is
    caught at read time (``EmbeddedReader``)."""
    examples = option_examples(q)
    if q.type == "noul":
        texts = hypothesis_texts(q)
        bare = [o for o, t, e in zip(q.options, texts, examples) if not t and not e]
        if bare:
            return (
                f"yes/no question {q.id!r} does not describe {' or '.join(bare)!s}: a "
                "sentence embedder cannot answer a bare question (it would follow the "
                "topic, not the answer). Describe both answers (yes_no(..., yes='...', "
                "no='...')) or give examples={'yes': [...], 'no': [...]}"
            )
    if q.type == "score":
        bare = [o for o, e in zip(q.options, examples) if not e and len(_readable(o).split()) < 3]
        if bare:
            return (
                f"score question {q.id!r} has bare-word levels {bare}: one or two words "
                "say too little for a sentence embedder. Describe each level as a "
                "situation ('calm, polite message') or give examples={level: [...]}"
            )
    return None


def described(q: QuestionSpec) -> list[bool]:
    """Which options have a description of their own (not just their name read as
    words): a yes/no answer's ``yes=``/``no=`` text, a choice option's description."""
    if q.type == "noul":
        return [t is not None for t in hypothesis_texts(q)]
    if q.type == "choice":
        return [d is not None for d in q.descriptions]
    return [False] * len(q.options)


__all__ = [
    "Comparisons",
    "combine",
    "head_reads",
    "label_read",
    "prototypes",
    "uniform",
    "OBJECTIVE",
    "PRIOR_WEIGHT",
    "fit_temperature",
    "log_softmax",
    "shipped_temperatures",
    "temperature_file",
    "top_label_log_likelihood",
    "described",
    "hypothesis_texts",
    "missing_signal",
    "option_examples",
    "option_texts",
]
