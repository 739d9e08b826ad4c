"""The token-level forward of DiffusionGemma in HF transformers (docs/design.md).

``TransformersTokenBackend`` turns ``TokenRead``s into ``SlotLogprobs`` (token ids in,
label logprobs out); ``TransformersReader`` is the reader on it.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentbranch.core.errors import ConfigurationError, ReaderError, StateTooLongError
from agentbranch.core.reads import QuestionSpec, ReadRequest, SlotLogprobs, TokenRead
from agentbranch.engine.canvas import CanvasPlanner, SpecialTokens
from agentbranch.engine.readers.canvas_reader import TokenReader
from agentbranch.engine.readers.threads import Threads, resolve_threads, torch_threads

if TYPE_CHECKING:
    import torch

    from agentbranch.engine.readers.transformers_generation import TransformersGenerator

__all__ = ["TransformersReader", "TransformersTokenBackend"]


def _refuse_causal(folder: Path) -> None:
    """Refuse a folder whose ``config.json`` names no block-diffusion model before torch
    fails deep in the load."""
    import json

    try:
        config = json.loads((folder / "config.json").read_text("utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigurationError(f"{folder}/config.json is not readable JSON: {e}") from e
    if isinstance(config, dict) and "canvas_length" not in config:
        kind = config.get("model_type") or "non-diffusion"
        raise ConfigurationError(
            f"{folder} holds a {kind} model, and TransformersReader reads DiffusionGemma "
            "checkpoints only: generate with it through LocalChatModel(model=folder) and "
            "read decisions with the embedded reader (DecisionEngine.from_env()) or "
            "VLLMReader."
        )


class TransformersTokenBackend:
    """DiffusionGemma one-step reads with HF transformers (CPU by default).

    ``model`` is a local checkpoint folder or an already loaded model (then ``tokenizer``
    is required). ``max_model_len`` caps prompt + canvas (default: the text config's
    ``max_position_embeddings``); ``max_batch_size`` splits large batches into several
    forwards. ``bucket_padding`` groups reads of similar prompt length into separate
    forwards so left padding stays under that fraction of the real tokens: ``"auto"`` is
    0.25 on CPU (docs/benchmarks.md) and off on a GPU; ``None`` turns it off.
    ``threads``: the torch thread count around this backend's forwards (``"auto"``, an
    int, or ``None`` for torch's own). Calls are serialised by a lock.

    One read is the first denoising step without self-conditioning, at temperature 1; a
    batch is ONE padded forward whose reads equal single reads to ~1e-6 in float32
    (docs/design.md, "The read", says how).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | Any,
        tokenizer: Any | None = None,
        *,
        dtype: Any = None,
        device: str | Any = "cpu",
        max_model_len: int | None = None,
        max_batch_size: int | None = None,
        bucket_padding: float | str | None = "auto",
        attn_implementation: str | None = "sdpa",
        model_id: str | None = None,
        threads: Threads = "auto",
    ) -> None:
        import torch

        self.threads = resolve_threads(threads)
        if isinstance(model, (str, os.PathLike)):
            folder = Path(model)
            if not (folder / "config.json").is_file():
                raise ConfigurationError(
                    f"{folder} is not a local checkpoint folder (no config.json); pass the path "
                    "of a saved DiffusionGemma checkpoint, e.g. one from "
                    "agentbranch.testing.build_tiny_diffusiongemma"
                )
            _refuse_causal(folder)
            from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

            kwargs: dict[str, Any] = {"dtype": dtype or torch.float32}
            if attn_implementation is not None:
                kwargs["attn_implementation"] = attn_implementation
            from agentbranch.engine.quiet_loads import quiet_loads

            with quiet_loads():  # transformers' "Loading weights" bar: the library never prints
                model = DiffusionGemmaForBlockDiffusion.from_pretrained(folder, **kwargs)
                if tokenizer is None:
                    tokenizer = AutoTokenizer.from_pretrained(folder)
            model_id = model_id or folder.resolve().name
        else:
            if tokenizer is None:
                raise ConfigurationError(
                    "pass the tokenizer together with an already loaded model "
                    "(TransformersTokenBackend(model, tokenizer))"
                )
            if dtype is not None:
                model = model.to(dtype=dtype)
        if not hasattr(model.config, "canvas_length") or not hasattr(model, "model"):
            raise ConfigurationError(
                f"{type(model).__name__} is not a DiffusionGemmaForBlockDiffusion; the "
                "transformers token backend reads block-diffusion canvases only"
            )
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        text_config = self.model.config.get_text_config()
        self.vocab_size: int = int(text_config.vocab_size)
        self.served_canvas: int = int(self.model.config.canvas_length)
        limit = int(text_config.max_position_embeddings)
        self.max_model_len: int = min(limit, max_model_len) if max_model_len else limit
        self.max_batch_size = max_batch_size
        if bucket_padding == "auto":
            bucket_padding = 0.25 if self.device.type == "cpu" else None
        if isinstance(bucket_padding, str) or (bucket_padding is not None and bucket_padding < 0):
            raise ConfigurationError(
                "bucket_padding must be 'auto', None or a non-negative fraction, e.g. 0.25"
            )
        self.bucket_padding = bucket_padding
        self.pad_token_id: int = int(text_config.pad_token_id or 0)
        name = str(getattr(self.model.config, "_name_or_path", "") or "")
        self.model_id: str = model_id or (Path(name).name if name else type(self.model).__name__)
        self._softcap = getattr(self.model, "final_logit_softcapping", None)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reads

    def read_tokens(self, reads: Sequence[TokenRead]) -> list[list[SlotLogprobs]]:
        """``result[i][j]`` is slot ``j`` of ``reads[i]``: label logprobs at temperature 1
        over the full vocabulary, one forward per group (``_groups``)."""
        reads = list(reads)
        for read in reads:
            self._validate(read)
        if not reads:
            return []
        out: list[list[SlotLogprobs]] = [[] for _ in reads]
        with self._lock, torch_threads(self.threads):
            for group in self._groups(reads):
                for i, slots in zip(group, self._read_batch([reads[i] for i in group])):
                    out[i] = slots
        return out

    def _groups(self, reads: Sequence[TokenRead]) -> list[list[int]]:
        """Indices of the reads each forward runs: at most ``max_batch_size``, and with
        ``bucket_padding`` reads of similar prompt length together."""
        step = self.max_batch_size or len(reads)
        if self.bucket_padding is None:
            return [list(range(i, min(i + step, len(reads)))) for i in range(0, len(reads), step)]
        order = sorted(range(len(reads)), key=lambda i: len(reads[i].prompt_ids))
        groups: list[list[int]] = []
        total = 0
        for i in order:
            n = len(reads[i].prompt_ids)  # the longest so far: the order is ascending
            group = groups[-1] if groups else []
            fits = (
                group
                and len(group) < step
                and n * (len(group) + 1) <= (1 + self.bucket_padding) * (total + n)
            )
            if fits:
                group.append(i)
                total += n
            else:
                groups.append([i])
                total = n
        return groups

    def canvas_logprobs(self, reads: Sequence[TokenRead]) -> list[torch.Tensor]:
        """Full-vocabulary logprobs (temperature 1) at every canvas position of each read,
        ``(len(read.canvas), vocab_size)`` float32 on CPU, for diagnostics and tests."""
        reads = list(reads)
        for read in reads:
            self._validate(read)
        if not reads:
            return []
        with self._lock, torch_threads(self.threads):
            hidden = self._hidden(reads)
            return [self._logprobs(hidden[i, : len(r.canvas)]).cpu() for i, r in enumerate(reads)]

    # -------------------------------------------------------------- internals

    def _validate(self, read: TokenRead) -> None:
        if not read.prompt_ids:
            raise ReaderError("a token read has no prompt ids; the encoder needs at least one")
        if not read.canvas:
            raise ReaderError(
                "a token read has an empty canvas: DiffusionGemma reads need a seeded canvas "
                "(next-token reads are for causal models)"
            )
        if len(read.canvas) > self.served_canvas:
            raise ReaderError(
                f"canvas of {len(read.canvas)} tokens is wider than the served canvas "
                f"({self.served_canvas}); plan narrower canvases or chunk the questions"
            )
        total = len(read.prompt_ids) + len(read.canvas)
        if total > self.max_model_len:
            raise StateTooLongError(
                f"prompt ({len(read.prompt_ids)} tokens) plus canvas ({len(read.canvas)}) is "
                f"{total} tokens, more than max_model_len={self.max_model_len}; shorten the "
                "state or raise max_model_len"
            )
        ids = (
            *read.prompt_ids,
            *read.canvas,
            *(t for s in read.slots for g in s.label_ids for t in g),
        )
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ReaderError(
                f"token ids {bad[:5]} are outside the vocabulary (0..{self.vocab_size - 1}); "
                "the tokenizer does not match the model"
            )
        for slot in read.slots:
            if not 0 <= slot.position < len(read.canvas):
                raise ReaderError(
                    f"slot position {slot.position} is outside the canvas of {len(read.canvas)}"
                )

    def _hidden(self, reads: Sequence[TokenRead]) -> torch.Tensor:
        """Decoder hidden states ``(B, max canvas, hidden)`` of one padded forward."""
        import torch

        b = len(reads)
        lens = [len(r.prompt_ids) for r in reads]
        widths = [len(r.canvas) for r in reads]
        s, c = max(lens), max(widths)
        pad = self.pad_token_id
        input_ids = torch.full((b, s), pad, dtype=torch.long)
        canvas = torch.full((b, c), pad, dtype=torch.long)
        for i, r in enumerate(reads):
            input_ids[i, s - lens[i] :] = torch.tensor(r.prompt_ids, dtype=torch.long)
            canvas[i, : widths[i]] = torch.tensor(r.canvas, dtype=torch.long)
        kwargs: dict[str, Any] = {}
        if len(set(lens)) > 1 or len(set(widths)) > 1:
            ar_s, ar_c = torch.arange(s), torch.arange(c)
            lens_t = torch.tensor(lens)[:, None]
            prompt_mask = ar_s[None, :] >= (s - lens_t)  # left padding
            canvas_mask = ar_c[None, :] < torch.tensor(widths)[:, None]  # right padding
            kwargs = {
                "attention_mask": prompt_mask.long(),
                "position_ids": (ar_s[None, :] - (s - lens_t)).clamp(min=0),
                "decoder_attention_mask": torch.cat([prompt_mask, canvas_mask], dim=1).long(),
                "decoder_position_ids": lens_t + ar_c[None, :],
            }
        dev = self.device
        with torch.inference_mode():
            out = self.model.model(
                input_ids=input_ids.to(dev),
                decoder_input_ids=canvas.to(dev),
                **{k: v.to(dev) for k, v in kwargs.items()},
            )
        return out.last_hidden_state

    def _logprobs(self, hidden: torch.Tensor) -> torch.Tensor:
        """``DiffusionGemmaForBlockDiffusion``'s head (lm_head, float32, soft-capping) and a
        temperature-1 log_softmax, for selected positions only."""
        import torch

        with torch.inference_mode():
            logits = self.model.lm_head(hidden).to(torch.float32)
            if self._softcap:
                logits = torch.tanh(logits / self._softcap) * self._softcap
            return torch.log_softmax(logits, dim=-1)

    def _read_batch(self, reads: Sequence[TokenRead]) -> list[list[SlotLogprobs]]:
        import torch

        hidden = self._hidden(reads)
        rows = [(i, slot.position) for i, r in enumerate(reads) for slot in r.slots]
        if not rows:
            return [[] for _ in reads]
        index = torch.tensor(rows, dtype=torch.long, device=hidden.device)
        lp = self._logprobs(hidden[index[:, 0], index[:, 1]])  # (slots, vocab)
        argmax = lp.argmax(dim=-1).tolist()
        slots = [slot for r in reads for slot in r.slots]  # in ``rows``' order
        done = iter([_slot_read(lp[k], s.label_ids, argmax[k]) for k, s in enumerate(slots)])
        return [[next(done) for _ in r.slots] for r in reads]


def _slot_read(
    lp: torch.Tensor, label_ids: tuple[tuple[int, ...], ...], argmax: int
) -> SlotLogprobs:
    distinct = sorted({t for group in label_ids for t in group})
    if not distinct:
        return SlotLogprobs(tuple(-math.inf for _ in label_ids), 0.0, False)
    import torch

    values = dict(zip(distinct, lp[torch.tensor(distinct, device=lp.device)].tolist(), strict=True))
    logprobs = tuple(max((values[t] for t in group), default=-math.inf) for group in label_ids)
    mass = math.fsum(math.exp(values[t]) for t in distinct)
    return SlotLogprobs(
        logprobs=logprobs, label_mass=min(mass, 1.0), argmax_is_label=argmax in values
    )


class TransformersReader(TokenReader):
    """DiffusionGemma one-step structured reads with HF transformers, on CPU or GPU.

    ``TransformersReader.from_pretrained(folder)`` loads a local checkpoint;
    ``special_tokens`` and ``chat_template`` go to the canvas planner, other keywords to
    ``TransformersTokenBackend``.
    """

    name = "transformers"
    #: The chat prompt's arguments count through the planner.
    reading_ignores = ("chat_template", "special_tokens")
    _warm = False  # whether warmup() ran its first read

    def __init__(
        self,
        backend: TransformersTokenBackend,
        *,
        chat_template: str | None = None,
        special_tokens: SpecialTokens = "reject",
    ) -> None:
        self.backend = backend
        self.model = backend.model_id
        self.planner = CanvasPlanner(
            backend.tokenizer,
            vocab_size=backend.vocab_size,
            served_canvas=backend.served_canvas,
            max_model_len=backend.max_model_len,
            chat_template=chat_template,
            special_tokens=special_tokens,
        )

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike[str],
        *,
        chat_template: str | None = None,
        special_tokens: SpecialTokens = "reject",
        **backend_kwargs: Any,
    ) -> TransformersReader:
        """Load a local DiffusionGemma checkpoint folder (no hub access)."""
        return cls(
            TransformersTokenBackend(path, **backend_kwargs),
            chat_template=chat_template,
            special_tokens=special_tokens,
        )

    def read_tokens(self, reads: Sequence[TokenRead]) -> list[list[SlotLogprobs]]:
        return self.backend.read_tokens(reads)

    def generator(self, *, timeout_s: float | None = None) -> TransformersGenerator:
        """Generations on this reader's own DiffusionGemma (the full denoising schedule),
        taking turns with its reads (``timeout_s`` is a ``VLLMReader`` option)."""
        if timeout_s is not None:
            raise ConfigurationError(
                "timeout_s is a VLLMReader option: a transformers reader's generations take "
                "turns with its reads in this process; leave it out"
            )
        from agentbranch.engine.readers.transformers_generation import TransformersGenerator

        backend = self.backend  # its model, tokenizer and lock, the reads' planner
        return TransformersGenerator(
            backend.model,
            backend.tokenizer,
            planner=self.planner,
            lock=backend._lock,
            threads=backend.threads,
            model_name=self.model,
            max_model_len=backend.max_model_len,
        )

    def warmup(self) -> None:
        """Run one yes/no read so the first decision does not pay the first forward's
        one-off setup."""
        if self._warm:
            return
        q = QuestionSpec("warmup", "noul", "Ready?", ("yes", "no"), (None, None), ("yes", "no"))
        self.read([ReadRequest(state="warm-up", questions=(q,))])
        self._warm = True
