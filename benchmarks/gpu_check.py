"""The GPU check: agentbranch's structured read on DiffusionGemma's real shape, on CUDA.

    bash scripts/gpu_check.sh                       # on a GPU machine: the full shape
    python benchmarks/gpu_check.py --scale small --device cpu   # seconds, any machine

Builds a DiffusionGemma with random weights straight on the device (no hub, no
checkpoint) and, in this one process:

1. reads the seed's workload through ``TransformersReader`` and ``DecisionEngine``:
   one request = one state and 3 questions on ONE joint canvas (a served canvas of 32
   tokens), one denoising step, sent by ``concurrency`` callers at once, each calling
   ``engine.decide_many([state], questions)``, so the engine's coalescer is what batches
   them;
2. reads the same token reads (the ones the reader plans for those requests) through a
   plain batched forward of the same model: input tensors built on the device
   beforehand, ``concurrency`` requests per forward, the encoder, the decoder and the
   head at the answer slots, nothing else (the bound);
3. reads the tiny test model (``agentbranch.testing.tiny_diffusiongemma()``) on the
   device and on the CPU, float32, and compares their labels.

It prints, per concurrency and path, requests/s, decisions/s, p50/p95 latency, peak GPU
memory and the engine's share of the plain forward's requests/s, and writes everything to
``gpu_check.json`` in ``--out`` (default: ``$OUT``, else a new temp dir), rewritten after
each step so a run stopped early still leaves what it measured. Nothing is asserted.

Where the full shape comes from (``--scale full``). The text model of
``google/diffusiongemma-26B-A4B-it`` is Gemma 4 26B-A4B's; its published ``config.json``
(``text_config``, as public copies of the file give it) has: 30 layers (5 sliding-window
: 1 full attention, the last full), hidden 2816, 16 attention heads, 8 key/value heads of
256 on sliding layers and 2 of 512 on full layers, a dense MLP of 2112 beside 128
experts of 704 with 8 active per token, vocabulary 262,144, sliding window 1024, 262,144
positions, logit soft-cap 30. The
transformers ``DiffusionGemmaTextConfig`` class supplies the rest as its defaults (RoPE
10k sliding / 1M proportional with a 0.25 rotary factor on full layers,
``gelu_pytorch_tanh``, RMS norm 1e-6, tied embeddings, init std 0.02) and shares the
encoder's layers with the decoder (one set of weights: 25.25B parameters, 47 GiB in
bf16). The hub cannot be reached from these machines, so the values are written
out in ``FULL`` below. Left out on purpose: the vision tower is a minimal one (an
image-free read never runs it), and the tokenizer is agentbranch's test tokenizer
(Gemma's special tokens at Gemma's ids, most words spelt letter by letter, so prompts are
several times longer in tokens than with Gemma's own; both paths read the same tokens).
If the model does not fit the device's free memory, ``--layers`` (or the automatic
fallback) keeps fewer layers, and the output says so.

``--scale small`` is a tiny config of the same structure that runs on a CPU in seconds:
the test suite runs the whole script that way (tests/test_gpu_check.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:  # run from a checkout, installed or not
    sys.path.insert(0, str(ROOT / "src"))

import agentbranch as ab  # noqa: E402
from agentbranch.core.questions import to_spec, validate_questions  # noqa: E402
from agentbranch.core.reads import ReadRequest, SlotLogprobs, TokenRead  # noqa: E402
from agentbranch.engine.readers.threads import torch_threads  # noqa: E402
from agentbranch.engine.readers.transformers import (  # noqa: E402
    TransformersReader,
    TransformersTokenBackend,
)
from agentbranch_bench.workload import questions as seed_questions  # noqa: E402
from agentbranch_bench.workload import states as ticket_states  # noqa: E402

#: The published text config of google/diffusiongemma-26B-A4B-it (see the docstring).
FULL: dict[str, Any] = {
    "vocab_size": 262_144,
    "hidden_size": 2816,
    "num_hidden_layers": 30,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "global_head_dim": 512,
    "num_global_key_value_heads": 2,
    "intermediate_size": 2112,
    "num_experts": 128,
    "top_k_experts": 8,
    "moe_intermediate_size": 704,
    "sliding_window": 1024,
    "max_position_embeddings": 262_144,
    "initializer_range": 0.02,
}
#: The same structure, tiny: a CPU reads it in milliseconds.
SMALL: dict[str, Any] = {
    "vocab_size": 512,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "global_head_dim": 32,
    "num_global_key_value_heads": 1,
    "intermediate_size": 128,
    "num_experts": 4,
    "top_k_experts": 2,
    "moe_intermediate_size": 32,
    "sliding_window": 64,
    "max_position_embeddings": 4096,
    # Larger than real inits so random logits are not nearly uniform (as the test models).
    "initializer_range": 0.1,
}
SCALES = {"full": FULL, "small": SMALL}
#: The seed's read: a served canvas of 32 tokens, one denoising step, 3 questions.
CANVAS = 32
#: The seed's published figures (prototype, vLLM, one DGX Spark): requests/s by
#: concurrency, 3 decisions per request, 32-token canvas.
SEED = {
    "1": {"requests_per_s": 8.7, "latency_s": 0.12},
    "32": {"requests_per_s": 54.0, "latency_s": 0.58},
}
GIB = 1024**3


# -- the model ------------------------------------------------------------------------


def layer_types(n: int) -> list[str]:
    """Gemma 4's pattern: five sliding-window layers, then one full; the last is full."""
    types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
    types[-1] = "full_attention"
    return types


def model_config(scale: str, layers: int | None = None) -> Any:
    """The ``DiffusionGemmaConfig`` of ``scale`` with ``layers`` layers (default: all)."""
    from transformers import DiffusionGemmaConfig, DiffusionGemmaTextConfig
    from transformers.models.gemma4 import Gemma4VisionConfig

    from agentbranch.testing.tokenizer import SPECIAL_TOKEN_IDS

    text = dict(SCALES[scale])
    if layers is not None:
        text["num_hidden_layers"] = layers
    text["layer_types"] = layer_types(text["num_hidden_layers"])
    ids = SPECIAL_TOKEN_IDS
    text_config = DiffusionGemmaTextConfig(
        **text, pad_token_id=ids["<pad>"], eos_token_id=ids["<eos>"], bos_token_id=ids["<bos>"]
    )
    # An image-free read never runs the vision tower; a minimal one keeps its memory off
    # (None breaks loading in some transformers 5.x releases).
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
    return DiffusionGemmaConfig(
        text_config=text_config,
        vision_config=vision_config,
        boi_token_id=ids["<|image>"],
        eoi_token_id=ids["<image|>"],
        image_token_id=ids["<|image|>"],
        initializer_range=text["initializer_range"],
        canvas_length=CANVAS,
    )


def meta_model(config: Any, dtype: Any) -> Any:
    """The model's modules with no storage (the meta device): shapes, dtypes and the
    encoder/decoder weight sharing, for free."""
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    with torch.device("meta"):
        return DiffusionGemmaForBlockDiffusion._from_config(config, dtype=dtype)


def parameter_bytes(model: Any) -> int:
    """Bytes of the distinct parameters and buffers (shared weights count once)."""
    seen = {id(p): p for p in model.parameters()} | {id(b): b for b in model.buffers()}
    return sum(t.numel() * t.element_size() for t in seen.values())


def materialize(model: Any, device: Any, seed: int) -> Any:
    """Give the meta ``model`` storage on ``device`` and random weights there.

    Building the model normally would allocate the encoder's layers and the decoder's
    separately before tying them (twice the memory: the full shape would not fit an
    80 GB card), so each distinct parameter gets one tensor, shared wherever the meta
    model shares it; then transformers' own initialisation fills everything, and the
    buffers it leaves alone (the encoder layers' ``layer_scalar``) get their
    constructor's value, 1.
    """
    import torch

    made: dict[int, torch.nn.Parameter] = {}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is None:
                continue
            if id(p) not in made:
                empty = torch.empty(p.shape, dtype=p.dtype, device=device)
                made[id(p)] = torch.nn.Parameter(empty, requires_grad=False)
            module._parameters[name] = made[id(p)]
        for name, b in list(module._buffers.items()):
            if b is not None:
                module._buffers[name] = torch.empty(b.shape, dtype=b.dtype, device=device)
    torch.manual_seed(seed)
    if torch.device(device).type == "cuda":
        torch.cuda.manual_seed_all(seed)
    model.initialize_weights()
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.fill_(1.0)
    return model.eval()


def build(scale: str, device: str, dtype: Any, seed: int, layers: int | None) -> tuple[Any, dict]:
    """The model on ``device``, with fewer layers if the full count does not fit."""
    import torch

    published = SCALES[scale]["num_hidden_layers"]
    config = model_config(scale, layers)
    meta = meta_model(config, dtype)
    need = parameter_bytes(meta)
    info: dict[str, Any] = {"layers_published": published}
    if torch.device(device).type == "cuda":
        free, total = torch.cuda.mem_get_info()
        info |= {"gpu_free_bytes_before": free, "gpu_total_bytes": total}
        headroom = 6 * GIB  # activations, the prompt cache and the allocator's slack
        n = config.text_config.num_hidden_layers
        if layers is None and need > free - headroom:
            per_layer = (need - parameter_bytes(meta_model(model_config(scale, 1), dtype))) / (
                n - 1
            )
            fit = max(1, int((free - headroom - (need - per_layer * n)) // per_layer))
            info["fallback"] = f"{n} layers need {need / GIB:.1f} GiB, {free / GIB:.1f} free"
            config = model_config(scale, fit)
            meta = meta_model(config, dtype)
            need = parameter_bytes(meta)
    start = time.perf_counter()
    model = materialize(meta, device, seed)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    text = config.text_config
    info |= {
        "layers": text.num_hidden_layers,
        "hidden_size": text.hidden_size,
        "experts": text.num_experts,
        "active_experts": text.top_k_experts,
        "vocab_size": text.vocab_size,
        "canvas_length": config.canvas_length,
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameter_bytes": need,
        "dtype": str(dtype).removeprefix("torch."),
        "build_s": round(time.perf_counter() - start, 2),
        "experts_implementation": getattr(model.config, "_experts_implementation", None),
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
    }
    return model, info


class CountingReader(TransformersReader):
    """``TransformersReader`` that keeps the size of every batch it reads (what the
    coalescer made of the concurrent callers) and the token reads themselves."""

    def __init__(self, backend: TransformersTokenBackend) -> None:
        super().__init__(backend)
        self.batches: list[int] = []
        self.seen: list[TokenRead] = []

    def read_tokens(self, reads: Sequence[TokenRead]) -> list[list[SlotLogprobs]]:
        self.batches.append(len(reads))
        self.seen.extend(reads)
        return super().read_tokens(reads)


def make_reader(model: Any, device: str, scale: str) -> CountingReader:
    """The reader on ``model``, with the test tokenizer (built in a temp dir)."""
    from transformers import AutoTokenizer

    from agentbranch.testing.tokenizer import build_tiny_tokenizer

    with tempfile.TemporaryDirectory(prefix="agentbranch-gpu-check-") as folder:
        build_tiny_tokenizer(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)  # held in memory from here on
    backend = TransformersTokenBackend(
        model, tokenizer, device=device, model_id=f"diffusiongemma-{scale}-random"
    )
    return CountingReader(backend)


# -- the two paths --------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100)."""
    ordered = sorted(values)
    k = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return ordered[k]


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def reset_peak(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak(device: str) -> int | None:
    import torch

    return int(torch.cuda.max_memory_allocated()) if device.startswith("cuda") else None


def figures(latencies: list[float], wall: float, n_questions: int, device: str) -> dict:
    n = len(latencies)
    return {
        "requests": n,
        "wall_s": round(wall, 4),
        "requests_per_s": round(n / wall, 3),
        "decisions_per_s": round(n * n_questions / wall, 3),
        "p50_s": round(percentile(latencies, 50), 5),
        "p95_s": round(percentile(latencies, 95), 5),
        "peak_gpu_bytes": peak(device),
    }


def run_engine(
    engine: ab.DecisionEngine, states: list[str], questions: dict, concurrency: int, device: str
) -> tuple[dict, list[list[int]]]:
    """``concurrency`` callers, each deciding its share of ``states`` one request at a
    time through ``engine.decide_many([state], questions)``. Returns the figures and
    each request's chosen option indices."""
    reader = engine.reader
    assert isinstance(reader, CountingReader)
    chosen: list[list[int]] = [[] for _ in states]
    latencies = [0.0] * len(states)
    errors: list[BaseException] = []
    gate = threading.Barrier(concurrency)

    def caller(k: int) -> None:
        try:
            gate.wait()
            for i in range(k, len(states), concurrency):
                start = time.perf_counter()
                decisions = engine.decide_many([states[i]], questions)[0]
                latencies[i] = time.perf_counter() - start
                chosen[i] = [decisions[q].index for q in questions]
        except BaseException as e:  # reported after the join, not lost in a thread
            errors.append(e)

    reset_peak(device)
    reader.batches.clear()
    threads = [threading.Thread(target=caller, args=(k,)) for k in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    out = figures(latencies, wall, len(questions), device)
    out["reader_batches"] = len(reader.batches)
    out["mean_batch"] = round(statistics.fmean(reader.batches), 2)
    return out, chosen


def planned_reads(reader: TransformersReader, states: list[str], questions: dict) -> list:
    """The token read the reader plans for each state (one joint canvas per request)."""
    specs = tuple(to_spec(k, q) for k, q in validate_questions(questions).items())
    reads = []
    for state in states:
        tokens, _ = reader.plan([ReadRequest(state=state, questions=specs, joint=True)])
        if len(tokens) != 1:
            raise SystemExit(f"expected one joint canvas per request, the plan has {len(tokens)}")
        reads.append(tokens[0])
    return reads


class PlainForward:
    """The bound: the model's forward over ``reads`` in batches, inputs already on the
    device: encoder and decoder (``model.model``), then the head at the answer slots
    (``lm_head``, soft-cap, log-softmax over the vocabulary) and the label tokens'
    log-probabilities back on the host. The same padding as the reader (prompts left,
    canvases right), so the same numbers come out."""

    def __init__(self, backend: TransformersTokenBackend, reads: list[TokenRead], size: int):
        import torch

        self.model = backend.model
        self.softcap = getattr(self.model, "final_logit_softcapping", None)
        self.device = backend.device
        self.threads = backend.threads
        pad = backend.pad_token_id
        self.batches = []
        for a in range(0, len(reads), size):
            group = reads[a : a + size]
            b = len(group)
            lens = [len(r.prompt_ids) for r in group]
            widths = [len(r.canvas) for r in group]
            s, c = max(lens), max(widths)
            ids = torch.full((b, s), pad, dtype=torch.long)
            canvas = torch.full((b, c), pad, dtype=torch.long)
            for i, r in enumerate(group):
                ids[i, s - lens[i] :] = torch.tensor(r.prompt_ids)
                canvas[i, : widths[i]] = torch.tensor(r.canvas)
            kwargs: dict[str, Any] = {}
            if len(set(lens)) > 1 or len(set(widths)) > 1:
                lens_t = torch.tensor(lens)[:, None]
                prompt_mask = torch.arange(s)[None, :] >= (s - lens_t)
                canvas_mask = torch.arange(c)[None, :] < torch.tensor(widths)[:, None]
                kwargs = {
                    "attention_mask": prompt_mask.long(),
                    "position_ids": (torch.arange(s)[None, :] - (s - lens_t)).clamp(min=0),
                    "decoder_attention_mask": torch.cat([prompt_mask, canvas_mask], 1).long(),
                    "decoder_position_ids": lens_t + torch.arange(c)[None, :],
                }
            rows = [(i, slot.position) for i, r in enumerate(group) for slot in r.slots]
            groups = [slot.label_ids for r in group for slot in r.slots]
            labels = max(len(g) for g in groups)
            width = max(len(t) for g in groups for t in g)
            # (slots, labels, width): each label's token ids, padded with its first id (the
            # max is unchanged); slots with fewer labels are padded with masked-out rows.
            label_ids = [
                [list(t) + [t[0]] * (width - len(t)) for t in g] + [[0] * width] * (labels - len(g))
                for g in groups
            ]
            label_mask = [[i < len(g) for i in range(labels)] for g in groups]
            self.batches.append(
                {
                    "n": b,
                    "input_ids": ids.to(self.device),
                    "decoder_input_ids": canvas.to(self.device),
                    "kwargs": {k: v.to(self.device) for k, v in kwargs.items()},
                    "rows": torch.tensor(rows, device=self.device),
                    "label_ids": torch.tensor(label_ids, device=self.device),
                    "label_mask": torch.tensor(label_mask, device=self.device),
                }
            )

    def forward(self, batch: dict) -> Any:
        import torch

        # The reader's torch thread count (it matters on a CPU only), so the two paths differ
        # in what the engine adds and nothing else.
        with torch.inference_mode(), torch_threads(self.threads):
            hidden = self.model.model(
                input_ids=batch["input_ids"],
                decoder_input_ids=batch["decoder_input_ids"],
                **batch["kwargs"],
            ).last_hidden_state
            rows = batch["rows"]
            logits = self.model.lm_head(hidden[rows[:, 0], rows[:, 1]]).to(torch.float32)
            if self.softcap:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            lp = torch.log_softmax(logits, dim=-1)
            ids = batch["label_ids"]  # (slots, labels, width)
            label_lp = lp.gather(1, ids.flatten(1)).view(ids.shape).amax(dim=-1)
            return label_lp.masked_fill(~batch["label_mask"], -math.inf).cpu()

    def run(self, n_questions: int, device: str) -> tuple[dict, list[list[int]]]:
        """Every batch once, back to back; each request's latency is its batch's time."""
        reset_peak(device)
        latencies: list[float] = []
        chosen: list[list[int]] = []
        start = time.perf_counter()
        for batch in self.batches:
            t0 = time.perf_counter()
            label_lp = self.forward(batch)
            took = time.perf_counter() - t0
            latencies += [took] * batch["n"]
            best = label_lp.argmax(dim=-1).tolist()
            chosen += [best[i : i + n_questions] for i in range(0, len(best), n_questions)]
        wall = time.perf_counter() - start
        out = figures(latencies, wall, n_questions, device)
        out["reader_batches"] = len(self.batches)
        out["mean_batch"] = round(statistics.fmean(b["n"] for b in self.batches), 2)
        return out, chosen


def same_share(a: list[list[int]], b: list[list[int]]) -> float:
    pairs = [(x, y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)]
    return round(sum(x == y for x, y in pairs) / len(pairs), 4)


# -- the tiny model on the device against the CPU ---------------------------------------


def tiny_agreement(device: str, n: int) -> dict:
    """The tiny test model's decisions, float32, on ``device`` and on the CPU: joint and
    single reads of ``n`` states."""
    from agentbranch.testing import tiny_diffusiongemma

    folder = tiny_diffusiongemma()
    questions = seed_questions()
    states = ticket_states(n, "tiny-")
    out: dict[str, Any] = {"device": device, "states": n, "questions": len(questions)}
    answers = {}
    for where in dict.fromkeys([device, "cpu"]):
        reader = TransformersReader.from_pretrained(folder, device=where)
        for joint in (True, False):
            engine = ab.DecisionEngine(reader, joint=joint)
            answers[where, joint] = engine.decide_many(states, questions)
            engine.close()
    labels = total = 0
    diff = 0.0
    for joint in (True, False):
        for got, ref in zip(answers[device, joint], answers["cpu", joint], strict=True):
            for q in questions:
                total += 1
                labels += got[q].label == ref[q].label
                for option, p in ref[q].probabilities.items():
                    diff = max(diff, abs(got[q].probabilities[option] - p))
    out |= {"decisions": total, "same_label": labels, "max_probability_diff": diff}
    out["agree"] = labels == total
    if device == "cpu":
        out["note"] = "no accelerator: the CPU was compared with itself (the path ran)"
    return out


# -- the run ------------------------------------------------------------------------------


def environment(device: str) -> dict:
    import torch
    import transformers

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "agentbranch": getattr(ab, "__version__", None),
        "device": device,
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        env |= {
            "gpu": props.name,
            "gpu_memory_bytes": props.total_memory,
            "capability": f"{props.major}.{props.minor}",
            "cuda": torch.version.cuda,
        }
    else:
        env["cpu_threads"] = torch.get_num_threads()
    return env


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'conc':>4} {'path':<7} {'requests':>8} {'req/s':>8} {'dec/s':>8} "
        f"{'p50 ms':>8} {'p95 ms':>8} {'batch':>6} {'peak GiB':>8}"
    )
    print(head)
    for r in rows:
        for path in ("engine", "plain"):
            f = r[path]
            mem = "-" if f["peak_gpu_bytes"] is None else f"{f['peak_gpu_bytes'] / GIB:.2f}"
            print(
                f"{r['concurrency']:>4} {path:<7} {f['requests']:>8} "
                f"{f['requests_per_s']:>8.2f} {f['decisions_per_s']:>8.2f} "
                f"{f['p50_s'] * 1e3:>8.1f} {f['p95_s'] * 1e3:>8.1f} "
                f"{f['mean_batch']:>6.1f} {mem:>8}"
            )
        print(
            f"{'':>4} ratio engine / plain forward (requests/s): {r['ratio']:.2f}; "
            f"same labels {r['same_labels']:.0%}"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default="full")
    ap.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda if any)")
    ap.add_argument("--concurrency", default="1,8,32", help="comma-separated caller counts")
    ap.add_argument(
        "--requests",
        type=int,
        default=None,
        help="requests per concurrency, rounded up to a multiple of it (default: 128 full, "
        "32 small)",
    )
    ap.add_argument(
        "--step-s",
        type=float,
        default=20.0,
        help="about how long each path may take per concurrency: fewer requests (at least 2 "
        "rounds) when the warm-up says --requests would take longer (default 20)",
    )
    ap.add_argument("--layers", type=int, default=None, help="fewer layers than published")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default=None,
                    help="default: bf16 on CUDA, fp32 on CPU")  # fmt: skip
    ap.add_argument("--tiny-states", type=int, default=16, help="states of the tiny check")
    ap.add_argument("--out", default=None, help="folder of gpu_check.json (default: $OUT)")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    args = parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here; pass --device cpu")
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[
        args.dtype or ("bf16" if device.startswith("cuda") else "fp32")
    ]
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    if not concurrencies or min(concurrencies) < 1:
        raise SystemExit("--concurrency takes positive caller counts, e.g. 1,8,32")
    wanted = args.requests or (128 if args.scale == "full" else 32)
    if wanted < 1:
        raise SystemExit("--requests takes a positive count")
    out_dir = Path(args.out or os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu-check-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    result_file = out_dir / "gpu_check.json"
    result: dict[str, Any] = {
        "scale": args.scale,
        "environment": environment(device),
        "read": {"canvas_served": CANVAS, "denoising_steps": 1, "questions_per_request": 3},
        "seed_published": {
            "setup": "prototype, vLLM, one DGX Spark, 32-token canvas, 3 decisions/request",
            "by_concurrency": SEED,
            "decisions_per_s_at_32": 162,
        },
        "runs": [],
    }

    def save() -> None:
        result_file.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    def failed(step: str, e: BaseException) -> None:
        """A step that fails is recorded and the next one still runs (one device run
        should bring back everything that works)."""
        result.setdefault("errors", []).append({"step": step, "error": repr(e)})
        save()
        print(f"FAILED {step}: {e!r}", flush=True)

    started = time.perf_counter()
    print(f"gpu check: scale {args.scale}, device {device}, {result['environment']}", flush=True)
    save()
    # The tiny model first: seconds, and its answer matters even if the big model fails.
    try:
        tiny = result["tiny_agreement"] = tiny_agreement(device, args.tiny_states)
        save()
        print(
            f"tiny model, {device} vs cpu (float32): {tiny['same_label']}/{tiny['decisions']} "
            f"same labels, max probability difference {tiny['max_probability_diff']:.2e}"
            + (f" ({tiny['note']})" if "note" in tiny else ""),
            flush=True,
        )
    except Exception as e:
        failed("tiny agreement", e)
    try:
        model, info = build(args.scale, device, dtype, args.seed, args.layers)
    except Exception as e:  # e.g. out of memory: nothing below can run
        failed("build", e)
        return 1
    result["model"] = info
    save()
    print(
        f"model: {info['layers']} layers (published {info['layers_published']}), hidden "
        f"{info['hidden_size']}, {info['experts']} experts ({info['active_experts']} active), "
        f"vocab {info['vocab_size']:,}, {info['parameters'] / 1e9:.2f}B parameters "
        f"({info['parameter_bytes'] / GIB:.1f} GiB {info['dtype']}), built in "
        f"{info['build_s']} s" + (f"; FALLBACK: {info['fallback']}" if "fallback" in info else ""),
        flush=True,
    )
    reader = make_reader(model, device, args.scale)
    questions = seed_questions()
    engine = ab.DecisionEngine(reader, joint=True)
    warm = ticket_states(max(concurrencies), "warm-")
    # The first forward's one-off work (CUDA kernels, the allocator) is nobody's latency.
    engine.decide_many(warm[:1], questions)
    reads = planned_reads(reader, warm[:1], questions)
    result["read"] |= {
        "canvas_read": len(reads[0].canvas),
        "prompt_tokens": len(reads[0].prompt_ids),
        "slots": len(reads[0].slots),
    }
    for concurrency in concurrencies:
        try:
            row = compare(engine, reader, questions, warm, concurrency, wanted, args.step_s, device)
        except Exception as e:
            failed(f"concurrency {concurrency}", e)
            continue
        result["runs"].append(row)
        save()
        print_table([row])
    engine.close()
    result["total_s"] = round(time.perf_counter() - started, 1)
    save()
    print("\nsummary (seed: 8.7 req/s at 1, 54 at 32, ~162 decisions/s; vLLM, DGX Spark):")
    print_table(result["runs"])
    print(f"read: {result['read']}")
    print(f"wrote {result_file} in {result['total_s']} s")
    ok = "errors" not in result and result.get("tiny_agreement", {}).get("agree")
    return 0 if ok else 1


def compare(
    engine: ab.DecisionEngine,
    reader: CountingReader,
    questions: dict,
    warm: list[str],
    concurrency: int,
    wanted: int,
    step_s: float,
    device: str,
) -> dict:
    """One concurrency: the engine's run, then the plain forward of the same reads, each
    after a warm-up. ``wanted`` requests in whole rounds of callers, fewer (at least two
    rounds) if the warm-up round says they would take more than ``step_s``."""
    warm_figures, _ = run_engine(engine, warm[:concurrency], questions, concurrency, device)
    rounds = -(-wanted // concurrency)
    affordable = max(2, int(step_s / max(warm_figures["wall_s"], 1e-3)))
    n = min(rounds, affordable) * concurrency
    states = ticket_states(n, f"c{concurrency}-")
    reader.seen.clear()
    engine_figures, engine_chosen = run_engine(engine, states, questions, concurrency, device)
    reads = planned_reads(reader, states, questions)
    seen = {r.prompt_ids: r for r in reader.seen}
    plain = PlainForward(reader.backend, reads, concurrency)
    plain.forward(plain.batches[0])
    plain_figures, plain_chosen = plain.run(len(questions), device)
    sync(device)
    return {
        "concurrency": concurrency,
        "engine": engine_figures,
        "plain": plain_figures,
        "ratio": round(engine_figures["requests_per_s"] / plain_figures["requests_per_s"], 3),
        "same_labels": same_share(engine_chosen, plain_chosen),
        "same_token_reads": all(seen.get(r.prompt_ids) == r for r in reads),
        "mean_prompt_tokens": round(statistics.fmean(len(r.prompt_ids) for r in reads), 1),
    }


if __name__ == "__main__":
    sys.exit(main())
