"""TransformersTokenBackend: one-step canvas reads on the tiny DiffusionGemma."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from agentbranch.core.errors import ConfigurationError, ReaderError, StateTooLongError
from agentbranch.core.reads import Slot, SlotLogprobs, TokenRead
from agentbranch.engine.readers.transformers import TransformersTokenBackend  # noqa: E402

TOL = 1e-5


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path) -> TransformersTokenBackend:  # noqa: F811
    return TransformersTokenBackend(tiny_model_dir)


def _prompt(tok, text: str) -> tuple[int, ...]:
    rendered = tok.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
    )
    return tuple(tok.encode(rendered + "<|channel>thought\n<channel|>", add_special_tokens=False))


def _labels(tok, *labels: str, spaced: bool = False) -> tuple[tuple[int, ...], ...]:
    groups = []
    for label in labels:
        ids = [tok.convert_tokens_to_ids(label)]
        if spaced:
            ids.append(tok.convert_tokens_to_ids("\u2581" + label))
        groups.append(tuple(ids))
    return tuple(groups)


def _single(tok, text: str, noise: int = 300, width: int = 16) -> TokenRead:
    canvas = (noise, 106) + (0,) * (width - 2)
    return TokenRead(
        _prompt(tok, text), canvas, (Slot(0, _labels(tok, "A", "B", "C")),), read_length=2
    )


def _joint(tok, text: str, n: int, width: int = 32) -> TokenRead:
    """``k: <noise>\\n`` lines, one slot per line, then ``<turn|>`` and pad."""
    canvas: list[int] = []
    slots = []
    for k in range(1, n + 1):
        canvas += tok.encode(f"{k}:", add_special_tokens=False)
        slots.append(Slot(len(canvas), _labels(tok, "yes", "no", spaced=True)))
        canvas += [250 + k, 107]
    canvas += [106]
    canvas += [0] * (width - len(canvas))
    return TokenRead(
        _prompt(tok, text), tuple(canvas), tuple(slots), read_length=slots[-1].position + 1
    )


def _batch(tok) -> list[TokenRead]:
    return [
        _single(tok, "hi"),
        _single(tok, "route this ticket to billing or support? " * 6, noise=411),
        _joint(tok, "three questions about the same state", 3),
        _single(tok, "a medium sized state", noise=77, width=48),
        _joint(tok, "x", 5, width=64),
    ]


def _close(a: SlotLogprobs, b: SlotLogprobs) -> bool:
    return (
        all(abs(x - y) <= TOL for x, y in zip(a.logprobs, b.logprobs, strict=True))
        and abs(a.label_mass - b.label_mass) <= TOL
        and a.argmax_is_label == b.argmax_is_label
    )


def test_properties(backend: TransformersTokenBackend, tiny_model_dir: Path) -> None:  # noqa: F811
    assert backend.vocab_size == 512
    assert backend.served_canvas == 64
    assert backend.max_model_len == backend.model.config.text_config.max_position_embeddings
    assert backend.model_id == tiny_model_dir.name
    assert backend.tokenizer.convert_tokens_to_ids("<turn|>") == 106
    assert not backend.model.training
    assert next(backend.model.parameters()).dtype == torch.float32
    capped = TransformersTokenBackend(
        backend.model, backend.tokenizer, max_model_len=128, model_id="tiny"
    )
    assert capped.max_model_len == 128 and capped.model_id == "tiny"


def test_batched_equals_single(backend: TransformersTokenBackend) -> None:
    reads = _batch(backend.tokenizer)
    assert len({len(r.prompt_ids) for r in reads}) > 2 and len({len(r.canvas) for r in reads}) > 2
    batched = backend.read_tokens(reads)
    assert [len(x) for x in batched] == [len(r.slots) for r in reads]
    for read, got in zip(reads, batched, strict=True):
        (alone,) = backend.read_tokens([read])
        for a, b in zip(got, alone, strict=True):
            assert _close(a, b), (a, b)


def test_batch_order_and_chunking_do_not_matter(backend: TransformersTokenBackend) -> None:
    reads = _batch(backend.tokenizer)
    base = backend.read_tokens(reads)
    reordered = backend.read_tokens(reads[::-1])[::-1]
    chunked = TransformersTokenBackend(
        backend.model, backend.tokenizer, max_batch_size=2
    ).read_tokens(reads)
    for x, y, z in zip(base, reordered, chunked, strict=True):
        for a, b, c in zip(x, y, z, strict=True):
            assert _close(a, b) and _close(a, c)


def test_repeated_reads_identical(backend: TransformersTokenBackend) -> None:
    reads = _batch(backend.tokenizer)
    assert backend.read_tokens(reads) == backend.read_tokens(reads)


def test_logprobs_are_log_probabilities(backend: TransformersTokenBackend) -> None:
    reads = _batch(backend.tokenizer)
    rows = backend.canvas_logprobs(reads)
    for read, lp in zip(reads, rows, strict=True):
        assert lp.shape == (len(read.canvas), backend.vocab_size)
        assert torch.logsumexp(lp.double(), dim=-1).abs().max() < 1e-5
    for read, got, lp in zip(reads, backend.read_tokens(reads), rows, strict=True):
        for slot, s in zip(read.slots, got, strict=True):
            row = lp[slot.position]
            distinct = sorted({t for g in slot.label_ids for t in g})
            assert 0 < s.label_mass <= 1
            assert s.label_mass == pytest.approx(sum(math.exp(row[t]) for t in distinct), abs=TOL)
            for group, value in zip(slot.label_ids, s.logprobs, strict=True):
                assert value <= 0
                assert value == pytest.approx(max(row[t].item() for t in group), abs=TOL)


def test_matches_direct_forward_and_argmax_flag(backend: TransformersTokenBackend) -> None:
    tok = backend.tokenizer
    read = _single(tok, "is it raining?")
    with torch.no_grad():
        logits = backend.model(
            input_ids=torch.tensor([read.prompt_ids]), decoder_input_ids=torch.tensor([read.canvas])
        ).logits[0, 0]
    direct = torch.log_softmax(logits, dim=-1)
    top = int(direct.argmax())
    others = [t for t in (5, 6, 7, 8) if t != top]
    hit = TokenRead(read.prompt_ids, read.canvas, (Slot(0, ((others[0],), (top, others[1]))),))
    miss = TokenRead(read.prompt_ids, read.canvas, (Slot(0, ((others[0],), (others[1],))),))
    got_hit, got_miss = (r[0] for r in backend.read_tokens([hit, miss]))
    assert got_hit.argmax_is_label and not got_miss.argmax_is_label
    assert got_hit.logprobs[1] == pytest.approx(direct[top].item(), abs=TOL)
    assert got_hit.logprobs[0] == pytest.approx(direct[others[0]].item(), abs=TOL)
    # A label's score is its best id; the mass counts each distinct id once.
    dup = TokenRead(read.prompt_ids, read.canvas, (Slot(0, ((top,), (top, others[0]))),))
    (got_dup,) = backend.read_tokens([dup])[0]
    expected = math.exp(direct[top].item()) + math.exp(direct[others[0]].item())
    assert got_dup.label_mass == pytest.approx(expected, abs=TOL)
    assert got_dup.logprobs[0] == got_dup.logprobs[1]


def test_slot_reads_depend_on_inputs(backend: TransformersTokenBackend) -> None:
    tok = backend.tokenizer
    a, b = backend.read_tokens([_single(tok, "first"), _single(tok, "second, quite different")])
    assert a[0].logprobs != b[0].logprobs
    (joint,) = backend.read_tokens([_joint(tok, "state", 3)])
    assert len(joint) == 3 and joint[0].logprobs != joint[1].logprobs


def test_empty_batch_and_no_slots(backend: TransformersTokenBackend) -> None:
    tok = backend.tokenizer
    assert backend.read_tokens([]) == []
    bare = TokenRead(_prompt(tok, "x"), (300, 106) + (0,) * 14, ())
    assert backend.read_tokens([bare]) == [[]]


def test_invalid_reads_are_errors(backend: TransformersTokenBackend) -> None:
    tok = backend.tokenizer
    good = _single(tok, "x")
    with pytest.raises(ReaderError, match="empty canvas"):
        backend.read_tokens([TokenRead(good.prompt_ids, (), good.slots)])
    with pytest.raises(ReaderError, match="wider than the served canvas"):
        backend.read_tokens([TokenRead(good.prompt_ids, (0,) * 65, good.slots)])
    with pytest.raises(ReaderError, match="outside the canvas"):
        backend.read_tokens([TokenRead(good.prompt_ids, good.canvas, (Slot(16, ((5,),)),))])
    with pytest.raises(ReaderError, match="outside the vocabulary"):
        backend.read_tokens([TokenRead(good.prompt_ids, good.canvas, (Slot(0, ((512,),)),))])
    small = TransformersTokenBackend(backend.model, tok, max_model_len=len(good.prompt_ids) + 8)
    with pytest.raises(StateTooLongError, match="max_model_len"):
        small.read_tokens([good])


def test_configuration_errors(backend: TransformersTokenBackend, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="tokenizer"):
        TransformersTokenBackend(backend.model)
    with pytest.raises(ConfigurationError, match="config.json"):
        TransformersTokenBackend(tmp_path)
