"""One-step structured read vs generation-based decision on a ~50M DiffusionGemma (CPU).

    python benchmarks/bench_read_vs_generate.py [--reps 5] [--steps N] [--keep DIR]

Builds a random-weight DiffusionGemma with ``agentbranch.testing.build_tiny_diffusiongemma``
into a temp dir, then, in ONE process and on the same prompt, times the median of:

(a) **read**: plan the read (chat template + thought block, canvas ``[noise, <turn|>, pad…]``
    of width 16, slot 0, labels A/B/C; the real ``CanvasPlanner``), ONE forward through
    ``TransformersTokenBackend``, pick the label with the highest logprob;
(b) **generate**: the model's own multi-step ``generate`` (``DiffusionGemmaGenerationMixin``:
    encoder prefill, then up to ``max_denoising_steps`` decoder passes over the canvas with
    self-conditioning, entropy-bound sampling and adaptive stopping), decode the text, parse
    the label from it.

Model choice (documented, tune with flags): hidden 512, 9 layers (sliding/full alternating,
last full), 4 query heads, 8 experts top-2 (MoE + dense MLP per layer, as in DiffusionGemma),
vocab 4096, served canvas 64 (the serving preset in docs/design.md; the real model's default
is 256, which would make generation slower still), ≈50M parameters. The vocabulary is 4096
rather than 512 so the unembedding is not negligible, while staying CPU-sized (the real
262,144-token head would dominate both sides).

Caveat: random weights never become confident, so generation's adaptive stopping does not
fire and it runs all ``max_denoising_steps`` (48 by default). A trained model often stops
earlier; the decoder passes used are printed, and ``--steps`` shows the ratio at fewer steps.
The labels parsed from random text are noise; only the timings mean anything. Times are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions of each side")
    ap.add_argument("--steps", type=int, default=None, help="denoising steps (default: config)")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=9)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--canvas", type=int, default=64, help="served canvas_length")
    ap.add_argument("--keep", type=Path, default=None, help="build the model here and keep it")
    args = ap.parse_args()

    import torch

    from agentbranch.core.reads import QuestionSpec, ReadRequest
    from agentbranch.engine.canvas import CanvasPlanner
    from agentbranch.engine.readers.threads import torch_threads
    from agentbranch.engine.readers.transformers import TransformersTokenBackend
    from agentbranch.testing import build_tiny_diffusiongemma

    tmp = None
    if args.keep is None:
        tmp = tempfile.TemporaryDirectory(prefix="agentbranch-bench-")
        folder = Path(tmp.name) / "diffusiongemma-50m"
    else:
        folder = args.keep
    t0 = time.perf_counter()
    if not (folder / "model.safetensors").exists():
        build_tiny_diffusiongemma(
            folder,
            hidden_size=args.hidden,
            num_layers=args.layers,
            num_experts=args.experts,
            num_attention_heads=4,
            vocab_size=args.vocab,
            canvas_length=args.canvas,
            max_position_embeddings=8192,
            sliding_window=512,
            seed=0,
        )
    build_s = time.perf_counter() - t0

    backend = TransformersTokenBackend(folder)
    model, tok = backend.model, backend.tokenizer
    n_params = sum(p.numel() for p in model.parameters())
    steps = args.steps or model.generation_config.max_denoising_steps
    planner = CanvasPlanner(
        tok,
        vocab_size=backend.vocab_size,
        served_canvas=backend.served_canvas,
        max_model_len=backend.max_model_len,
    )
    labels = ("A", "B", "C")
    request = ReadRequest(
        state=(
            "Customer: I was charged twice for my subscription this month and the app keeps "
            "logging me out. I need the duplicate charge refunded today."
        ),
        questions=(
            QuestionSpec(
                id="route",
                type="choice",
                instructions="Which team should handle this ticket?",
                options=("billing", "technical support", "sales"),
                descriptions=("payments, refunds, invoices", "bugs, login, crashes", None),
                labels=labels,
            ),
        ),
    )

    def read_once() -> str:
        (token_read,) = planner.plan(request).token_reads
        ((slot,),) = backend.read_tokens([token_read])
        return labels[max(range(len(labels)), key=slot.logprobs.__getitem__)]

    prompt_ids = planner.plan(request).token_reads[0].prompt_ids
    decoder_calls = [0]
    model.model.decoder.register_forward_pre_hook(
        lambda *_: decoder_calls.__setitem__(0, decoder_calls[0] + 1)
    )
    gen_passes: list[int] = []

    def generate_once() -> str | None:
        (token_read,) = planner.plan(request).token_reads  # the same prompt as the read
        input_ids = torch.tensor([token_read.prompt_ids])
        before = decoder_calls[0]
        # The read runs with the backend's threads; so does generate, or the two
        # would not compare (with the default, one thread vs all cores).
        with torch_threads(backend.threads), torch.inference_mode():
            out = model.generate(
                input_ids,
                max_new_tokens=args.canvas,
                max_denoising_steps=steps,
                return_dict_in_generate=True,
            )
        text = tok.decode(out.sequences[0, input_ids.shape[1] :], skip_special_tokens=True)
        gen_passes.append(decoder_calls[0] - before)
        match = re.search(r"\b([ABC])\b", text)
        return match.group(1) if match else None

    torch.manual_seed(0)
    read_once(), generate_once()  # warm-up (allocator, kernels, lazy imports)
    read_times, gen_times, read_labels, gen_labels = [], [], [], []
    for _ in range(args.reps):
        t = time.perf_counter()
        read_labels.append(read_once())
        read_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        gen_labels.append(generate_once())
        gen_times.append(time.perf_counter() - t)

    read_med, gen_med = statistics.median(read_times), statistics.median(gen_times)
    passes = statistics.median(gen_passes)
    print(
        f"model: {n_params / 1e6:.1f}M parameters (hidden {args.hidden}, {args.layers} layers, "
        f"{args.experts} experts top-2, vocab {args.vocab}, canvas {args.canvas}); "
        f"built in {build_s:.1f}s; torch threads {backend.threads} (read and generate)"
    )
    print(
        f"prompt: {len(prompt_ids)} tokens; read canvas 16; generate: max_new_tokens "
        f"{args.canvas}, max_denoising_steps {steps}, ~{passes:.0f} decoder passes used"
    )
    read_min, gen_min = min(read_times), min(gen_times)
    print(
        f"(a) one-step read     median {read_med * 1e3:9.1f} ms  (min {read_min * 1e3:8.1f})"
        f"   labels {read_labels}"
    )
    print(
        f"(b) generate + parse  median {gen_med * 1e3:9.1f} ms  (min {gen_min * 1e3:8.1f})"
        f"   labels {gen_labels}"
    )
    print(
        f"ratio generate/read: {gen_med / read_med:.1f}x median, {gen_min / read_min:.1f}x min "
        f"({args.reps} interleaved reps each)"
    )
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
