"""Learning from the teacher on the path users run: each public question streamed through a
LangGraph ``decide_node``, learning off and on, in one run.

The questions are ``learning.py``'s (``embedded_calibration.tasks_for`` on each public
set, ``public_sets.py``; one draw of hand-written examples), asked of the set's held-out
part in a seeded order (``--streams`` orders per question). Each decision is one
``graph.invoke`` of a one-node graph: ``decide_node(engine, {question_id: question},
state_key="text", policy=...)`` on ``DecisionEngine.from_env()`` (the embedded default),
with

    Policy(
        take_at=Earned(precision=0.9, level=0.95, learn=<off|on>, store=<a JSON Lines file>),
        fallbacks=[Generate(teacher)],
        audit=Audit(rate=0.2, seed=<stream>),
    )

and a teacher (a LangChain chat model) that answers the true option of the state in its
prompt. Every decision the engine does not take goes to the teacher, a fifth of the
taken ones are audited by it (the audit queue is flushed after each decision, so an
audit counts before the next decision, as with a teacher faster than the traffic).
Learning runs as shipped except that versions are fitted on the calling thread
(``earned.learner.background = False``) and without the wait for other replicas'
labels (``settle_s = 0``: one writer), so a run is reproducible.

Printed per question and mode: decisions, coverage, take precision (against the truth),
coverage in the stream's second half, labels until the first take (the decisions before
it: every one was labelled), and the version deciding at the end; then pooled: coverage
on/off, pooled take precision, the worst question's precision (>= 20 takes) and the
median labels to first take. Written to ``benchmarks/results/learning_path.{txt,json}``.

The state embeddings are remembered across decisions and runs (``--cache``; the reader's
own forward computes each one once, a text always gets the same vector): the embedding
of a 1,000-character article is most of a read's cost on 2 shared cores, and a state is
read by learn-off, learn-on and every trial version.

    pip install 'agentbranch[bench]'
    HF_HUB_OFFLINE=1 python benchmarks/learning_path.py --streams 1            # everything
    HF_HUB_OFFLINE=1 python benchmarks/learning_path.py --quick                # a few questions
    HF_HUB_OFFLINE=1 python benchmarks/learning_path.py --questions bbc.is_sport snips.intent
    HF_HUB_OFFLINE=1 python benchmarks/learning_path.py --limit 100 --name learning_path_first100

``--templated`` runs the short separable streams instead (``TEMPLATED``: support
messages written from a few fixed phrasings per answer, slots filled at random; a
logistic head on the embeddings of 24 labels separates the answers), ``--limit 100``
by default: how soon learning takes where labels separate.

    HF_HUB_OFFLINE=1 python benchmarks/learning_path.py --templated --streams 5 --name learning_path_templated

``--split tune`` / ``--split check`` run half the sets each (``SPLITS``): constants of
the learning were chosen on ``tune`` only. ``--set`` changes a constant of the learning;
``--no-correction`` tests every version at the whole error (no union bound across
versions), ``--versions-apart`` the written question at the whole error and the versions
together at another, ``--versions-scale K`` each version at ``K`` times its share (all
three weaker guarantees than the library's), and ``--audit-rate`` audits another share
of the taken decisions: studies of what the guarantee costs.
"""

from __future__ import annotations

import argparse
import json
import operator
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import embedded_calibration as ec  # noqa: E402
import public_sets as ps  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402

import agentbranch as ab  # noqa: E402
from agentbranch.langgraph import decide_node  # noqa: E402
from agentbranch.policy import Audit, Earned, Generate, Policy  # noqa: E402

TARGET, LEVEL, RATE = 0.9, 0.95, 0.2
SETS = {**ec.FIT_SETS, "snips": ps.snips}
#: Which sets constants were chosen on (``tune``) and which only checked them (``check``).
SPLITS = {"tune": ("bbc", "drugs"), "check": ("snips", "tweets")}
QUICK = ("bbc.is_sport", "bbc.is_tech", "snips.play_music", "drugs.worked")
MODES = {"off": False, "on": True}


#: Shares of the error by version (``version_share(j, base)``) that studies test at
#: instead of the library's: weaker guarantees than the shipped one, for comparison only.
STUDY_SHARES: dict[str, Any] = {
    "none": lambda j, base=None: 1.0,  # every version at the whole error (no union bound)
    # the written question at the whole error, the versions together at another
    "apart": lambda j, base=None: 1.0 if j == 0 else 1.0 / (j * (j + 1)),
}


def spend_error(share: Any) -> None:
    """Test every version at ``share(j, base)`` of the error from now on, in this process
    (a study; ``learning_type1.py`` puts the library's back)."""
    from agentbranch.policy.earned.learn import ladder

    ladder.version_share = share


#: Slots the templated phrasings are filled from (``templated``).
SLOTS = {
    "name": ["Ana", "Ben", "Chloe", "Dev", "Erik", "Fatima", "Goran", "Hana", "Ivo", "Jun"],
    "item": ["kettle", "jacket", "phone case", "desk lamp", "backpack", "blender", "monitor"],
    "n": [str(n) for n in range(1040, 1100)],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "the weekend"],
}
#: The short separable streams: per question, how it is written and a few fixed
#: phrasings per answer. Bare questions (the embedded reader's written read cannot open:
#: ``ladder.base_share``) and described ones (it can).
TEMPLATED: dict[str, tuple[Any, dict[str, list[str]]]] = {
    "tmpl.refund": (
        ab.yes_no("Is the customer asking for a refund?"),
        {
            "yes": [
                "Hi, this is {name}. I want my money back for order {n}.",
                "The {item} broke after a day, please refund me.",
                "Can I get a refund on the {item} I bought on {day}?",
            ],
            "no": [
                "Hi, this is {name}. Where is order {n}? It has not arrived.",
                "How do I change the delivery address for my {item}?",
                "Do you have the {item} in another colour? I'd order it by {day}.",
            ],
        },
    ),
    "tmpl.cancel": (
        ab.yes_no("Does the customer want to cancel?"),
        {
            "yes": [
                "Please cancel order {n} before it ships, {name}.",
                "I no longer need the {item}, cancel my order please.",
                "Stop my subscription from {day} on, I'm done with it.",
            ],
            "no": [
                "Love the {item}! Could you add gift wrap to order {n}?",
                "{name} here: when will my {item} be delivered?",
                "Is there a discount if I buy two of the {item}?",
            ],
        },
    ),
    "tmpl.urgency": (
        ab.score("How urgent is this message?", ["low", "medium", "high"]),
        {
            "low": [
                "No rush at all, {name} here: just curious about the {item}.",
                "Whenever you have time, could you tell me about order {n}?",
            ],
            "medium": [
                "My {item} from order {n} has a scratch, what can be done?",
                "I was charged twice for the {item}, please look into it this week.",
            ],
            "high": [
                "URGENT: my account was hacked, someone ordered a {item} as {name}!",
                "Emergency: the {item} is sparking and smells of smoke right now!",
            ],
        },
    ),
    "tmpl.topic": (
        ab.choice("What is the message about?", ["billing", "delivery", "account"]),
        {
            "billing": [
                "Why was I charged twice for order {n}?",
                "The invoice for the {item} shows the wrong VAT number.",
                "My card was declined when paying for the {item} on {day}.",
            ],
            "delivery": [
                "The courier left my {item} at the wrong door on {day}.",
                "Tracking for order {n} has not moved since {day}.",
                "Can the {item} be delivered to my office instead?",
            ],
            "account": [
                "{name} here, I can't log in after resetting my password.",
                "Please change the email address on my account to a new one.",
                "How do I delete my account and all my data, {name} asks.",
            ],
        },
    ),
    "tmpl.refund_described": (
        ab.yes_no(
            "Is the customer asking for a refund?",
            yes="the customer wants their money back",
            no="the customer asks about something else",
        ),
        {},  # the phrasings of tmpl.refund
    ),
    "tmpl.sentiment": (
        ab.choice(
            "How does the customer feel?",
            {"happy": "pleased, thankful, satisfied", "unhappy": "annoyed, disappointed, angry"},
        ),
        {
            "happy": [
                "Thanks {name}, the {item} arrived early and works great!",
                "Order {n} was perfect, I'll shop here again.",
                "Really pleased with the {item}, thank you for the quick help on {day}.",
            ],
            "unhappy": [
                "This is the third time order {n} is late. Terrible service.",
                "The {item} is cheap junk and nobody answers my emails.",
                "I waited all {day} for the courier and nobody came. Unacceptable.",
            ],
        },
    ),
}
TEMPLATED["tmpl.refund_described"] = (
    TEMPLATED["tmpl.refund_described"][0],
    TEMPLATED["tmpl.refund"][1],
)


class TemplatedTask:
    """A templated question (``TEMPLATED``): what ``run_stream`` asks."""

    def __init__(self, qid: str, question: Any) -> None:
        self.id, self.question = qid, question


def templated(
    length: int = 300, seed: int = 0
) -> list[tuple[TemplatedTask, list[tuple[str, str]]]]:
    """Each templated question with ``length`` items (message, true answer): answers
    drawn uniformly, a phrasing of the answer uniformly, its slots at random, and a
    ticket number of its own (seeded). The ticket number makes every message distinct:
    a message seen before is a repeat of a labelled decision, which the learner counts
    once (no new label), as it would a retried one."""
    rng = np.random.default_rng(seed)
    out = []
    for qid, (question, phrasings) in TEMPLATED.items():
        answers = sorted(phrasings)
        items = []
        tickets = rng.choice(np.arange(10_000, 100_000), size=length, replace=False)
        for ticket in tickets:
            answer = answers[int(rng.integers(len(answers)))]
            text = phrasings[answer][int(rng.integers(len(phrasings[answer])))]
            fill = {k: v[int(rng.integers(len(v)))] for k, v in SLOTS.items()}
            items.append((f"Ticket {ticket}: " + text.format(**fill), answer))
        out.append((TemplatedTask(qid, question), items))
    return out


class Teacher(BaseChatModel):
    """Answers the true option of the state in its prompt (``Generate`` and ``Audit``)."""

    truth: dict[str, str]
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "truth-teacher"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls += 1
        prompt = str(messages[-1].content)
        state = prompt.split("Input:\n", 1)[-1].split("\n\nQuestion:", 1)[0]
        label = self.truth.get(state)
        if label is None:  # (a prompt laid out otherwise: the state it holds)
            label = next(y for s, y in self.truth.items() if s in prompt)
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(json.dumps({"label": label})))]
        )


class State(TypedDict, total=False):
    text: str
    decisions: Annotated[dict, operator.or_]


class EmbeddingMemo:
    """The reader's embeddings remembered by text (and kept in ``path``): a text is
    embedded by the reader's own forward once, then its vector is reused."""

    def __init__(self, reader: Any, path: Path | None) -> None:
        self.reader, self.path = reader, path
        self.vecs: dict[str, Any] = {}
        self.readable: dict[str, bool] = {}
        self.new = 0
        if path is not None and path.exists():
            with np.load(path, allow_pickle=False) as z:
                texts = [str(t) for t in z["texts"]]
                for t, v, r in zip(texts, z["vecs"], z["readable"]):
                    self.vecs[t], self.readable[t] = v, bool(r)
        self._embed = reader._embed
        reader._embed = self

    def __call__(self, texts: list[str], torch: Any, readable: list[bool] | None = None) -> Any:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vecs]
        if missing:
            flags: list[bool] = []
            out = self._embed(missing, torch, flags)
            for t, v, r in zip(missing, out.numpy(), flags):
                self.vecs[t], self.readable[t] = v.copy(), r
            self.new += len(missing)
        if readable is not None:
            readable.extend(self.readable[t] for t in texts)
        if not texts:
            return self._embed(texts, torch)
        return torch.from_numpy(np.stack([self.vecs[t] for t in texts]))

    def save(self) -> None:
        if self.path is None or not self.new:
            return
        texts = list(self.vecs)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(
            tmp,
            texts=np.array(texts),
            vecs=np.stack([self.vecs[t] for t in texts]),
            readable=np.array([self.readable[t] for t in texts]),
        )
        tmp.replace(self.path)
        self.new = 0


#: Where the state embeddings are kept between runs (``EmbeddingMemo``), shared by the
#: learning benchmarks that read the same streams.
CACHE = Path(tempfile.gettempdir()) / "agentbranch-learning-path-embeddings.npz"


def add_cache_option(parser: argparse.ArgumentParser) -> None:
    """``--cache``: the embedding cache file (default ``CACHE``)."""
    parser.add_argument(
        "--cache",
        type=Path,
        default=CACHE,
        help="file the state embeddings are kept in between runs",
    )


def questions(sets: list[str]) -> list[tuple[ec.Task, list[tuple[str, str]]]]:
    """Each question of ``sets`` with its stream items (held-out state, true option),
    the same items as ``learning_readers.load_questions``."""
    from agentbranch.core.questions import to_spec
    from agentbranch.engine.readers import embedded as emb

    out = []
    for name in sets:
        fit, held = SETS[name]()
        for task in ec.tasks_for(name, fit, seed=ec.DRAWS[0]):
            spec = to_spec(task.id, task.question)  # type: ignore[arg-type]
            written = {e for ex in emb.option_examples(spec) for e in ex}
            items = [
                (i.text, t)
                for i in held
                if (t := task.truth(i)) is not None and i.text[:600] not in written
            ]
            out.append((task, items))
    return out


def run_stream(
    engine: ab.DecisionEngine,
    task: ec.Task,
    items: list[tuple[str, str]],
    learn: bool,
    seed: int,
    folder: Path,
    rate: float = RATE,
) -> dict:
    """One stream of ``items`` through a decide node (taken decisions audited at
    ``rate``); per decision: taken, right, version."""
    teacher = Teacher(truth=dict(items))
    earned = Earned(
        precision=TARGET, level=LEVEL, learn=learn, store=folder / f"{task.id}-{seed}-{learn}.jsonl"
    )
    if learn:
        earned.learner.background = False  # reproducible: fitted on the calling thread
        earned.learner.settle_s = 0.0  # one writer: no other replica's labels to wait for
    audit = Audit(rate=rate, seed=seed)
    policy = Policy(take_at=earned, fallbacks=[Generate(teacher)], audit=audit)
    node = decide_node(engine, {task.id: task.question}, state_key="text", policy=policy)
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(State)
    g.add_node("decide", node)
    g.add_edge(START, "decide")
    g.add_edge("decide", END)
    graph = g.compile()
    taken, right, version = [], [], []
    for text, truth in items:
        d = graph.invoke({"text": text})["decisions"][task.id]
        audit.flush(timeout=60)
        taken.append(d["decided_by"] == "engine")
        right.append(d["engine_label"] == truth)
        version.append(d.get("reader_version") or 0)
    audit.close()
    return {
        "taken": np.array(taken, bool),
        "right": np.array(right, bool),
        "version": np.array(version),
        "teacher_calls": teacher.calls,
    }


def summary(runs: list[dict]) -> dict:
    taken = np.concatenate([r["taken"] for r in runs])
    right = np.concatenate([r["right"] for r in runs])
    late = np.concatenate([r["taken"][len(r["taken"]) // 2 :] for r in runs])
    firsts = [int(np.argmax(r["taken"])) if r["taken"].any() else None for r in runs]
    got = [f for f in firsts if f is not None]
    return {
        "decisions": int(len(taken)),
        "takes": int(taken.sum()),
        "right_takes": int(right[taken].sum()),
        "coverage": round(float(taken.mean()), 4),
        "precision": round(float(right[taken].mean()), 4) if taken.any() else None,
        "coverage_second_half": round(float(late.mean()), 4),
        #: labels before the first take, per stream (None: never took)
        "labels_to_first_take": firsts,
        "median_labels_to_first_take": statistics.median(got) if got else None,
        "final_version": int(np.median([r["version"][-1] for r in runs])),
        "teacher_calls": int(sum(r["teacher_calls"] for r in runs)),
    }


def pooled(results: dict, mode: str) -> dict:
    rows = [r[mode] for r in results.values()]
    takes = sum(m["takes"] for m in rows)
    right = sum(m["right_takes"] for m in rows)
    decisions = sum(m["decisions"] for m in rows)
    worst = [(m["right_takes"] / m["takes"], q) for q, m in zip(results, rows) if m["takes"] >= 20]
    firsts = [f for m in rows for f in m["labels_to_first_take"] if f is not None]
    never = sum(f is None for m in rows for f in m["labels_to_first_take"])
    return {
        "decisions": decisions,
        "coverage": round(takes / decisions, 4) if decisions else None,
        "precision": round(right / takes, 4) if takes else None,
        "worst_question_precision": round(min(worst)[0], 4) if worst else None,
        "worst_question": min(worst)[1] if worst else None,
        "median_labels_to_first_take": statistics.median(firsts) if firsts else None,
        "streams_that_took": len(firsts),
        "streams_that_never_took": never,
        "teacher_calls": sum(m["teacher_calls"] for m in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=1, help="seeded orders per question")
    parser.add_argument("--questions", nargs="*", default=None, help="question ids to run")
    parser.add_argument("--split", choices=sorted(SPLITS), default=None)
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument(
        "--templated",
        action="store_true",
        help="the short separable streams (TEMPLATED), 100 decisions each unless --limit",
    )
    add_cache_option(parser)
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="only the first N decisions of each stream (short streams: a question's first week)",
    )
    parser.add_argument("--no-cache", action="store_true", help="embed every read afresh")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--name", default="learning_path", help="results file name")
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=list(MODES))
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="for studies: a constant of the learning (ladder.FIRST_REFIT=16, "
        "ladder.BASE_SHARE=0.5, eprocess.SHARE=0.5, head.WRITTEN_WEIGHT=0)",
    )
    parser.add_argument(
        "--no-correction",
        action="store_true",
        help="a study of what the guarantee costs, not the library: every version (and the "
        "question as written) tested at the whole error, no union bound across versions",
    )
    parser.add_argument(
        "--versions-apart",
        action="store_true",
        help="a study of what the guarantee costs, not the library: the question as written "
        "at the whole error as without learning, the learned versions together at another "
        "whole error (so every threshold holds with probability 1 - 2 (1 - level))",
    )
    parser.add_argument(
        "--versions-scale",
        type=float,
        default=1.0,
        help="a study of what the guarantee costs, not the library: each learned version "
        "tested at this many times its share of the error (the shares then add up to more "
        "than the whole)",
    )
    parser.add_argument(
        "--audit-rate",
        type=float,
        default=RATE,
        help=f"share of the taken decisions the teacher audits (default {RATE}; a study of "
        "what more labels buy)",
    )
    args = parser.parse_args()
    from agentbranch.policy.earned.learn import eprocess, head, ladder

    if not 0.0 < args.audit_rate <= 1.0:
        parser.error(f"--audit-rate must be in (0, 1], got {args.audit_rate}")
    if not args.versions_scale > 0.0:
        parser.error(f"--versions-scale must be above 0, got {args.versions_scale}")
    if args.no_correction + args.versions_apart + (args.versions_scale != 1.0) > 1:
        parser.error("--no-correction, --versions-apart and --versions-scale: one at a time")
    if args.no_correction:
        spend_error(STUDY_SHARES["none"])
    if args.versions_apart:
        spend_error(STUDY_SHARES["apart"])
    if args.versions_scale != 1.0:
        shipped, scale = ladder.version_share, args.versions_scale
        spend_error(lambda j, base=None: shipped(j, base) * (1.0 if j == 0 else scale))

    for item in args.set:
        name, value = item.split("=", 1)
        module, const = name.split(".", 1)
        target = {"ladder": ladder, "eprocess": eprocess, "head": head}[module]
        kind = type(getattr(target, const))
        if kind is tuple:  # eprocess.FRACTIONS=0.75,0.97
            setattr(target, const, tuple(float(v) for v in value.split(",")))
        elif kind is bool:  # ladder.ADMITTED_SHARES=false
            setattr(target, const, value.strip().lower() in ("1", "true", "yes", "on"))
        else:
            setattr(target, const, kind(value))
    modes = {m: MODES[m] for m in args.modes}
    wanted = set(args.questions or ()) | (set(QUICK) if args.quick else set())
    sets = list(SPLITS[args.split]) if args.split else list(SETS)
    if wanted:
        sets = [s for s in sets if any(q.split(".")[0] == s for q in wanted)]
    start = time.perf_counter()
    if args.templated:
        args.limit = 100 if args.limit is None else args.limit
        qs: list[tuple[Any, list[tuple[str, str]]]] = [
            (t, items) for t, items in templated() if not wanted or t.id in wanted
        ]
    else:
        qs = [(t, items) for t, items in questions(sets) if not wanted or t.id in wanted]
    engine = ab.DecisionEngine.from_env()
    memo = None if args.no_cache else EmbeddingMemo(engine.reader, args.cache)
    lines: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for task, items in sorted(qs, key=lambda x: x[0].id):
            res: dict[str, Any] = {"n": len(items[: args.limit])}
            for mode, learn in modes.items():
                runs = []
                for s in range(args.streams):
                    order = np.random.default_rng(1000 + s).permutation(len(items))
                    stream = [items[i] for i in order][: args.limit]
                    runs.append(
                        run_stream(engine, task, stream, learn, s, Path(tmp), args.audit_rate)
                    )
                res[mode] = summary(runs)
            results[task.id] = res
            if memo is not None:
                memo.save()
            print(
                f"  {task.id}: "
                + " ".join(f"{m} {res[m]['coverage']:.3f}" for m in modes)
                + f" ({time.perf_counter() - start:.0f}s)",
                file=sys.stderr,
                flush=True,
            )
    run_s = time.perf_counter() - start
    say(
        f"{len(results)} questions x {args.streams} stream(s) through a decide node "
        f"(DecisionEngine.from_env(), Earned(precision={TARGET}, level={LEVEL}, store=JSON Lines), "
        f"Generate + Audit(rate={args.audit_rate}) with a truth teacher): {run_s:.0f}s"
    )
    if args.no_correction:
        say("STUDY: every version tested at the whole error (no union bound across versions)")
    if args.versions_apart:
        say("STUDY: the question as written at the whole error, the versions together at another")
    if args.versions_scale != 1.0:
        say(f"STUDY: each version tested at {args.versions_scale:g}x its share of the error")
    say()
    say(f"{'':29}|" + "".join(f" {'learn ' + mode:^34}|" for mode in modes))
    say(f"{'question':24} {'n':>4} |" + "  cov   prec   late first  v  |" * len(modes))

    def fmt(m: dict) -> str:
        p = "  -   " if m["precision"] is None else f"{m['precision']:.3f}"
        f = m["median_labels_to_first_take"]
        f = "  -" if f is None else f"{f:>4.0f}"
        late = m["coverage_second_half"]
        return f" {m['coverage']:.3f} {p} {late:.3f} {f} {m['final_version']:>2}  |"

    for qid, r in results.items():
        say(f"{qid:24} {r['n']:>4} |" + "".join(fmt(r[m]) for m in modes))
    overall = {mode: pooled(results, mode) for mode in modes}
    say()
    for mode in modes:
        o = overall[mode]
        say(
            f"learn {mode}: coverage {o['coverage']}, take precision {o['precision']}, worst "
            f"question (>= 20 takes) {o['worst_question_precision']} ({o['worst_question']}), "
            f"median labels to first take {o['median_labels_to_first_take']} "
            f"({o['streams_that_took']} streams took, {o['streams_that_never_took']} never), "
            f"teacher calls {o['teacher_calls']}"
        )
    ratio = None  # (JSON has no NaN: None when learning off took nothing)
    if len(overall) == 2:
        off_cov, on_cov = overall["off"]["coverage"], overall["on"]["coverage"]
        ratio = on_cov / off_cov if off_cov else None
        shown = "-" if ratio is None else f"{ratio:.2f}x"
        say(f"coverage learn on / off: {shown} ({off_cov} -> {on_cov})")
    args.out.mkdir(parents=True, exist_ok=True)
    out = {
        "command": "HF_HUB_OFFLINE=1 python benchmarks/learning_path.py " + " ".join(sys.argv[1:]),
        "target_precision": TARGET,
        "level": LEVEL,
        "audit_rate": args.audit_rate,
        "streams_per_question": args.streams,
        "decisions_per_stream_at_most": args.limit,
        "constants": {
            "ladder.FIRST_REFIT": ladder.FIRST_REFIT,
            "ladder.BASE_SHARE": ladder.BASE_SHARE,
            "ladder.WRITTEN_LOOKS_AS_ALONE": ladder.WRITTEN_LOOKS_AS_ALONE,
            "eprocess.SHARE": eprocess.SHARE,
            "eprocess.FRACTIONS": list(eprocess.FRACTIONS),
            "eprocess.WEIGHTS": list(eprocess.WEIGHTS),
            "head.WRITTEN_WEIGHT": head.WRITTEN_WEIGHT,
            "correction_across_versions": not args.no_correction,
            "versions_apart": args.versions_apart,
            "versions_scale": args.versions_scale,
        },
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "seconds": round(run_s),
        "coverage_ratio": None if ratio is None else round(ratio, 3),
        "overall": overall,
        "per_question": results,
    }
    (args.out / f"{args.name}.json").write_text(json.dumps(out, indent=2) + "\n")
    (args.out / f"{args.name}.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / (args.name + '.json')}")


if __name__ == "__main__":
    main()
