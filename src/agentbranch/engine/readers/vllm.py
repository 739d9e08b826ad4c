"""``VLLMReader``: structured reads through vLLM's offline ``LLM`` API, in process.

Two modes, chosen from the served model's config unless given:

* ``"diffusion"`` — DiffusionGemma (``DiffusionGemmaForBlockDiffusion``). The
  ``CanvasPlanner`` builds prompt ids (thought block outside the canvas) and seeded
  canvases exactly as vLLM's ``DiffusionGemmaCanvasStrategy``; each read is one
  read-only request with ONE denoising step::

      TokensPrompt(prompt_token_ids=prompt_ids)
      SamplingParams(max_tokens=read_length, logprob_token_ids=label_ids,
                     extra_args={"diffusion_seed_canvas": canvas,
                                 "diffusion_canvas_length": len(canvas),
                                 "diffusion_max_steps": 1,
                                 "diffusion_read_only": True})

  never ``temperature`` or ``seed`` (vLLM rejects both for diffusion models). Options:
  ``constrained=True`` adds ``diffusion_constrained`` (the decoder unembeds only the
  label ids; logprobs are normalised over them; tensor parallel 1 only);
  ``max_steps=N`` runs up to N denoising steps with every non-slot position pinned to
  its seed (``diffusion_pinned``), the "more effort" fallback.
* ``"next_token"`` — any causal model (Qwen3, Llama ...). The ``NextTokenPlanner``
  builds the prompt as vLLM's ``NextTokenStrategy``; the label is read at the reply's
  first token with ``SamplingParams(max_tokens=1, temperature=0.0,
  logprob_token_ids=label_ids)``, as vLLM's ``/v1/systemone`` does.

``logprob_token_ids`` holds at most 128 ids (``MAX_LOGPROB_TOKEN_IDS``); a read whose
labels need more is sent as several requests with the same prompt and canvas (a seeded
one-step read is deterministic, and prefix caching prefills the prompt once). A
constrained read cannot be split (its normalisation would change) and is refused.

Threading: vLLM's offline engine is not thread-safe, so ONE worker thread owns the
``LLM``. ``read``/``aread`` calls from any thread or event loop put their planned token
reads on a queue. The worker drives ``llm.llm_engine`` as ``LLM.generate`` does
(``add_request``, then ``step`` until done) without waiting for a whole batch: while vLLM
is idle it takes everything queued (waiting at most ``batch_window_s`` for more once a
call arrived, up to ``max_batch_reads`` token reads); while vLLM computes it adds what
arrives at once, so it joins vLLM's next scheduler step (continuous batching, like vLLM's
server), and each call is answered when its own requests finish. Concurrent decisions
(LangGraph ``Send`` fan-out, many agent threads) therefore share vLLM's steps. An ``LLM``
stand-in without the engine API gets one ``generate`` call per batch instead.

Build the reader in the main module of a script under ``if __name__ == "__main__":`` —
vLLM starts worker processes.

Over 500 lines: the engine's worker thread, request building and the diffusion and next-
token paths; the planned layout restructuring splits them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentbranch.core.errors import (
    AgentBranchError,
    ConfigurationError,
    ReaderError,
    ReaderTimeoutError,
)
from agentbranch.core.reads import LabelRead, ReadRequest, SlotLogprobs, TokenRead
from agentbranch.engine.canvas import CanvasPlanner, NextTokenPlanner
from agentbranch.engine.presets import EnginePreset, get_preset
from agentbranch.engine.readers.canvas_reader import TokenReader

if TYPE_CHECKING:
    from vllm import LLM, SamplingParams

__all__ = ["DIFFUSION_ARCHITECTURES", "MAX_LOGPROB_TOKEN_IDS", "VLLMReader"]

log = logging.getLogger("agentbranch.vllm")

Mode = Literal["diffusion", "next_token"]
#: vLLM's cap on ``SamplingParams.logprob_token_ids`` (``vllm.sampling_params``).
MAX_LOGPROB_TOKEN_IDS = 128
DIFFUSION_ARCHITECTURES = frozenset({"DiffusionGemmaForBlockDiffusion"})
#: vLLM's logprobs modes that return log probabilities (the logits modes do not).
_LOGPROBS_MODES = frozenset({"raw_logprobs", "processed_logprobs"})


# ----------------------------------------------------------------- request building


@dataclass(frozen=True)
class EngineRequest:
    """One vLLM request: which token read it serves and which label ids it asks for."""

    read_index: int
    prompt_ids: list[int]
    label_ids: list[int]
    max_tokens: int
    extra_args: dict[str, Any] | None = None
    temperature: float | None = None


def label_id_order(read: TokenRead) -> list[int]:
    """The ids a read asks logprobs for, in vLLM's order: a single slot's labels in
    label order (``NextTokenStrategy``/single canvas reads), a joint canvas's ids
    sorted (``read_joint``)."""
    if len(read.slots) == 1:
        return list(dict.fromkeys(i for group in read.slots[0].label_ids for i in group))
    return sorted({i for slot in read.slots for group in slot.label_ids for i in group})


def engine_requests(
    reads: Sequence[TokenRead],
    *,
    mode: Mode,
    constrained: bool = False,
    max_steps: int = 1,
    max_ids: int = MAX_LOGPROB_TOKEN_IDS,
) -> list[EngineRequest]:
    """The vLLM requests for ``reads`` (several per read when its label ids exceed
    ``max_ids``)."""
    out: list[EngineRequest] = []
    for index, read in enumerate(reads):
        ids = label_id_order(read)
        if not ids:
            raise ConfigurationError("a token read without label ids cannot be read")
        if constrained and len(ids) > max_ids:
            raise ConfigurationError(
                f"a constrained read normalises over its label ids, and this read has "
                f"{len(ids)} (vLLM allows {max_ids} per request, so it would be split). "
                "Use fewer questions per joint read or constrained=False."
            )
        extra: dict[str, Any] | None = None
        temperature: float | None = None
        if mode == "diffusion":
            if not read.canvas:
                raise ConfigurationError("a diffusion read needs a seeded canvas")
            extra = {
                "diffusion_seed_canvas": list(read.canvas),
                "diffusion_canvas_length": len(read.canvas),
                "diffusion_max_steps": max_steps,
                "diffusion_read_only": True,
            }
            if max_steps > 1:
                slots = {s.position for s in read.slots}
                extra["diffusion_pinned"] = [p for p in range(len(read.canvas)) if p not in slots]
            if constrained:
                extra["diffusion_constrained"] = True
        else:
            temperature = 0.0
        for start in range(0, len(ids), max_ids):
            out.append(
                EngineRequest(
                    read_index=index,
                    prompt_ids=list(read.prompt_ids),
                    label_ids=ids[start : start + max_ids],
                    max_tokens=read.read_length if mode == "diffusion" else 1,
                    extra_args=extra,
                    temperature=temperature,
                )
            )
    return out


def sampling_params(request: EngineRequest, *, engine: bool = False) -> SamplingParams:
    """The ``vllm.SamplingParams`` of one engine request (as vLLM's strategies build
    them). ``engine``: for ``LLMEngine.add_request`` — a fresh object per request that
    vLLM need not deep-copy (``skip_clone``, as vLLM's own server builds its params)
    and no detokenizing (a read needs the logprobs, never text). Neither changes what
    the model computes."""
    from vllm import SamplingParams

    kwargs: dict[str, Any] = {
        "max_tokens": request.max_tokens,
        "logprob_token_ids": list(request.label_ids),
    }
    if engine:
        kwargs["skip_clone"] = True
        kwargs["detokenize"] = False
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    if request.extra_args is not None:
        kwargs["extra_args"] = json.loads(json.dumps(request.extra_args))
    return SamplingParams(**kwargs)


def slot_reads(
    read: TokenRead,
    logprobs_by_id: Sequence[Mapping[int, float]],
    token_ids: Sequence[int],
) -> list[SlotLogprobs]:
    """Fold a read's output into ``SlotLogprobs``: ``logprobs_by_id[p]`` maps label id
    → logprob at output position ``p`` (merged over the read's split requests),
    ``token_ids`` are the output's tokens (the argmax canvas, or the greedy token)."""
    out = []
    for slot in read.slots:
        pos = slot.position
        if pos >= len(logprobs_by_id):
            raise ReaderError(
                f"vLLM returned logprobs for {len(logprobs_by_id)} positions; the slot at "
                f"{pos} is missing (max_tokens too small?)"
            )
        at = logprobs_by_id[pos]
        ids = list(dict.fromkeys(i for group in slot.label_ids for i in group))
        missing = [i for i in ids if i not in at]
        if missing:
            raise ReaderError(
                f"vLLM returned no logprob for label token(s) {missing}; are they outside "
                "the model's vocabulary?"
            )
        out.append(
            SlotLogprobs(
                logprobs=tuple(max(at[i] for i in group) for group in slot.label_ids),
                label_mass=sum(math.exp(at[i]) for i in ids),
                argmax_is_label=len(token_ids) > pos and token_ids[pos] in ids,
            )
        )
    return out


# ----------------------------------------------------------------------- the worker


@dataclass
class _Job:
    reads: list[TokenRead]
    constrained: bool
    max_steps: int
    max_ids: int
    future: Future[list[list[SlotLogprobs]]] = field(default_factory=Future)


@dataclass(eq=False)
class _Running:
    """A job whose requests are in the engine; ``outputs`` fill in as they finish."""

    job: _Job
    requests: list[EngineRequest]
    outputs: list[Any]
    left: int


_STOP = object()


def _stepping_engine(llm: Any) -> Any:
    """The ``LLMEngine`` behind ``llm`` when it offers the request API ``LLM.generate``
    itself runs on (``add_request``/``step``), else ``None`` (then ``generate``)."""
    engine = getattr(llm, "llm_engine", None)
    needed = ("add_request", "step", "has_unfinished_requests", "abort_request")
    if engine is not None and all(callable(getattr(engine, n, None)) for n in needed):
        return engine
    return None


class _EngineWorker:
    """The one thread that owns an ``LLM``: takes queued jobs and runs them on vLLM,
    handing every job its own results.

    With vLLM's engine API (``llm.llm_engine.add_request``/``step``, what
    ``LLM.generate`` runs on) the worker keeps the engine busy: jobs that arrive while
    vLLM computes are added at once and join its next scheduler step (continuous
    batching, as vLLM's server does), and each job is answered as soon as its own
    requests finish. Otherwise (an ``LLM`` stand-in with ``generate`` only) each batch
    of queued jobs is ONE ``generate`` call."""

    def __init__(self, llm: Any, mode: Mode, batch_window_s: float, max_batch_reads: int | None):
        self.llm = llm
        self.mode = mode
        self.batch_window_s = batch_window_s
        self.max_batch_reads = max_batch_reads
        self.generate_calls = 0
        self.reads_run = 0
        self.closed = False
        self._engine = _stepping_engine(llm)
        self._ids = itertools.count()
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        run = self._run if self._engine is None else self._run_stepping
        self._thread = threading.Thread(target=run, name="agentbranch-vllm", daemon=True)
        self._thread.start()

    def submit(self, job: _Job) -> None:
        with self._lock:
            if self.closed:
                raise ReaderError("this VLLMReader is closed; create a new one")
            self._queue.put(job)

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._queue.put(_STOP)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=60)

    def _take(self, wait: bool) -> tuple[list[_Job], bool]:
        """Queued jobs (up to ``max_batch_reads`` token reads) and whether to stop.
        ``wait``: block for a first job, then up to ``batch_window_s`` for more;
        otherwise only what is queued now."""
        jobs: list[_Job] = []
        count = 0
        deadline = 0.0
        if wait:
            first = self._queue.get()
            if first is _STOP:
                return jobs, True
            jobs.append(first)
            count = len(first.reads)
            deadline = time.monotonic() + self.batch_window_s
        while self.max_batch_reads is None or count < self.max_batch_reads:
            try:
                if wait:
                    nxt = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                else:
                    nxt = self._queue.get_nowait()
            except queue.Empty:
                break
            if nxt is _STOP:
                return jobs, True
            jobs.append(nxt)
            count += len(nxt.reads)
        return jobs, False

    def _requests(self, job: _Job) -> list[EngineRequest] | None:
        """The job's engine requests, or ``None`` when it was cancelled or is invalid
        (then its future says so)."""
        if not job.future.set_running_or_notify_cancel():
            return None
        try:
            return engine_requests(
                job.reads,
                mode=self.mode,
                constrained=job.constrained,
                max_steps=job.max_steps,
                max_ids=job.max_ids,
            )
        except AgentBranchError as e:
            job.future.set_exception(e)
            return None

    # -- generate: one call per batch of jobs ----------------------------------------

    def _run(self) -> None:
        stop = False
        while not stop:
            jobs, stop = self._take(wait=True)
            if jobs:
                self._run_jobs(jobs)

    def _run_jobs(self, jobs: list[_Job]) -> None:
        batch: list[tuple[_Job, list[EngineRequest]]] = []
        for job in jobs:
            requests = self._requests(job)
            if requests is not None:
                batch.append((job, requests))
        if not batch:
            return
        try:
            results = self._generate(batch)
        except BaseException as e:  # noqa: BLE001 - every waiter must hear of it
            error = e if isinstance(e, AgentBranchError) else _engine_error(e)
            for job, _ in batch:
                job.future.set_exception(error)
            return
        for (job, _), result in zip(batch, results):
            job.future.set_result(result)

    def _generate(
        self, batch: list[tuple[_Job, list[EngineRequest]]]
    ) -> list[list[list[SlotLogprobs]]]:
        """ONE ``LLM.generate`` call for every job's requests."""
        from vllm.inputs import TokensPrompt

        requests = [r for _, rs in batch for r in rs]
        prompts = [TokensPrompt(prompt_token_ids=r.prompt_ids) for r in requests]
        params = [sampling_params(r) for r in requests]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        self.generate_calls += 1
        self.reads_run += sum(len(job.reads) for job, _ in batch)
        if len(outputs) != len(requests):
            raise ReaderError(f"vLLM returned {len(outputs)} outputs for {len(requests)} requests")
        results = []
        at = 0
        for job, job_requests in batch:
            job_outputs = outputs[at : at + len(job_requests)]
            at += len(job_requests)
            results.append(_fold_outputs(job.reads, job_requests, job_outputs))
        return results

    # -- engine steps: jobs join the running batch -----------------------------------

    def _run_stepping(self) -> None:
        engine = self._engine
        live: dict[str, tuple[_Running, int]] = {}
        stop = False
        while True:
            if not stop:
                # Idle: wait for work (and batch_window_s for more). Busy: add what is
                # queued and go on stepping; it joins vLLM's next step.
                jobs, stop = self._take(wait=not live)
                if jobs:
                    self._add(jobs, live)
            if not live:
                if stop:
                    return
                continue
            try:
                if not engine.has_unfinished_requests():  # vLLM dropped them: never wait
                    raise ReaderError("vLLM finished without answering some reads")
                outputs = engine.step()
            except BaseException as e:  # noqa: BLE001 - every waiter must hear of it
                error = e if isinstance(e, AgentBranchError) else _engine_error(e)
                for run in {id(r): r for r, _ in live.values()}.values():
                    _fail(run.job, error)
                live.clear()
                continue
            for output in outputs:
                if not output.finished:
                    continue
                entry = live.pop(output.request_id, None)
                if entry is None:
                    continue
                run, index = entry
                run.outputs[index] = output
                run.left -= 1
                if run.left == 0:
                    try:
                        result = _fold_outputs(run.job.reads, run.requests, run.outputs)
                    except AgentBranchError as e:
                        _fail(run.job, e)
                    else:
                        run.job.future.set_result(result)

    def _add(self, jobs: list[_Job], live: dict[str, tuple[_Running, int]]) -> None:
        """Add the jobs' requests to the engine, as ``LLM.generate`` adds its prompts:
        rendered by the LLM's renderer, ``FINAL_ONLY`` outputs; and undetokenized (a
        read needs the logprobs, never the text)."""
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        runs = []
        for job in jobs:
            requests = self._requests(job)
            if requests is not None:
                runs.append(_Running(job, requests, [None] * len(requests), len(requests)))
        if not runs:
            return
        engine = self._engine
        try:
            prompts: list[Any] = [
                TokensPrompt(prompt_token_ids=r.prompt_ids) for run in runs for r in run.requests
            ]
            render = getattr(self.llm, "_preprocess_cmpl", None)
            if callable(render):  # what LLM.generate does with its prompts (vLLM >= 0.32)
                prompts = list(render(prompts))
        except BaseException as e:  # noqa: BLE001
            error = e if isinstance(e, AgentBranchError) else _engine_error(e)
            for run in runs:
                _fail(run.job, error)
            return
        at = 0
        for run in runs:
            added: list[str] = []
            try:
                for index, request in enumerate(run.requests):
                    params = sampling_params(request, engine=True)
                    params.output_kind = RequestOutputKind.FINAL_ONLY
                    request_id = f"agentbranch-{next(self._ids)}"
                    engine.add_request(request_id, prompts[at + index], params)
                    added.append(request_id)
                    live[request_id] = (run, index)
            except BaseException as e:  # noqa: BLE001 - this job fails alone
                for request_id in added:
                    live.pop(request_id, None)
                if added:
                    with contextlib.suppress(Exception):
                        engine.abort_request(added)
                _fail(run.job, e if isinstance(e, AgentBranchError) else _engine_error(e))
            at += len(run.requests)
        self.generate_calls += 1
        self.reads_run += sum(len(run.job.reads) for run in runs)


def _fail(job: _Job, error: BaseException) -> None:
    with contextlib.suppress(InvalidStateError):
        job.future.set_exception(error)


def _fold_outputs(
    reads: list[TokenRead], requests: list[EngineRequest], outputs: Sequence[Any]
) -> list[list[SlotLogprobs]]:
    """Each read's ``SlotLogprobs`` from its requests' outputs (merging split requests)."""
    merged: list[list[dict[int, float]]] = [[] for _ in reads]
    tokens: list[list[int]] = [[] for _ in reads]
    for request, output in zip(requests, outputs):
        if not output.outputs:
            raise ReaderError("vLLM returned a request without output")
        completion = output.outputs[0]
        if completion.finish_reason == "error":
            raise ReaderError("vLLM reported a generation error for a read")
        if not completion.logprobs:
            raise ReaderError(
                "vLLM returned no logprobs; the LLM must allow logprob_token_ids (vLLM >= 0.31)"
            )
        positions = merged[request.read_index]
        for p, at in enumerate(completion.logprobs):
            if p >= len(positions):
                positions.append({})
            positions[p].update((i, float(at[i].logprob)) for i in request.label_ids if i in at)
        tokens[request.read_index] = list(completion.token_ids)
    return [slot_reads(r, merged[i], tokens[i]) for i, r in enumerate(reads)]


def _engine_error(e: BaseException) -> ReaderError:
    error = ReaderError(
        f"vLLM failed the read: {type(e).__name__}: {e}. If the engine died (out of "
        "memory, lost GPU), rebuild the reader; if vLLM rejected the request, check "
        "that the LLM is the model the reader was built for."
    )
    error.__cause__ = e
    return error


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

    ``reader.variant(max_steps=8)`` (or ``constrained=True``) is a reader with other read
    options on the same LLM and worker — the "more effort" fallback. Do not give the same
    ``LLM`` to two readers (two workers would call ``generate`` concurrently); use
    ``variant``.
    """

    name = "vllm"
    #: The coalescer may hand this reader several batches at once: the engine worker
    #: adds each to vLLM's running batch while the next one is being planned.
    concurrent_batches = 4
    #: Its engine worker already waits ``batch_window_s`` for more reads.
    coalesce_wait_s = 0.0
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
        self._owns_llm = not _is_llm(llm)
        if self._owns_llm:
            llm = self._build_llm(llm, preset, llm_kwargs)
        elif preset is not None or llm_kwargs:
            raise ConfigurationError(
                "preset and LLM arguments apply only when the reader builds the LLM; "
                "pass a model id/path instead of an LLM, or configure your LLM yourself"
            )
        self.llm: Any = llm
        try:
            model_config = llm.llm_engine.vllm_config.model_config
            vllm_config = llm.llm_engine.vllm_config
            logprobs_mode = getattr(model_config, "logprobs_mode", "raw_logprobs")
            if logprobs_mode not in _LOGPROBS_MODES:
                raise ConfigurationError(
                    f"the LLM returns {logprobs_mode}, not log probabilities; build it with "
                    "logprobs_mode='raw_logprobs' (the default)"
                )
            detected: Mode = "diffusion" if _is_diffusion(model_config) else "next_token"
            self.mode: Mode = mode or detected
            if self.mode != detected:
                raise ConfigurationError(
                    f"mode={mode!r} but the model ({_architecture(model_config)}) is a "
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
            template = chat_template
            if template is None:
                template = getattr(llm, "chat_template", None)
            if self.mode == "diffusion":
                self.served_canvas = _served_canvas(vllm_config)
                _warn_capacity(vllm_config, self.served_canvas, self.vocab_size)
                self.planner = CanvasPlanner(
                    tokenizer,
                    vocab_size=self.vocab_size,
                    served_canvas=self.served_canvas,
                    max_model_len=self.max_model_len,
                    chat_template=template,
                    special_tokens=special_tokens,
                    template_kwargs=template_kwargs,
                )
            else:
                self.served_canvas = 0
                self.planner = NextTokenPlanner(
                    tokenizer,
                    max_model_len=self.max_model_len,
                    chat_template=template,
                    special_tokens=special_tokens,
                    template_kwargs=template_kwargs,
                )
        except BaseException:
            if self._owns_llm:
                _shutdown(llm)
            raise
        self.timeout_s = timeout_s
        self._worker = _EngineWorker(llm, self.mode, batch_window_s, max_batch_reads)
        self._is_variant = False

    # -- construction ----------------------------------------------------------------

    @staticmethod
    def _build_llm(
        model: str | os.PathLike[str] | None,
        preset: str | EnginePreset | None,
        llm_kwargs: dict[str, Any],
    ) -> LLM:
        try:
            from vllm import LLM
        except ImportError as e:
            raise ConfigurationError(
                "VLLMReader needs vLLM: pip install 'agentbranch[vllm]' (a GPU build), or "
                "use RemoteReader against a vLLM server"
            ) from e
        kwargs: dict[str, Any] = {}
        if preset is not None:
            kwargs = get_preset(preset).llm_kwargs()
        if model is not None:
            kwargs["model"] = str(model)
        kwargs.update(llm_kwargs)
        if "model" not in kwargs:
            raise ConfigurationError(
                "VLLMReader needs an LLM, a model id/path, or a preset "
                "(e.g. VLLMReader(preset='fp8'))"
            )
        try:
            return LLM(**kwargs)
        except Exception as e:
            raise ReaderError(
                f"vLLM could not start {kwargs['model']!r}: {e}. Check the model path, GPU "
                "memory (see docs/vllm.md for sizes) and the LLM arguments."
            ) from e

    # -- reading ---------------------------------------------------------------------

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

    def _submit(self, reads: list[TokenRead]) -> _Job:
        job = _Job(reads, self.constrained, self.max_steps, self.max_logprob_ids)
        self._worker.submit(job)
        return job

    # -- options and counters --------------------------------------------------------

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

    @property
    def batch_window_s(self) -> float:
        """How long the worker waits for more calls once one arrived."""
        return self._worker.batch_window_s

    @batch_window_s.setter
    def batch_window_s(self, value: float) -> None:
        self._worker.batch_window_s = value

    @property
    def generate_calls(self) -> int:
        """Batches handed to vLLM so far (``generate`` calls, or rounds of
        ``add_request``), for tests and metrics."""
        return self._worker.generate_calls

    @property
    def reads_run(self) -> int:
        """Token reads run so far."""
        return self._worker.reads_run

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Stop the worker (after the queued reads) and shut down an LLM the reader
        built. Idempotent; a no-op on a ``variant``."""
        if self._is_variant or self._worker.closed:
            return
        self._worker.close()
        if self._owns_llm:
            _shutdown(self.llm)

    def __repr__(self) -> str:
        return f"VLLMReader(model={self.model!r}, mode={self.mode!r})"


# ------------------------------------------------------------------------ helpers


def _shutdown(llm: Any) -> None:
    """Stop the engine processes of an LLM the reader built."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    shutdown = getattr(core, "shutdown", None)
    if callable(shutdown):
        try:
            shutdown()
        except Exception as e:  # noqa: BLE001
            log.warning("vllm shutdown failed: %r", e)


def _is_llm(obj: Any) -> bool:
    return obj is not None and hasattr(obj, "generate") and hasattr(obj, "llm_engine")


def _architecture(model_config: Any) -> str:
    arch = getattr(model_config, "architecture", None)
    if arch:
        return str(arch)
    archs = getattr(getattr(model_config, "hf_config", None), "architectures", None) or []
    return str(archs[0]) if archs else "unknown architecture"


def _is_diffusion(model_config: Any) -> bool:
    if getattr(model_config, "is_diffusion", False):
        return True
    return _architecture(model_config) in DIFFUSION_ARCHITECTURES


def _warn_capacity(vllm_config: Any, canvas: int, vocab_size: int) -> None:
    """Log (WARNING) settings the sizing formula says cannot hold ``max_num_seqs``
    canvases, or leave most of the GPU unused (``agentbranch.engine.capacity.check``)."""
    from agentbranch.engine.capacity.check import engine_capacity_warnings

    for message in engine_capacity_warnings(vllm_config, canvas, vocab_size):
        log.warning("%s", message)


def _served_canvas(vllm_config: Any) -> int:
    """The served canvas width, as vLLM's strategy reads it."""
    diffusion = getattr(vllm_config, "diffusion_config", None)
    if diffusion is not None and getattr(diffusion, "canvas_length", None):
        return int(diffusion.canvas_length)
    canvas = getattr(vllm_config.model_config.hf_config, "canvas_length", None)
    if not canvas:
        raise ConfigurationError("the diffusion model's config has no canvas_length")
    return int(canvas)
