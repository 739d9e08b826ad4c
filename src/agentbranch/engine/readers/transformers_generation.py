"""Generations with HF transformers on an already loaded model.

``TransformersGenerator`` generates on a model in memory: the DiffusionGemma model a
``TransformersReader`` reads with (``reader.chat_model()``: transformers' own diffusion
``generate``, the full denoising schedule, ``steps`` capping it), or any causal model
(``model.generate``: greedy by default, sampling with ``temperature`` and ``seed``).
``from_pretrained`` loads a local causal-model folder, e.g. ``agentbranch.testing.smollm2()``.

Calls are serialised by a lock (the reader's own, so reads and generations of one model
take turns); ``agenerate`` runs in a worker thread, never on the event loop. A ``seed``
draws from a forked RNG: the process's torch RNG is left as it was.

``choices`` on a causal model: the reply is the option whose tokens the model finds most
likely after the prompt (the sum of their log probabilities, one batched forward), so it
is always exactly one of them (``constrained="choice"``), as vLLM's structured outputs
hold a generation to a choice. A DiffusionGemma generation is not constrained
(``supports_choices`` is False there): the caller parses the reply.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentbranch.core.errors import ConfigurationError, ReaderError
from agentbranch.engine.readers.generation import (
    GenerationRequest,
    GenerationResult,
    check_request,
    cut_at_stop,
    render_chat,
    render_with_planner,
)
from agentbranch.engine.readers.threads import Threads, resolve_threads, torch_threads

__all__ = ["TransformersGenerator", "reader_generator"]


class TransformersGenerator:
    """Generations on a loaded transformers model (see the module docstring).

    Args:
        model: a loaded ``PreTrainedModel`` (a causal LM or a DiffusionGemma).
        tokenizer: its tokenizer (with a chat template).
        planner: a reader's planner; prompts are then rendered as its reads are.
        lock: shared with the reader, so reads and generations take turns.
        threads: torch threads around each generation (``agentbranch.engine.readers.threads``).
        model_name: reported in replies (default: the model's folder name).
        max_model_len: the longest prompt plus generation (default: the model's).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        planner: Any = None,
        lock: threading.Lock | None = None,
        threads: Threads = "auto",
        model_name: str | None = None,
        max_model_len: int | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.planner = planner
        self.threads = resolve_threads(threads)
        self._lock = lock or threading.Lock()
        self.is_diffusion = hasattr(model.config, "canvas_length")
        self.supports_choices = not self.is_diffusion
        text_config = model.config.get_text_config()
        limit = int(getattr(text_config, "max_position_embeddings", 0) or 1 << 30)
        self.max_model_len = min(limit, max_model_len) if max_model_len else limit
        name = str(getattr(model.config, "_name_or_path", "") or "")
        self.model_name = model_name or (Path(name).name if name else type(model).__name__)

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike[str],
        *,
        dtype: Any = None,
        threads: Threads = "auto",
        model_name: str | None = None,
    ) -> TransformersGenerator:
        """Load a local causal-model folder (no hub access), e.g. ``smollm2()``."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from agentbranch.engine.quiet_loads import quiet_loads

        folder = Path(path)
        if not (folder / "config.json").is_file():
            raise ConfigurationError(
                f"{folder} is not a local model folder (no config.json); pass the folder "
                "of a saved causal model, e.g. agentbranch.testing.smollm2()"
            )
        with quiet_loads():
            tokenizer = AutoTokenizer.from_pretrained(folder)
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or torch.float32)
        return cls(
            model.eval(),
            tokenizer,
            threads=threads,
            model_name=model_name or folder.resolve().name,
        )

    def render(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Prompt ids of chat ``messages`` through the model's chat template."""
        if self.planner is not None:
            return render_with_planner(self.planner, messages)
        return render_chat(self.tokenizer, messages)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate (blocking; one generation at a time per lock)."""
        import torch

        check_request(request, is_diffusion=self.is_diffusion, max_model_len=self.max_model_len)
        room = self.max_model_len - len(request.prompt_ids)
        max_new = min(request.max_tokens, room)
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([list(request.prompt_ids)], dtype=torch.long, device=device)
        with self._lock, torch_threads(self.threads), torch.inference_mode():
            try:
                if request.choices is not None and self.supports_choices:
                    return self._choose(input_ids, request)
                if self.is_diffusion:
                    new = self._diffusion(input_ids, max_new, request)
                else:
                    new = self._causal(input_ids, max_new, request)
            except (RuntimeError, ValueError) as e:
                raise ReaderError(f"transformers failed the generation: {e}") from e
        return self._result(request, new, max_new)

    async def agenerate(self, request: GenerationRequest) -> GenerationResult:
        """Async ``generate``, in a worker thread (the event loop keeps running)."""
        return await asyncio.to_thread(self.generate, request)

    # -- internals -------------------------------------------------------------------

    def _eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        return set(ids if isinstance(ids, list) else [ids] if ids is not None else [])

    def _causal(self, input_ids: Any, max_new: int, request: GenerationRequest) -> list[int]:
        import torch

        kwargs: dict[str, Any] = {"max_new_tokens": max_new}
        if request.temperature:  # sampling: plain, as vLLM's defaults (no top-k/top-p)
            kwargs.update(do_sample=True, temperature=request.temperature, top_k=0, top_p=1.0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        if request.stop:
            kwargs.update(stop_strings=list(request.stop), tokenizer=self.tokenizer)
        pad = self.model.generation_config.pad_token_id
        if pad is None:
            pad = next(iter(self._eos_ids()), 0)
        mask = torch.ones_like(input_ids)
        with torch.random.fork_rng(devices=[]):
            if request.seed is not None:
                torch.manual_seed(request.seed)
            out = self.model.generate(input_ids, attention_mask=mask, pad_token_id=pad, **kwargs)
        return out[0, input_ids.shape[1] :].tolist()

    def _diffusion(self, input_ids: Any, max_new: int, request: GenerationRequest) -> list[int]:
        kwargs: dict[str, Any] = {"max_new_tokens": max_new}
        if request.steps is not None:
            kwargs["max_denoising_steps"] = request.steps
        out = self.model.generate(input_ids, **kwargs)
        sequences = getattr(out, "sequences", out)
        # Whole canvases are denoised; the reply is capped at what was asked for.
        return sequences[0, input_ids.shape[1] :].tolist()[:max_new]

    def _choose(self, input_ids: Any, request: GenerationRequest) -> GenerationResult:
        """The most likely of ``request.choices`` (summed token log probabilities)."""
        import torch

        assert request.choices is not None
        options = list(request.choices)
        tails = [self.tokenizer.encode(o, add_special_tokens=False) for o in options]
        if any(not t for t in tails):
            raise ConfigurationError("every choice must hold at least one token")
        prompt = input_ids[0].tolist()
        width = len(prompt) + max(len(t) for t in tails)
        ids = torch.zeros((len(options), width), dtype=torch.long, device=input_ids.device)
        mask = torch.zeros_like(ids)
        for i, tail in enumerate(tails):
            row = prompt + tail
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        logprobs = torch.log_softmax(self.model(input_ids=ids, attention_mask=mask).logits, -1)
        scores = []
        for i, tail in enumerate(tails):
            at = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(tail))
            scores.append(float(logprobs[i, at, torch.tensor(tail)].float().sum()))
        best = max(range(len(options)), key=lambda i: scores[i])
        return GenerationResult(
            text=options[best],
            prompt_tokens=len(prompt),
            completion_tokens=len(tails[best]),
            finish_reason="stop",
            constrained="choice",
        )

    def _result(self, request: GenerationRequest, new: list[int], max_new: int) -> GenerationResult:
        eos = self._eos_ids()
        pad = self.model.generation_config.pad_token_id
        ended = next((i for i, t in enumerate(new) if t in eos), None)
        tokens = new if ended is None else new[:ended]
        if pad is not None and pad not in eos:
            tokens = [t for t in tokens if t != pad]
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        text, stopped = cut_at_stop(text, request.stop)
        finish = "stop" if (ended is not None or stopped) else "length"
        if finish == "length" and len(new) < max_new:
            finish = "stop"
        return GenerationResult(
            text=text,
            prompt_tokens=len(request.prompt_ids),
            completion_tokens=len(new) if ended is None else ended + 1,
            finish_reason=finish,
        )


def reader_generator(reader: Any) -> TransformersGenerator:
    """The generator on a ``TransformersReader``'s own model, tokenizer, planner and lock."""
    backend = reader.backend
    return TransformersGenerator(
        backend.model,
        backend.tokenizer,
        planner=reader.planner,
        lock=backend._lock,
        threads=backend.threads,
        model_name=reader.model,
        max_model_len=backend.max_model_len,
    )
