"""Support triage on typed decisions: team, urgency, frustration in ONE read per ticket.

    python examples/support_triage.py            # engine from the environment
    python examples/support_triage.py --tiny     # tiny random DiffusionGemma on CPU

Low-confidence team routing goes to the ``human_triage`` node (pass a LangChain chat
model as ``fallback_model`` to fall back to generation instead). The tickets run with
``graph.batch``: their decisions reach the model as one batched read.
"""

from __future__ import annotations

from _engine import make_engine

from agentbranch.demo.triage import SAMPLE_TICKETS, build_triage_graph, triage_row


def _shown(value: object) -> str:
    return "—" if value is None else str(value)  # None: the engine was not sure


def main() -> None:
    engine = make_engine()
    graph = build_triage_graph(engine)  # fallback_model=ChatOpenAI(...) to generate instead
    states = graph.batch([{"ticket": t} for t in SAMPLE_TICKETS])
    print(
        f"{'queue':<16} {'urgent':<6} {'frustration':<11} {'team conf':>9}  {'decided_by':<13} ticket"
    )
    for state in states:
        row = triage_row(state)
        conf = row["team_confidence"]
        print(
            f"{row['queue']:<16} {_shown(row['urgent']):<6} {_shown(row['frustration']):<11} "
            f"{conf if conf is None else f'{conf:.2f}':>9}  {row['team_decided_by']:<13} "
            f"{row['ticket'][:60]}"
        )


if __name__ == "__main__":
    main()
