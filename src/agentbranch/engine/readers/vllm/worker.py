"""The engine worker: the one thread that owns a vLLM ``LLM`` (vLLM's offline engine is
not thread-safe) and runs every read and generation on it."""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from agentbranch.core.at_exit import ENGINES, finish_at_exit
from agentbranch.core.errors import AgentBranchError, ReaderError
from agentbranch.core.reads import SlotLogprobs, TokenRead
from agentbranch.engine.readers.vllm.generation import (
    GenerationJob,
    generation_params,
    generation_result,
)
from agentbranch.engine.readers.vllm.outputs import fold_outputs
from agentbranch.engine.readers.vllm.requests import (
    EngineRequest,
    Mode,
    engine_requests,
    sampling_params,
)

__all__ = ["EngineWorker", "Job"]


@dataclass
class Job:
    """One call's token reads and read options; ``future`` gets their ``SlotLogprobs``."""

    reads: list[TokenRead]
    constrained: bool
    max_steps: int
    max_ids: int
    future: Future[list[list[SlotLogprobs]]] = field(default_factory=Future)

    @property
    def size(self) -> int:
        """The worker's batch-size count: the job's token reads."""
        return len(self.reads)


@dataclass(eq=False)
class _Running:
    """A job whose requests are in the engine; ``outputs`` fill in as they finish."""

    job: Job | GenerationJob
    requests: list[EngineRequest] | list[GenerationJob]
    outputs: list[Any]
    left: int


_STOP = object()


class EngineWorker:
    """The one thread that owns an ``LLM``: calls from any thread or event loop queue a
    ``Job`` (reads) or a ``GenerationJob`` with a future, and every job gets its own
    results as its requests finish.

    With vLLM's engine API the worker drives ``llm.llm_engine`` as ``LLM.generate`` does
    (``add_request``, then ``step``) without waiting for a whole batch: idle, it takes
    everything queued (waiting ``batch_window_s`` for more, up to ``max_batch_reads``
    token reads); busy, it adds what arrives at once, so it joins vLLM's next step
    (``_run_stepping``). A streamed generation gets its text after every step. An
    ``LLM`` stand-in without the engine API gets ONE ``generate`` call per batch
    (``_run``), and a stream its text once, at the end.
    """

    def __init__(self, llm: Any, mode: Mode, batch_window_s: float, max_batch_reads: int | None):
        self.llm = llm
        self.mode = mode
        self.batch_window_s = batch_window_s
        self.max_batch_reads = max_batch_reads
        self.generate_calls = 0
        self.reads_run = 0
        self.generations_run = 0
        self.closed = False
        # The ``LLMEngine`` when it offers the request API ``LLM.generate`` itself runs on
        # (``add_request``/``step``), else ``None`` (then ``generate``).
        self._engine = getattr(llm, "llm_engine", None)
        needed = ("add_request", "step", "has_unfinished_requests", "abort_request")
        if not all(callable(getattr(self._engine, n, None)) for n in needed):
            self._engine = None
        self._ids = itertools.count()
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        run = self._run if self._engine is None else self._run_stepping
        self._thread = threading.Thread(target=run, name="agentbranch-vllm", daemon=True)
        self._thread.start()
        # At exit the reads already handed to vLLM finish before vLLM shuts down (its
        # engine freed under a step aborts the process).
        finish_at_exit(self._finish_at_exit, order=ENGINES)

    def submit(self, job: Job | GenerationJob) -> None:
        with self._lock:
            if self.closed:
                raise ReaderError("this VLLMReader is closed; create a new one")
            self._queue.put(job)

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop taking jobs; what was queued before is run. Waits up to ``timeout_s``
        for the worker to finish it."""
        with self._lock:
            if not self.closed:
                self.closed = True
                self._queue.put(_STOP)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout_s)

    def _finish_at_exit(self, deadline: float) -> None:
        self.close(timeout_s=max(0.0, deadline - time.monotonic()))

    def _take(self, wait: bool) -> tuple[list[Any], bool]:
        """Queued jobs (up to ``max_batch_reads`` token reads) and whether to stop.
        ``wait``: block for a first job, then up to ``batch_window_s`` for more;
        otherwise only what is queued now."""
        jobs: list[Any] = []
        count = 0
        deadline: float | None = None  # set once a first job is in, when waiting
        while (wait and not jobs) or self.max_batch_reads is None or count < self.max_batch_reads:
            try:
                if not wait:
                    job = self._queue.get_nowait()
                elif deadline is None:
                    job = self._queue.get()
                    deadline = time.monotonic() + self.batch_window_s
                else:
                    job = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if job is _STOP:
                return jobs, True
            jobs.append(job)
            count += job.size
        return jobs, False

    def _requests(self, job: Job | GenerationJob) -> list[Any] | None:
        """The job's engine requests (a generation is its own one request), or ``None``
        when it was cancelled or is invalid (then its future says so)."""
        if not job.future.set_running_or_notify_cancel():
            return None
        if isinstance(job, GenerationJob):
            return [job]
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

    def _run(self) -> None:
        stop = False
        while not stop:
            jobs, stop = self._take(wait=True)
            batch = [(job, rs) for job in jobs if (rs := self._requests(job)) is not None]
            try:
                results = self._generate(batch) if batch else []
            except BaseException as e:  # noqa: BLE001 - every waiter must hear of it
                error = e if isinstance(e, AgentBranchError) else _engine_error(e)
                for job, _ in batch:
                    job.future.set_exception(error)
            else:
                for (job, _), result in zip(batch, results):
                    job.future.set_result(result)

    def _generate(self, batch: list[tuple[Any, list[Any]]]) -> list[Any]:
        """ONE ``LLM.generate`` call for every job's requests."""
        from vllm.inputs import TokensPrompt

        requests = [r for _, rs in batch for r in rs]
        prompts = [TokensPrompt(prompt_token_ids=r.prompt_ids) for r in requests]
        params = [_params(r) for r in requests]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        self.generate_calls += 1
        self._count(job for job, _ in batch)
        if len(outputs) != len(requests):
            raise ReaderError(f"vLLM returned {len(outputs)} outputs for {len(requests)} requests")
        each = iter(outputs)  # every job's outputs, in its requests' order
        return [_result(job, rs, list(itertools.islice(each, len(rs)))) for job, rs in batch]

    def _count(self, jobs: Any) -> None:
        for job in jobs:
            if isinstance(job, GenerationJob):
                self.generations_run += 1
            else:
                self.reads_run += len(job.reads)

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
            self._finish(outputs, live)

    def _finish(self, outputs: Sequence[Any], live: dict[str, tuple[_Running, int]]) -> None:
        """File the finished outputs of one engine step; answer the jobs they complete."""
        for output in outputs:
            if not output.finished:
                self._progress(output, live)
                continue
            entry = live.pop(output.request_id, None)
            if entry is None:
                continue
            run, index = entry
            run.outputs[index] = output
            run.left -= 1
            if run.left == 0:
                try:
                    result = _result(run.job, run.requests, run.outputs)
                except AgentBranchError as e:
                    _fail(run.job, e)
                else:
                    run.job.future.set_result(result)

    def _progress(self, output: Any, live: dict[str, tuple[_Running, int]]) -> None:
        """A streamed generation's text so far goes to its listener; a stream its
        consumer left is aborted in vLLM (it stops using the batch's steps)."""
        entry = live.get(output.request_id)
        job = entry[0].job if entry is not None else None
        if not isinstance(job, GenerationJob) or job.on_text is None:
            return
        if job.cancel.is_set():
            live.pop(output.request_id, None)
            with contextlib.suppress(Exception):
                self._engine.abort_request([output.request_id])
            _fail(job, ReaderError("the generation's stream was closed; vLLM aborted it"))
            return
        if output.outputs:
            try:
                job.on_text(str(output.outputs[0].text))
            except Exception:  # noqa: BLE001 - a listener never stops the engine
                job.cancel.set()

    def _add(self, jobs: list[Any], live: dict[str, tuple[_Running, int]]) -> None:
        """Add the jobs' requests to the engine, as ``LLM.generate`` adds its prompts:
        rendered by the LLM's renderer, ``FINAL_ONLY`` outputs; reads undetokenized (a
        read needs the logprobs, never the text)."""
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        runs = [
            _Running(job, rs, [None] * len(rs), len(rs))
            for job in jobs
            if (rs := self._requests(job)) is not None
        ]
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
                    params = _params(request, engine=True)
                    streamed = getattr(request, "on_text", None) is not None
                    # A streamed generation reports its text after every step.
                    params.output_kind = (
                        RequestOutputKind.CUMULATIVE if streamed else RequestOutputKind.FINAL_ONLY
                    )
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
        self._count(run.job for run in runs)


def _params(request: EngineRequest | GenerationJob, *, engine: bool = False) -> Any:
    if isinstance(request, GenerationJob):
        return generation_params(request, engine=engine)
    return sampling_params(request, engine=engine)


def _result(job: Job | GenerationJob, requests: list[Any], outputs: list[Any]) -> Any:
    if isinstance(job, GenerationJob):
        return generation_result(job, outputs[0])
    return fold_outputs(job.reads, requests, outputs)


def _fail(job: Job | GenerationJob, error: BaseException) -> None:
    with contextlib.suppress(InvalidStateError):
        job.future.set_exception(error)


def _engine_error(e: BaseException) -> ReaderError:
    """The ``ReaderError`` every waiter gets when vLLM itself failed (cause: ``e``)."""
    error = ReaderError(
        f"vLLM failed the read: {type(e).__name__}: {e}. If the engine died (out of "
        "memory, lost GPU), rebuild the reader; if vLLM rejected the request, check "
        "that the LLM is the model the reader was built for."
    )
    error.__cause__ = e
    return error
