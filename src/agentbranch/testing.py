"""Test helpers: tiny, deterministic DiffusionGemma checkpoints for tests and benchmarks
(docs/design.md), ``FaultyReader`` (fault injection) and ``FakeToolCallingModel`` (a
scripted chat model that ``create_agent`` can bind tools to).

Everything is built from code in seconds, with no model hub: a Gemma-style fast tokenizer
(``tokenizers`` BPE with byte fallback, Gemma's special tokens at their ids, a chat template)
and a random-weight ``DiffusionGemmaForBlockDiffusion`` saved with ``save_pretrained`` plus a
filled ``generation_config.json``. Two builds with the same arguments give byte-identical files.

    folder = build_tiny_diffusiongemma(tmp_path / "tiny")      # hidden 64, 2 layers, 4 experts
    folder = tiny_diffusiongemma()                             # cached in the temp dir by args

The tokenizer mirrors the properties of Gemma's that the engine relies on:

* ``<pad>`` 0, ``<eos>`` 1, ``<bos>`` 2, ``<unk>`` 3, ``<mask>`` 4, ``<|channel>`` 100,
  ``<channel|>`` 101, ``<|turn>`` 105, ``<turn|>`` 106 are special added tokens; ``"\\n"`` is the
  normal token 107; the other ids below 108 are ``<unusedN>`` (or the image tokens 102–104).
* Spaces are part of tokens (``"▁A"`` and ``"A"`` are distinct ids); ``A``–``Z``, ``0``–``9``,
  ``yes`` and ``no`` are single tokens with or without a leading space; digits never merge.
* Any text encodes without ``<unk>`` (printable ASCII as characters, everything else as UTF-8
  byte tokens ``<0xNN>``).
* ``encode`` adds no ``<bos>`` (the chat template writes it), so ``encode("<turn|>") == [106]``.

Over 500 lines: the test helpers users import (tiny model and tokenizer builders,
scripted readers, fake chat models); to become a testing folder in the planned layout
restructuring.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import Field, model_validator

from agentbranch.engine.readers.base import Reader, WrappingReader
from agentbranch.engine.reads import LabelRead
from agentbranch.errors import ConfigurationError

__all__ = [
    "FakeToolCallingModel",
    "FaultyReader",
    "SPECIAL_TOKEN_IDS",
    "NEWLINE_ID",
    "build_tiny_tokenizer",
    "build_tiny_diffusiongemma",
    "tiny_diffusiongemma",
    "tiny_chat_template",
]

SPECIAL_TOKEN_IDS: dict[str, int] = {
    "<pad>": 0,
    "<eos>": 1,
    "<bos>": 2,
    "<unk>": 3,
    "<mask>": 4,
    "<|channel>": 100,
    "<channel|>": 101,
    "<|image>": 102,
    "<image|>": 103,
    "<|image|>": 104,
    "<|turn>": 105,
    "<turn|>": 106,
}
NEWLINE_ID = 107
_FIRST_FREE_ID = 108
_SPACE = "\u2581"  # "▁", SentencePiece's visible space

# Words that become single tokens (with all their prefixes, as a BPE merge chain) and, with a
# leading space, "▁word" tokens. Chosen so no word's chain is broken by another word's merges
# (checked at build time). The labels come first; the rest only fill the vocabulary.
_WORDS: tuple[str, ...] = tuple(
    "yes no model user system thought the and is of to in Yes No True False question answer "
    "option state score route tool agent pick one for be or a an it on as at by we he if do go "
    "up so my me".split()
)

_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{%- if message['content'] is string -%}{%- set content = message['content'] -%}"
    "{%- else -%}{%- set content = message['content'] | selectattr('type', 'equalto', 'text')"
    " | map(attribute='text') | join('') -%}{%- endif -%}"
    "{{- '<|turn>' + role + '\\n' + content + '<turn|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|turn>model\\n' -}}"
    "__THOUGHT__"
    "{%- endif -%}"
)


def tiny_chat_template(*, thought_in_template: bool = False) -> str:
    """The Jinja chat template of the tiny tokenizer.

    A turn renders as ``<|turn>{role}\\n{content}<turn|>\\n`` after one ``<bos>`` (``assistant``
    becomes ``model``); ``add_generation_prompt`` adds ``<|turn>model\\n``. With
    ``thought_in_template=True`` it then also appends ``<|channel>thought\\n<channel|>`` unless
    ``enable_thinking`` is true, like Gemma 4's mainline template.
    """
    thought = (
        "{%- if not enable_thinking | default(false) -%}"
        "{{- '<|channel>thought\\n<channel|>' -}}{%- endif -%}"
        if thought_in_template
        else ""
    )
    return _TEMPLATE.replace("__THOUGHT__", thought)


def _byte_token(b: int) -> str:
    return f"<0x{b:02X}>"


def _vocab_and_merges(vocab_size: int) -> tuple[dict[str, int], list[tuple[str, str]], list[str]]:
    """Deterministic vocabulary, BPE merges and the list of added (special) token strings."""
    tokens: list[str] = []
    specials: list[str] = []
    by_id = {i: t for t, i in SPECIAL_TOKEN_IDS.items()}
    for i in range(_FIRST_FREE_ID):
        if i == NEWLINE_ID:
            tokens.append("\n")
        else:
            tok = by_id.get(i, f"<unused{i}>")
            tokens.append(tok)
            specials.append(tok)
    # Byte fallback for everything that is not a printable ASCII character (controls, UTF-8).
    printable = [chr(c) for c in range(0x21, 0x7F)]
    tokens += [_byte_token(b) for b in range(256) if not (0x20 <= b <= 0x7E) and b != 0x0A]
    tokens += [_SPACE, *printable]
    merges: list[tuple[str, str]] = []
    word_merges: list[tuple[str, str]] = []
    space_merges: list[tuple[str, str]] = []
    # Space variants of the single-character labels (and lower-case letters).
    singles = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    singles += [str(d) for d in range(10)]
    singles += [chr(c) for c in range(ord("a"), ord("z") + 1)]
    for ch in singles:
        tokens.append(_SPACE + ch)
        space_merges.append((_SPACE, ch))
    known = set(tokens)
    for word in _WORDS:
        new: list[str] = []
        chain: list[tuple[str, str]] = []
        for i in range(1, len(word)):
            piece = word[: i + 1]
            if piece not in known and piece not in new:
                new.append(piece)
                chain.append((word[:i], word[i]))
        spaced = _SPACE + word
        if spaced not in known:
            new.append(spaced)
        if len(tokens) + len(new) > vocab_size:
            break
        tokens += new
        known.update(new)
        word_merges += chain
        if (_SPACE, word) not in space_merges:
            space_merges.append((_SPACE, word))
    # Word-internal merges rank first, word by word (earlier words win conflicts, so the labels
    # come first in _WORDS), then the "▁" + word merges, so a word is complete before its
    # leading space attaches to it.
    merges = word_merges + space_merges
    while len(tokens) < vocab_size:
        tok = f"<unused{len(tokens)}>"
        tokens.append(tok)
        specials.append(tok)
    if len(tokens) > vocab_size:
        raise ValueError(
            f"vocab_size={vocab_size} is too small; the tiny tokenizer needs {len(tokens)}"
        )
    return {t: i for i, t in enumerate(tokens)}, merges, specials


def _make_tokenizer_object(vocab_size: int) -> Any:
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

    vocab, merges, specials = _vocab_and_merges(vocab_size)
    bpe = models.BPE(
        vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True
    )
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.Replace(" ", _SPACE)
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence(
        [decoders.Replace(_SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tok.add_special_tokens(
        [
            AddedToken(s, special=True, normalized=False, lstrip=False, rstrip=False)
            for s in specials
        ]
    )
    return tok


def build_tiny_tokenizer(
    path: str | os.PathLike[str],
    *,
    vocab_size: int = 512,
    thought_in_template: bool = False,
) -> Path:
    """Write a Gemma-style fast tokenizer (``tokenizer.json``, ``tokenizer_config.json`` with the
    chat template, ``special_tokens_map.json``) into ``path`` and return it.

    ``transformers.AutoTokenizer.from_pretrained(path)`` loads it. ``vocab_size`` ≥ 512 pads the
    vocabulary with more word pieces and then ``<unusedN>`` tokens.
    """
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    tok = _make_tokenizer_object(vocab_size)
    _check_tokenizer(tok)
    tok.save(str(folder / "tokenizer.json"))
    added = {
        str(i): {
            "content": tok.id_to_token(i),
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i in sorted(tok.get_added_tokens_decoder())
    }
    config = {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": added,
        "bos_token": "<bos>",
        "chat_template": tiny_chat_template(thought_in_template=thought_in_template),
        "clean_up_tokenization_spaces": False,
        "eos_token": "<eos>",
        "extra_special_tokens": {},
        "model_max_length": 1_000_000,
        "pad_token": "<pad>",
        "padding_side": "left",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
    }
    _write_json(folder / "tokenizer_config.json", config)
    _write_json(
        folder / "special_tokens_map.json",
        {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"},
    )
    return folder


def _check_tokenizer(tok: Any) -> None:
    """Fail the build if the label-token properties the engine relies on do not hold."""

    def enc(text: str) -> list[int]:
        return list(tok.encode(text, add_special_tokens=False).ids)

    labels = [chr(c) for c in range(ord("A"), ord("Z") + 1)] + ["yes", "no"]
    labels += [str(d) for d in range(10)]
    newline = enc("\n")
    assert newline == [NEWLINE_ID], newline
    seen: set[int] = set()
    for label in labels:
        plain, spaced = enc(label), enc(" " + label)
        assert len(plain) == 1 and len(spaced) == 1 and plain != spaced, (label, plain, spaced)
        assert plain[0] not in seen and spaced[0] not in seen, label
        seen.update(plain + spaced)
        for tail in (
            "",
            "\n",
            "model\n",
            "thought\n",
            "<|turn>model\n<|channel>thought\n<channel|>",
        ):
            assert enc(tail + label) == enc(tail) + plain, (tail, label)
        line = enc(f"7: {label}")
        assert line[-1] == spaced[0], (label, line)
        assert enc(f"7: {label}\n7: {label}") == line + newline + line, label
    for word in _WORDS:
        for text in (word, " " + word):
            if tok.token_to_id(text.replace(" ", _SPACE)) is not None and len(enc(text)) != 1:
                raise AssertionError(f"word {text!r} encodes as {enc(text)}")


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(
        json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def build_tiny_diffusiongemma(
    path: str | os.PathLike[str],
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_experts: int = 4,
    top_k_experts: int = 2,
    vocab_size: int = 512,
    canvas_length: int = 64,
    max_position_embeddings: int = 4096,
    num_attention_heads: int = 2,
    head_dim: int | None = None,
    intermediate_size: int | None = None,
    moe_intermediate_size: int | None = None,
    sliding_window: int = 64,
    initializer_range: float = 0.1,
    thought_in_template: bool = False,
    seed: int = 0,
) -> Path:
    """Build a random-weight DiffusionGemma checkpoint plus the tiny tokenizer into ``path``.

    Writes ``config.json``, ``model.safetensors``, ``generation_config.json`` (the sampler
    fields vLLM needs: ``sampler_config``, ``t_min``, ``t_max``, thresholds, steps) and the
    tokenizer files; returns the folder. Layers alternate sliding/full attention and the last
    is full attention, as in the real model. Defaults give a ~0.2M-parameter model that runs in
    milliseconds; e.g. ``hidden_size=512, num_layers=8, num_experts=8, vocab_size=4096`` gives
    ~50M. ``initializer_range`` (0.1, larger than the 0.02 of real training inits) keeps the
    random logits from being nearly uniform. Deterministic for the same arguments and seed.
    """
    import torch
    from transformers import (
        DiffusionGemmaConfig,
        DiffusionGemmaForBlockDiffusion,
        DiffusionGemmaTextConfig,
    )
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        DiffusionGemmaGenerationConfig,
        EntropyBoundSamplerConfig,
    )
    from transformers.models.gemma4 import Gemma4VisionConfig

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    heads = num_attention_heads
    head_dim = head_dim or max(8, hidden_size // heads // 2)
    layer_types = [
        "full_attention" if (i % 2 == 1 or i == num_layers - 1) else "sliding_attention"
        for i in range(num_layers)
    ]
    text_config = DiffusionGemmaTextConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        num_key_value_heads=1,
        head_dim=head_dim,
        global_head_dim=2 * head_dim,
        num_global_key_value_heads=1,
        max_position_embeddings=max_position_embeddings,
        sliding_window=sliding_window,
        layer_types=layer_types,
        num_experts=num_experts,
        top_k_experts=top_k_experts,
        moe_intermediate_size=moe_intermediate_size or max(8, hidden_size // 2),
        initializer_range=initializer_range,
        pad_token_id=SPECIAL_TOKEN_IDS["<pad>"],
        eos_token_id=SPECIAL_TOKEN_IDS["<eos>"],
        bos_token_id=SPECIAL_TOKEN_IDS["<bos>"],
    )
    # vision_config=None breaks loading in transformers 5.18/5.19; a minimal one costs ~2k params.
    vision_config = Gemma4VisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=8,
        patch_size=2,
        position_embedding_size=8,
        pooling_kernel_size=2,
    )
    config = DiffusionGemmaConfig(
        text_config=text_config,
        vision_config=vision_config,
        boi_token_id=SPECIAL_TOKEN_IDS["<|image>"],
        eoi_token_id=SPECIAL_TOKEN_IDS["<image|>"],
        image_token_id=SPECIAL_TOKEN_IDS["<|image|>"],
        initializer_range=initializer_range,
        canvas_length=canvas_length,
    )
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(config).eval()
    model.generation_config = DiffusionGemmaGenerationConfig(
        max_new_tokens=canvas_length,
        max_denoising_steps=48,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=0.1),
        t_min=0.4,
        t_max=0.8,
        stability_threshold=1,
        confidence_threshold=0.005,
        bos_token_id=SPECIAL_TOKEN_IDS["<bos>"],
        pad_token_id=SPECIAL_TOKEN_IDS["<pad>"],
        eos_token_id=[SPECIAL_TOKEN_IDS["<eos>"], SPECIAL_TOKEN_IDS["<turn|>"]],
    )
    model.save_pretrained(folder)
    build_tiny_tokenizer(folder, vocab_size=vocab_size, thought_in_template=thought_in_template)
    return folder


_CACHE_VERSION = 1


def tiny_diffusiongemma(path: str | os.PathLike[str] | None = None, **kwargs: Any) -> Path:
    """``build_tiny_diffusiongemma`` with a cache: without ``path`` the folder lives in the
    system temp dir, keyed by the arguments, and is built once (atomically, so parallel test
    workers are safe)."""
    if path is not None:
        return build_tiny_diffusiongemma(path, **kwargs)
    import transformers

    source = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    key_src = json.dumps(
        {"v": _CACHE_VERSION, "src": source, "transformers": transformers.__version__, **kwargs},
        sort_keys=True,
    )
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"agentbranch-tiny-diffusiongemma-{key}"
    if (folder / ".complete").exists():
        return folder
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        build_tiny_diffusiongemma(staging, **kwargs)
        (staging / ".complete").write_text("ok\n")
        try:
            os.replace(staging, folder)
        except OSError:  # another process won the race (target exists and is not empty)
            if not (folder / ".complete").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


# -- fault injection ---------------------------------------------------------------------


class FaultyReader(WrappingReader):
    """Wraps a reader and injects one fault, to test what a graph sees when the engine
    fails (``DecisionEngine`` must turn each into a ``ReaderError``, never a decision).

    ``fault``:

    * ``"raise"`` — the read call raises ``error`` (``ConnectionError`` by default);
    * ``"hang"`` — the read call blocks until ``release()`` (at most ``hang_s``), then
      answers normally;
    * ``"nan"`` / ``"inf"`` — the reads carry a NaN / +inf log-probability;
    * ``"wrong_shape"`` — the reads carry one log-probability too few;
    * ``"partial"`` — partial batch failure: the affected requests get no reads at all,
      the others of the same batch are answered normally.

    ``affects`` picks the requests that get the fault (a predicate on ``ReadRequest``;
    all by default); for ``"raise"`` and ``"hang"`` the whole call faults when any of its
    requests is affected (one read call succeeds or fails as a unit). Set ``active =
    False`` to heal the reader; ``faults`` counts the calls that were faulted and
    ``calls`` records every batch received.
    """

    FAULTS = ("raise", "hang", "nan", "inf", "wrong_shape", "partial")

    def __init__(
        self,
        inner: Reader,
        fault: str,
        *,
        affects: Any = None,
        error: BaseException | None = None,
        hang_s: float = 30.0,
    ) -> None:
        if fault not in self.FAULTS:
            raise ValueError(f"fault must be one of {self.FAULTS}, got {fault!r}")
        self.inner = inner
        self.fault = fault
        self.affects = affects or (lambda request: True)
        self.error = error if error is not None else ConnectionError("injected fault")
        self.hang_s = hang_s
        self.active = True
        self.faults = 0
        self.calls: list[list[Any]] = []
        self._released = threading.Event()
        self._lock = threading.Lock()

    def release(self) -> None:
        """Let every hanging (and future) ``"hang"`` read go on."""
        self._released.set()

    def close(self) -> None:
        self.release()
        self.inner.close()

    def read(self, requests: Any) -> list[list[LabelRead]]:
        requests = list(requests)
        with self._lock:
            self.calls.append(requests)
        hit = [self.active and bool(self.affects(r)) for r in requests]
        if any(hit):
            with self._lock:
                self.faults += 1
            if self.fault == "raise":
                raise self.error
            if self.fault == "hang":
                self._released.wait(self.hang_s)
        reads = self.inner.read(requests)
        if self.fault in ("raise", "hang"):
            return reads
        return [self._spoil(r) if h else r for r, h in zip(reads, hit)]

    def _spoil(self, reads: list[LabelRead]) -> list[LabelRead]:
        if self.fault == "partial":
            return []
        out = []
        for read in reads:
            lps = list(read.logprobs)
            if self.fault == "nan":
                lps[-1] = float("nan")
            elif self.fault == "inf":
                lps[-1] = float("inf")
            else:  # wrong_shape
                lps = lps[:-1]
            out.append(LabelRead(tuple(lps), read.label_mass, read.argmax_is_label, read.agreement))
        return out


# -- a fake tool-calling chat model ------------------------------------------------------


class FakeToolCallingModel(GenericFakeChatModel):
    """A scripted chat model for agent tests, offline: each call answers with the next of
    ``responses`` (an ``AIMessage`` — one with ``tool_calls`` proposes those calls — or a
    string), and ``bind_tools`` works, as ``create_agent`` needs.

    Binding changes nothing (the model answers from its script); the tool names of each
    binding are recorded in ``bound_tools`` (one list per call of ``bind_tools``) and the
    messages of each call in ``received``. Running out of responses is a clear error.

        model = FakeToolCallingModel(responses=[
            AIMessage("", tool_calls=[{"name": "shell", "args": {"cmd": "ls"}, "id": "c1"}]),
            "Done.",
        ])
        agent = create_agent(model, tools=[shell], middleware=[...])
    """

    responses: list[Any]
    bound_tools: list[list[str]] = Field(default_factory=list)
    received: list[list[Any]] = Field(default_factory=list)
    messages: Any = None

    @model_validator(mode="after")
    def _script(self) -> FakeToolCallingModel:
        for r in self.responses:
            if not isinstance(r, AIMessage | str):
                raise TypeError(
                    f"FakeToolCallingModel responses are AIMessages or strings, got {r!r}"
                )
        self.messages = iter(list(self.responses))
        return self

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolCallingModel:
        self.bound_tools.append([_tool_name(t) for t in tools])
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any):
        self.received.append(list(messages))
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        except StopIteration:
            raise ConfigurationError(
                f"FakeToolCallingModel was called {len(self.received)} times but has "
                f"{len(self.responses)} response(s); script one response per model call"
            ) from None

    @property
    def _llm_type(self) -> str:
        return "agentbranch-fake-tool-calling"


def _tool_name(tool: Any) -> str:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    if isinstance(tool, dict) and "name" in tool:
        return str(tool["name"])
    return str(convert_to_openai_tool(tool)["function"]["name"])
