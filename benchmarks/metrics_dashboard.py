"""A dashboard drawn from a real run's metrics (docs/metrics.md): the triage demo's 75
tickets through an Earned policy (precision 0.8, a teacher, audits of one take in five)
on the default engine, the OpenTelemetry SDK's in-memory reader read after every ticket.

    PYTHONPATH=src python benchmarks/metrics_dashboard.py [--out FILE.png]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from importlib import resources
from pathlib import Path

from langchain_core.runnables import RunnableLambda
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import agentbranch as ab
from agentbranch.demo.triage import TRIAGE_QUESTIONS, build_triage_graph
from agentbranch.policy import Audit, Earned, Generate, Policy

Q = "agentbranch.question.id"


def snapshot(reader: InMemoryMetricReader) -> dict[str, dict[tuple, float]]:
    """Metric name -> {attributes: value} (counters and gauges)."""
    out: dict[str, dict[tuple, float]] = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    if hasattr(p, "value"):
                        out.setdefault(m.name, {})[tuple(sorted(p.attributes.items()))] = p.value
    return out


def by_question(snap: dict, name: str, **match: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for attrs, value in snap.get(name, {}).items():
        a = dict(attrs)
        if all(a.get(k) == v for k, v in match.items()):
            out[a[Q]] = out.get(a[Q], 0.0) + value
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/metrics_dashboard.png")
    args = ap.parse_args()
    lines = resources.files("agentbranch.demo").joinpath("labelled_tickets.jsonl").read_text()
    tickets = [json.loads(x) for x in lines.splitlines()[1:] if x.strip()]
    truth = {t["state"]: t["labels"] for t in tickets}

    def knows_the_answer(messages):
        text = messages[-1].content
        ticket = text.split("Input:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        qid = next(q for q, spec in TRIAGE_QUESTIONS.items() if spec.instructions in text)
        return json.dumps({"label": truth[ticket][qid]})

    reader = InMemoryMetricReader()
    ab.use_meter_provider(MeterProvider(metric_readers=[reader]))
    store = Path(tempfile.mkdtemp()) / "evidence.jsonl"
    audit = Audit(rate=0.2, seed=1)
    earned = Earned(precision=0.8, level=0.95, min_evidence=40, store=str(store))
    teacher = Generate(RunnableLambda(knows_the_answer))
    policy = Policy(take_at=earned, fallbacks=[teacher], audit=audit)
    graph = build_triage_graph(ab.DecisionEngine.from_env(), policy=policy)
    series = []
    for t in tickets:
        graph.invoke({"ticket": t["state"]})
        audit.flush()
        series.append(snapshot(reader))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    qids = list(TRIAGE_QUESTIONS)
    xs = range(1, len(series) + 1)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    ax = axes[0][0]
    for q in qids:
        taken = [by_question(s, "agentbranch.takes").get(q, 0) for s in series]
        ax.plot(xs, [n / i for n, i in zip(taken, xs)], label=q)
    ax.set_title("share taken (takes / decisions)")
    ax.legend(fontsize=8)
    ax = axes[0][1]
    calls = [sum(by_question(s, "agentbranch.teacher.calls").values()) for s in series]
    saved = [sum(by_question(s, "agentbranch.teacher.calls_saved").values()) for s in series]
    ax.plot(xs, calls, label="teacher calls")
    ax.plot(xs, saved, label="teacher calls saved")
    ax.set_title("teacher: calls made and saved (cumulative)")
    ax.legend(fontsize=8)
    ax = axes[1][0]
    for q in qids:
        ax.plot(xs, [by_question(s, "agentbranch.threshold").get(q) for s in series], label=q)
    ax.set_ylim(0, 1.02)
    ax.set_title("threshold in force (absent: band closed)")
    ax.set_xlabel("tickets")
    ax = axes[1][1]
    for name, label in (
        ("agentbranch.labels.stored", "labels stored"),
        ("agentbranch.labels.lost", "labels lost"),
        ("agentbranch.audits.due", "audits due"),
        ("agentbranch.audits.done", "audits done"),
    ):
        ax.plot(xs, [sum(by_question(s, name).values()) for s in series], label=label)
    ax.set_title("labels and audits (cumulative)")
    ax.set_xlabel("tickets")
    ax.legend(fontsize=8)
    fig.suptitle("agentbranch metrics, triage demo (75 tickets, Earned precision 0.8)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=90)
    last = series[-1]
    print(f"wrote {args.out}")
    print("takes:", by_question(last, "agentbranch.takes"))
    print("teacher calls:", sum(by_question(last, "agentbranch.teacher.calls").values()))


if __name__ == "__main__":
    main()
