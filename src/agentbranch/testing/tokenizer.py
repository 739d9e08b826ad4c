"""A tiny Gemma-style fast tokenizer built from code, with Gemma's special tokens at their ids
and a chat template (see ``agentbranch.testing``)."""

from __future__ import annotations

import json
import os
import string
from pathlib import Path
from typing import Any

__all__ = ["NEWLINE_ID", "SPECIAL_TOKEN_IDS", "build_tiny_tokenizer", "tiny_chat_template"]

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
NEWLINE_ID = 107  # the last reserved id
_SPACE = "\u2581"  # "▁", SentencePiece's visible space

# Words that become single tokens (with all their prefixes, as a BPE merge chain) and, with a
# leading space, "▁word" tokens. The labels come first; the rest only fill the vocabulary.
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


def _vocab_and_merges(vocab_size: int) -> tuple[dict[str, int], list[tuple[str, str]], list[str]]:
    """Deterministic vocabulary, BPE merges and the list of added (special) token strings."""
    by_id = {i: t for t, i in SPECIAL_TOKEN_IDS.items()}
    specials = [by_id.get(i, f"<unused{i}>") for i in range(NEWLINE_ID)]  # all ids below "\n"
    tokens = [*specials, "\n"]
    # Byte fallback for everything that is not a printable ASCII character (controls, UTF-8).
    tokens += [f"<0x{b:02X}>" for b in range(256) if not (0x20 <= b <= 0x7E) and b != 0x0A]
    tokens += [_SPACE, *(chr(c) for c in range(0x21, 0x7F))]
    word_merges: list[tuple[str, str]] = []
    # Space variants of the single-character labels (and lower-case letters).
    chars = string.ascii_uppercase + string.digits + string.ascii_lowercase
    tokens += [_SPACE + ch for ch in chars]
    space_merges = [(_SPACE, ch) for ch in chars]
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
    unused = [f"<unused{i}>" for i in range(len(tokens), vocab_size)]
    tokens += unused
    specials += unused
    if len(tokens) > vocab_size:
        raise ValueError(
            f"vocab_size={vocab_size} is too small; the tiny tokenizer needs {len(tokens)}"
        )
    return {t: i for i, t in enumerate(tokens)}, merges, specials


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(
        json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )


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

    The tokenizer mirrors the properties of Gemma's that the engine relies on:

    * ``<pad>`` 0, ``<eos>`` 1, ``<bos>`` 2, ``<unk>`` 3, ``<mask>`` 4, ``<|channel>`` 100,
      ``<channel|>`` 101, ``<|turn>`` 105, ``<turn|>`` 106 are special added tokens; ``"\\n"`` is the
      normal token 107; the other ids below 108 are ``<unusedN>`` (or the image tokens 102–104).
    * Spaces are part of tokens (``"▁A"`` and ``"A"`` are distinct ids); ``A``–``Z``, ``0``–``9``,
      ``yes`` and ``no`` are single tokens with or without a leading space; digits never merge.
    * Any text encodes without ``<unk>`` (printable ASCII as characters, everything else as UTF-8
      byte tokens ``<0xNN>``).
    * ``encode`` adds no ``<bos>`` (the chat template writes it), so ``encode("<turn|>") == [106]``.
    """
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
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    plain = dict.fromkeys(("lstrip", "normalized", "rstrip", "single_word"), False)
    added = {
        str(i): {"content": tok.id_to_token(i), **plain, "special": True}
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
