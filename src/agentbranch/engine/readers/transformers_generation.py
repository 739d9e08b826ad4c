"""Generations with HF transformers on an already loaded model: ``TransformersGenerator``
(``TransformersReader.generator()`` builds one on the reader's own model).
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from agentbranch.core.at_exit import join_at_exit
from agentbranch.core.errors import ConfigurationError, ReaderError, ReaderTimeoutError
from agentbranch.engine.canvas import CanvasPlanner, ChatPrompt
from agentbranch.engine.readers.generation import (
    GenerationRequest,
    GenerationResult,
    Generator,
    check_request,
    cut_at_stop,
    render_with_planner,
)
from agentbranch.engine.readers.streaming import StreamText, TokenText, iterate_in_thread
from agentbranch.engine.readers.threads import Threads, resolve_threads, torch_threads

__all__ = ["STREAM_IDLE_S", "TransformersGenerator"]

#: Seconds a stream's generation runs on with nobody taking its text before it is
#: stopped: a stream left unread would hold every other call of the model behind it.
STREAM_IDLE_S = 30.0


class TransformersGenerator(Generator):
    """Generations on a loaded transformers model.

    Args:
        model: a loaded ``PreTrainedModel`` (a causal LM or a DiffusionGemma).
        tokenizer: its tokenizer (with a chat template).
        planner: a reader's planner; prompts are then rendered as its reads are.
        lock: shared with the reader, so reads and generations take turns.
        threads: torch threads around each generation.
        model_name: reported in replies (default: the model's folder name).
        max_model_len: the longest prompt plus generation (default: the model's).
        stream_idle_s: seconds a stream may go unread before its generation is stopped
            (``STREAM_IDLE_S``; ``None``: never).

    A DiffusionGemma generates with transformers' diffusion ``generate`` (the full
    denoising schedule, ``steps`` capping it), a causal model with ``model.generate``
    (greedy, or sampling with ``temperature`` and ``seed`` from a forked RNG). Calls are
    serialised by the lock. ``choices`` on a causal model: the reply is the option whose
    tokens the model finds most likely after the prompt (``constrained="choice"``); a
    DiffusionGemma's is not constrained (``supports_choices`` is False).
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
        stream_idle_s: float | None = STREAM_IDLE_S,
    ) -> None:
        self.model = model
        self.stream_idle_s = stream_idle_s
        self.tokenizer = tokenizer
        self.planner = planner
        self._prompt = None if planner is not None else ChatPrompt(tokenizer)
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
        """Load a local model folder (no hub access): a causal model, or a DiffusionGemma
        checkpoint, whose prompts are then rendered as a ``TransformersReader``'s are."""
        import json

        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from agentbranch.engine.quiet_loads import quiet_loads

        folder = Path(path)
        try:
            config = json.loads((folder / "config.json").read_text("utf-8"))
        except (OSError, ValueError) as e:
            raise ConfigurationError(
                f"{folder} is not a local model folder (config.json: {e}); pass the folder "
                "of a saved model, e.g. agentbranch.smollm2()"
            ) from e
        diffusion = isinstance(config, dict) and "canvas_length" in config
        with quiet_loads():
            tokenizer = AutoTokenizer.from_pretrained(folder)
            if diffusion:
                from transformers import DiffusionGemmaForBlockDiffusion as auto
            else:
                auto = AutoModelForCausalLM
            model = auto.from_pretrained(folder, dtype=dtype or torch.float32)
        planner = None
        if diffusion:
            text_config = model.config.get_text_config()
            planner = CanvasPlanner(
                tokenizer,
                vocab_size=int(text_config.vocab_size),
                served_canvas=int(model.config.canvas_length),
                max_model_len=int(text_config.max_position_embeddings),
            )
        return cls(
            model.eval(),
            tokenizer,
            planner=planner,
            threads=threads,
            model_name=model_name or folder.resolve().name,
        )

    def render(
        self, messages: Sequence[dict[str, str]], special_tokens: str | None = None
    ) -> list[int]:
        """Prompt ids of chat ``messages`` (as the reader's reads render theirs, when there
        is a reader); special tokens raise ``SpecialTokenError`` unless ``"text"``."""
        if self.planner is not None:
            return render_with_planner(self.planner, messages, special_tokens)
        return self._prompt.render_messages(messages, special_tokens)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate (blocking; one generation at a time per lock)."""
        max_new = self._check(request)
        out = self._produce(request, max_new, None)  # (``choices``: the result itself)
        return out if isinstance(out, GenerationResult) else self._result(request, out, max_new)

    async def agenerate(self, request: GenerationRequest) -> GenerationResult:
        """Async ``generate``, in a worker thread (the event loop keeps running)."""
        return await asyncio.to_thread(self.generate, request)

    def stream(
        self, request: GenerationRequest, cancel: threading.Event | None = None
    ) -> Iterator[str | GenerationResult]:
        """Generate, yielding text pieces as the model produces them (a causal model's
        tokens, a DiffusionGemma's denoised blocks; a reply held to ``choices`` whole),
        then the ``GenerationResult``. Setting ``cancel``, closing or dropping the iterator
        stops the generation at its next token or block. So does leaving a piece unread
        for ``stream_idle_s``: the stream, if read again, hands out what was generated,
        then raises ``ReaderTimeoutError``."""
        max_new = self._check(request)
        if request.choices is not None and self.supports_choices:
            result = self.generate(request)
            if result.text:
                yield result.text
            yield result
            return
        cancel = cancel or threading.Event()
        feed = _Feed(cancel, self.stream_idle_s)
        failed: list[BaseException] = []

        def work() -> None:
            try:
                self._produce(request, max_new, feed)
            except _Cancelled:
                pass
            except BaseException as e:  # noqa: BLE001 - raised in the consumer's thread
                failed.append(e)
            finally:
                feed.items.put(None)

        worker = threading.Thread(target=work, name="agentbranch-generate", daemon=True)
        worker.start()
        # Joined at exit: stopping a worker inside a native forward aborts the process.
        join_at_exit(worker)
        pad = self.model.generation_config.pad_token_id
        tokens = TokenText(self.tokenizer, self._eos_ids(), pad, max_new)
        text = StreamText(request.stop)
        try:
            while (ids := feed.take()) is not None:
                piece = text.update(tokens.push(ids))
                if piece:
                    yield piece
                if text.stopped or tokens.ended is not None or len(tokens.ids) >= max_new:
                    break  # nothing more is handed out: the generation is stopped
        finally:
            cancel.set()
        if failed:
            raise failed[0]
        if ids is None and feed.abandoned:  # (a reply it had finished is whole)
            raise ReaderTimeoutError(
                f"this stream went unread for more than {self.stream_idle_s:g} s, so its "
                "generation was stopped to free the model for other calls; read a stream "
                "to its end or close it (or raise the generator's stream_idle_s)"
            )
        result = self._result(request, tokens.ids, max_new)
        piece = text.finish(result.text)
        if piece:
            yield piece
        yield result

    async def astream(self, request: GenerationRequest) -> AsyncIterator[str | GenerationResult]:
        """Async ``stream`` (the generation in a worker thread); leaving early stops it."""
        async for item in iterate_in_thread(lambda cancel: self.stream(request, cancel)):
            yield item

    # -- internals -------------------------------------------------------------------

    def _check(self, request: GenerationRequest) -> int:
        """Refuse what the model cannot honour; the new tokens it may generate."""
        check_request(request, is_diffusion=self.is_diffusion, max_model_len=self.max_model_len)
        return min(request.max_tokens, self.max_model_len - len(request.prompt_ids))

    def _produce(self, request: GenerationRequest, max_new: int, streamer: Any) -> Any:
        """The new token ids (or, for ``choices``, the ``GenerationResult``), under the
        lock; ``streamer`` (transformers' ``put``/``end``) sees them as they come."""
        import torch

        device = next(self.model.parameters()).device
        input_ids = torch.tensor([list(request.prompt_ids)], dtype=torch.long, device=device)
        with self._lock, torch_threads(self.threads), torch.inference_mode():
            try:
                if request.choices is not None and self.supports_choices:
                    return self._choose(input_ids, request)
                if self.is_diffusion:
                    return self._diffusion(input_ids, max_new, request, streamer)
                return self._causal(input_ids, max_new, request, streamer)
            except (RuntimeError, ValueError) as e:
                raise ReaderError(f"transformers failed the generation: {e}") from e

    def _eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        return set(ids if isinstance(ids, list) else [ids] if ids is not None else [])

    def _causal(
        self, input_ids: Any, max_new: int, request: GenerationRequest, streamer: Any
    ) -> list[int]:
        import torch

        kwargs: dict[str, Any] = {"max_new_tokens": max_new, "streamer": streamer}
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

    def _diffusion(
        self, input_ids: Any, max_new: int, request: GenerationRequest, streamer: Any
    ) -> list[int]:
        kwargs: dict[str, Any] = {"max_new_tokens": max_new, "streamer": streamer}
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
        pad = self.model.generation_config.pad_token_id
        tokens = TokenText(self.tokenizer, self._eos_ids(), pad, len(new))
        text, stopped = cut_at_stop(tokens.push(new), request.stop)
        ended = tokens.ended
        return GenerationResult(
            text=text,
            prompt_tokens=len(request.prompt_ids),
            completion_tokens=len(new) if ended is None else ended + 1,
            finish_reason="stop"
            if ended is not None or stopped or len(new) < max_new
            else "length",
        )


class _Cancelled(Exception):
    """Raised inside ``model.generate`` (from the streamer) to stop a cancelled stream."""


class _Feed:
    """transformers' streamer interface: ``generate`` puts the prompt, then each new token
    or denoised canvas, queued for the consumer. Once ``cancel`` is set or ids waited
    ``idle_s`` seconds untaken (``abandoned``), ``put`` stops the generation."""

    def __init__(self, cancel: threading.Event, idle_s: float | None = None) -> None:
        self.cancel = cancel
        self.idle_s = idle_s
        self.abandoned = False
        #: (when it was put, ids); ``None`` ends the stream
        self.items: queue.Queue[tuple[float, list[int]] | None] = queue.Queue()
        self._prompt = True

    def put(self, value: Any) -> None:
        if self.cancel.is_set():
            raise _Cancelled
        if self._prompt:  # the first put is the prompt itself
            self._prompt = False
            return
        if self.idle_s is not None:
            with self.items.mutex:
                oldest = self.items.queue[0] if self.items.queue else None
            if oldest is not None and time.monotonic() - oldest[0] > self.idle_s:
                self.abandoned = True  # nobody reads on: free the model for other calls
                raise _Cancelled
        self.items.put((time.monotonic(), [int(t) for t in value.reshape(-1).tolist()]))

    def take(self) -> list[int] | None:
        """The next ids (waiting for them), ``None`` once the generation ended."""
        item = self.items.get()
        return None if item is None else item[1]

    def end(self) -> None:
        pass
