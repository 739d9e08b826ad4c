"""A one-step read vs the model's own multi-step ``generate`` + parse, on a ~50M
random-weight DiffusionGemma (as ``benchmarks/bench_read_vs_generate.py``)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from agentbranch_bench.joint import joint_vs_singles
from agentbranch_bench.results import BenchResult, Report
from agentbranch_bench.timing import paired
from agentbranch_bench.workload import TICKETS

__all__ = ["read_vs_generate"]


def read_vs_generate(report: Report, tick: Callable[[str], None], *, reps: int) -> None:
    """A ~50M DiffusionGemma: one-step read vs ``generate`` + parse, same prompt (as
    ``benchmarks/bench_read_vs_generate.py``)."""

    import torch

    import agentbranch as ab
    from agentbranch.core.reads import QuestionSpec, ReadRequest
    from agentbranch.engine.canvas import CanvasPlanner
    from agentbranch.engine.readers.threads import torch_threads
    from agentbranch.engine.readers.transformers import TransformersTokenBackend
    from agentbranch.testing import build_tiny_diffusiongemma

    with tempfile.TemporaryDirectory(prefix="agentbranch-bench-") as tmp:
        folder = build_tiny_diffusiongemma(
            Path(tmp) / "dg50m",
            hidden_size=512,
            num_layers=9,
            num_experts=8,
            num_attention_heads=4,
            vocab_size=4096,
            canvas_length=64,
            max_position_embeddings=8192,
            sliding_window=512,
            seed=0,
        )
        backend = TransformersTokenBackend(folder)
        model, tok = backend.model, backend.tokenizer
        planner = CanvasPlanner(
            tok,
            vocab_size=backend.vocab_size,
            served_canvas=backend.served_canvas,
            max_model_len=backend.max_model_len,
        )
        labels = ("A", "B", "C")
        request = ReadRequest(
            state=TICKETS[1],
            questions=(
                QuestionSpec(
                    "route",
                    "choice",
                    "Which team should handle this ticket?",
                    ("billing", "technical support", "sales"),
                    ("payments, refunds, invoices", "bugs, login, crashes", None),
                    labels,
                ),
            ),
        )
        tick("~50M DiffusionGemma built")

        def read_once() -> str:
            (token_read,) = planner.plan(request).token_reads
            ((slot,),) = backend.read_tokens([token_read])
            return labels[max(range(3), key=slot.logprobs.__getitem__)]

        def generate_once() -> str | None:
            (token_read,) = planner.plan(request).token_reads
            ids = torch.tensor([token_read.prompt_ids])
            # The read runs with the backend's threads; so does generate, or the two
            # would not compare (with the default, one thread vs all cores).
            with torch_threads(backend.threads), torch.inference_mode():
                out = model.generate(ids, max_new_tokens=64, return_dict_in_generate=True)
            text = tok.decode(out.sequences[0, ids.shape[1] :], skip_special_tokens=True)
            found = re.search(r"\b([ABC])\b", text)
            return found.group(1) if found else None

        torch.manual_seed(0)
        t_read, t_gen = paired(read_once, generate_once, reps)
        joint_vs_singles(report, tick, ab.TransformersReader(backend), "~50M", reps * 2)
    report.results.append(
        BenchResult(
            "read vs generate + parse (~50M DiffusionGemma)",
            t_gen / t_read,
            "× faster",
            "≥ 20",
            {"read_s": t_read, "generate_s": t_gen},
        )
    )
    tick(f"read vs generate: {t_gen / t_read:.1f}×")
