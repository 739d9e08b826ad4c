"""Generations on the reader's own ``LLM``, through the same engine worker as its reads
(one engine, one copy of the weights, shared batches)."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agentbranch.core.errors import ReaderError, ReaderTimeoutError
from agentbranch.engine.readers.generation import (
    GenerationRequest,
    GenerationResult,
    Generator,
    check_request,
    render_with_planner,
)
from agentbranch.engine.readers.streaming import StreamText

if TYPE_CHECKING:
    from vllm import SamplingParams

__all__ = ["GenerationJob", "VLLMGenerator", "generation_params", "generation_result"]


@dataclass(eq=False)
class GenerationJob:
    """One generation for the engine worker; ``future`` gets its ``GenerationResult``."""

    request: GenerationRequest
    diffusion: bool
    future: Future[GenerationResult] = field(default_factory=Future)
    #: Streaming: called on the worker thread with the text so far after every step.
    on_text: Callable[[str], None] | None = None
    #: Set when the stream's consumer left: the worker aborts the request.
    cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def prompt_ids(self) -> list[int]:
        return list(self.request.prompt_ids)

    #: The worker's batch-size count (a read job counts its token reads).
    size = 1


def generation_params(job: GenerationJob, *, engine: bool = False) -> SamplingParams:
    """The ``vllm.SamplingParams`` of one generation. A causal model's ``choices`` are
    forced by vLLM's structured outputs; DiffusionGemma runs vLLM's own denoising schedule
    (``steps`` as ``diffusion_max_steps``) and never gets a temperature, seed or structured
    outputs (vLLM rejects them for diffusion models), so its ``choices`` are not enforced."""
    from vllm import SamplingParams

    r = job.request
    kwargs: dict[str, Any] = {"max_tokens": r.max_tokens}
    if r.stop:
        kwargs["stop"] = list(r.stop)
    if engine:
        kwargs["skip_clone"] = True
    if job.diffusion:
        if r.steps is not None:
            kwargs["extra_args"] = {"diffusion_max_steps": r.steps}
    else:
        kwargs["temperature"] = 0.0 if r.temperature is None else r.temperature
        if r.seed is not None:
            kwargs["seed"] = r.seed
        if r.choices is not None:
            from vllm.sampling_params import StructuredOutputsParams

            kwargs["structured_outputs"] = StructuredOutputsParams(choice=list(r.choices))
    return SamplingParams(**kwargs)


def generation_result(job: GenerationJob, output: Any) -> GenerationResult:
    """A vLLM ``RequestOutput`` as a ``GenerationResult``."""
    if not output.outputs:
        raise ReaderError("vLLM finished a generation without an output")
    completion = output.outputs[0]
    constrained = "choice" if (job.request.choices is not None and not job.diffusion) else None
    return GenerationResult(
        text=str(completion.text),
        prompt_tokens=len(output.prompt_token_ids or job.request.prompt_ids),
        completion_tokens=len(completion.token_ids),
        finish_reason=completion.finish_reason,
        constrained=constrained,
    )


_DONE = object()


class _GenerationHost(Protocol):
    """What a ``VLLMGenerator`` uses of its ``VLLMReader`` (named here, not imported:
    the reader builds its generator, so importing it back would close a circle)."""

    model: str
    mode: str
    planner: Any
    max_model_len: int
    _worker: Any


class VLLMGenerator(Generator):
    """Generations on a ``VLLMReader``'s ``LLM`` through its engine worker, beside its
    reads. ``timeout_s``: a generation that waits longer raises ``ReaderTimeoutError``
    (default: wait)."""

    def __init__(self, reader: _GenerationHost, *, timeout_s: float | None = None) -> None:
        self.reader = reader
        self.timeout_s = timeout_s
        self.model_name = reader.model
        self.is_diffusion = reader.mode == "diffusion"
        self.supports_choices = not self.is_diffusion

    def render(
        self, messages: Sequence[dict[str, str]], special_tokens: str | None = None
    ) -> list[int]:
        """Prompt ids of chat ``messages`` (the template and special-token rule the
        reads use; ``special_tokens="text"`` reads them as plain text)."""
        return render_with_planner(self.reader.planner, messages, special_tokens)

    def _submit(
        self, request: GenerationRequest, on_text: Callable[[str], None] | None = None
    ) -> GenerationJob:
        check_request(
            request, is_diffusion=self.is_diffusion, max_model_len=self.reader.max_model_len
        )
        job = GenerationJob(request, self.is_diffusion, on_text=on_text)
        self.reader._worker.submit(job)
        return job

    def stream(self, request: GenerationRequest) -> Iterator[str | GenerationResult]:
        """Generate, yielding text pieces as vLLM's engine steps produce them, then the
        ``GenerationResult`` (``agentbranch.engine.readers.streaming``). Leaving the loop
        early aborts the request in vLLM."""
        items: queue.Queue[Any] = queue.Queue()
        job = self._submit(request, on_text=items.put)
        job.future.add_done_callback(lambda _: items.put(_DONE))
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        text = StreamText(request.stop)
        try:
            while True:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    item = items.get(timeout=wait)
                except queue.Empty:
                    raise self._timeout() from None
                if item is _DONE:
                    break
                if piece := text.update(item):
                    yield piece
            result = job.future.result()
        finally:
            job.cancel.set()  # a no-op once vLLM finished it
        if piece := text.finish(result.text):
            yield piece
        yield result

    async def astream(self, request: GenerationRequest) -> AsyncIterator[str | GenerationResult]:
        """Async ``stream``: the worker hands each step's text to the event loop (no
        thread waits for it); leaving the loop early aborts the request in vLLM."""
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[Any] = asyncio.Queue()

        def hand(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(items.put_nowait, item)
            except RuntimeError:  # the loop closed: nobody listens, stop the request
                job.cancel.set()

        job = self._submit(request, on_text=hand)
        job.future.add_done_callback(lambda _: hand(_DONE))
        text = StreamText(request.stop)
        try:
            try:
                async with asyncio.timeout(self.timeout_s):
                    while (item := await items.get()) is not _DONE:
                        if piece := text.update(item):
                            yield piece
            except TimeoutError:
                raise self._timeout() from None
            result = job.future.result()
        finally:
            job.cancel.set()
        if piece := text.finish(result.text):
            yield piece
        yield result

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate, blocking until vLLM finishes (batched with concurrent work)."""
        job = self._submit(request)
        try:
            return job.future.result(timeout=self.timeout_s)
        except FutureTimeout:
            job.future.cancel()
            raise self._timeout() from None

    async def agenerate(self, request: GenerationRequest) -> GenerationResult:
        """Async ``generate``: waits on the worker's future without blocking the loop."""
        job = self._submit(request)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(job.future), self.timeout_s)
        except TimeoutError:
            job.future.cancel()
            raise self._timeout() from None

    def _timeout(self) -> ReaderTimeoutError:
        return ReaderTimeoutError(
            f"vLLM did not finish the generation within {self.timeout_s}s; raise "
            "timeout_s or lower max_tokens"
        )
