"""The tiny DiffusionGemma builder: deterministic, loadable, Gemma-like tokenizer."""

from __future__ import annotations

import hashlib
import string
from pathlib import Path

import pytest
import torch
import transformers

from agentbranch.testing import (
    NEWLINE_ID,
    SPECIAL_TOKEN_IDS,
    build_tiny_diffusiongemma,
    build_tiny_tokenizer,
    tiny_diffusiongemma,
)

LABELS = list(string.ascii_uppercase) + ["yes", "no"] + [str(d) for d in range(10)]


def _hashes(folder: Path) -> dict[str, str]:
    return {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(folder.iterdir())
        if f.is_file() and f.name != ".complete"  # the cache marker of tiny_diffusiongemma()
    }


@pytest.fixture(scope="module")
def tok(tiny_model_dir: Path):  # noqa: F811
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path):  # noqa: F811
    return transformers.DiffusionGemmaForBlockDiffusion.from_pretrained(tiny_model_dir).eval()


def test_build_is_deterministic(tmp_path: Path, tiny_model_dir: Path) -> None:  # noqa: F811
    again = build_tiny_diffusiongemma(tmp_path / "again")
    hashes = _hashes(again)
    assert hashes == _hashes(tiny_model_dir)
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    } <= set(hashes)


def test_seed_changes_weights_only(tmp_path: Path, tiny_model_dir: Path) -> None:  # noqa: F811
    other = _hashes(build_tiny_diffusiongemma(tmp_path / "seed1", seed=1))
    base = _hashes(tiny_model_dir)
    assert other["model.safetensors"] != base["model.safetensors"]
    assert other["tokenizer.json"] == base["tokenizer.json"]
    assert other["config.json"] == base["config.json"]


def test_tiny_diffusiongemma_caches(tmp_path: Path) -> None:
    first = tiny_diffusiongemma(canvas_length=32)
    second = tiny_diffusiongemma(canvas_length=32)
    assert first == second and (first / "model.safetensors").exists()
    explicit = tiny_diffusiongemma(tmp_path / "x", canvas_length=32)
    assert _hashes(explicit)["model.safetensors"] == _hashes(first)["model.safetensors"]


def test_loads_and_forward_shape(model, tok, tiny_model_dir: Path) -> None:  # noqa: F811
    cfg = model.config
    assert cfg.canvas_length == 64
    assert cfg.text_config.vocab_size == 512 == len(tok)
    assert cfg.text_config.num_experts == 4 and cfg.text_config.top_k_experts == 2
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Is the sky blue?"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    ids = torch.tensor([tok.encode(prompt, add_special_tokens=False)])
    canvas = torch.randint(
        0, 512, (1, cfg.canvas_length), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        out = model(input_ids=ids, decoder_input_ids=canvas)
    assert out.logits.shape == (1, cfg.canvas_length, 512)
    logits = out.logits[0]
    assert torch.isfinite(logits).all()
    assert logits.std(dim=-1).min() > 0.05  # non-degenerate: logits differ across the vocab
    assert not torch.allclose(logits[0], logits[1])  # and across positions


def test_generation_config_has_sampler_fields(tiny_model_dir: Path) -> None:  # noqa: F811
    import json

    gen = json.loads((tiny_model_dir / "generation_config.json").read_text())
    for key in (
        "sampler_config",
        "t_min",
        "t_max",
        "stability_threshold",
        "confidence_threshold",
        "max_denoising_steps",
    ):
        assert gen[key] is not None, key
    assert gen["sampler_config"]["entropy_bound"] > 0
    assert gen["t_max"] > gen["t_min"]
    loaded = transformers.GenerationConfig.from_pretrained(tiny_model_dir)
    assert loaded.max_denoising_steps == 48


def test_special_tokens(tok) -> None:
    assert isinstance(tok, transformers.PreTrainedTokenizerFast)
    added = tok.get_added_vocab()
    for text, idx in SPECIAL_TOKEN_IDS.items():
        assert added[text] == idx
        assert tok.convert_tokens_to_ids(text) == idx
        assert tok.encode(text, add_special_tokens=False) == [idx]
    assert tok.encode("<turn|>") == [106]
    assert added["<unused5>"] == 5
    assert "\n" not in added and tok.encode("\n") == [NEWLINE_ID] == [107]
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id) == (0, 1, 2)
    as_text = tok.encode("<turn|>", split_special_tokens=True)
    assert 106 not in as_text and len(as_text) > 1
    assert tok.decode(as_text) == "<turn|>"


def test_chat_template(tok) -> None:
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text == "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"
    no_gen = tok.apply_chat_template(msgs[1:], add_generation_prompt=False, tokenize=False)
    assert no_gen == "<bos><|turn>user\nHi<turn|>\n"
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert tok.apply_chat_template(parts, tokenize=False) == no_gen
    ids = tok.encode(text, add_special_tokens=False)
    assert ids[:2] == [2, 105] and ids[-3:-1] == [105, tok.convert_tokens_to_ids("model")]
    assert ids[-1] == NEWLINE_ID


def test_thought_in_template(tiny_thought_tokenizer_dir: Path, tiny_tokenizer_dir: Path) -> None:  # noqa: F811
    tok = transformers.AutoTokenizer.from_pretrained(tiny_thought_tokenizer_dir)
    msgs = [{"role": "user", "content": "Hi"}]
    off = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert off.endswith("<|turn>model\n<|channel>thought\n<channel|>")
    on = tok.apply_chat_template(
        msgs, add_generation_prompt=True, tokenize=False, enable_thinking=True
    )
    assert on.endswith("<|turn>model\n")
    plain = transformers.AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    assert plain.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False).endswith(
        "<|turn>model\n"
    )
    # Same vocabulary either way.
    assert tok.get_vocab() == plain.get_vocab()


@pytest.mark.parametrize(
    "tail_text", ["", "\n", "model\n", "thought\n", "<|turn>model\n<|channel>thought\n<channel|>"]
)
def test_labels_are_single_tokens_after_prompt_tail(tok, tail_text: str) -> None:
    tail = tok.encode(tail_text, add_special_tokens=False)
    ids = set()
    for label in LABELS:
        enc = tok.encode(tail_text + label, add_special_tokens=False)
        assert enc[: len(tail)] == tail and len(enc) == len(tail) + 1, (label, enc)
        ids.add(enc[-1])
    assert len(ids) == len(LABELS)


def test_joint_read_lines(tok) -> None:
    nl = tok.encode("\n", add_special_tokens=False)
    for label in LABELS:
        plain = tok.encode(label, add_special_tokens=False)
        spaced = tok.encode(" " + label, add_special_tokens=False)
        assert len(plain) == len(spaced) == 1 and plain != spaced
        for k in range(1, 65):
            line = tok.encode(f"{k}: {label}", add_special_tokens=False)
            prefix = tok.encode(f"{k}:", add_special_tokens=False)
            assert line == prefix + spaced, (k, label, line)
            both = tok.encode(f"{k}: {label}\n{k}: {label}", add_special_tokens=False)
            assert both == line + nl + line


@pytest.mark.parametrize(
    "text",
    [
        "Hello, World! 123 ~`|\\{}",
        "tab\there\r\n",
        "naïve café — 東京 😀",
        "\x00\x7f",
        "  two  spaces  ",
    ],
)
def test_any_text_round_trips_without_unk(tok, text: str) -> None:
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text


def test_larger_vocab_keeps_properties(tmp_path: Path) -> None:
    folder = build_tiny_tokenizer(tmp_path / "big", vocab_size=4096)
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    assert len(tok) == 4096
    assert tok.encode("<turn|>") == [106] and tok.encode("\n") == [107]
    for label in LABELS:
        assert len(tok.encode(" " + label)) == 1 and len(tok.encode(label)) == 1
