"""A replica for the shared-store tests, run as its own process:

    python _earned_worker.py KIND TARGET START N BARRIER WORKERS

resolves ``N`` decisions (states ``START`` ...) with an ``Earned`` policy whose store is
``KIND`` (``jsonl``, ``sqlite`` or ``postgres``) at ``TARGET``, marks itself done in the
directory ``BARRIER`` and waits until ``WORKERS`` replicas are, re-reads the store, and
prints the threshold it then has as JSON.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

from _earned_fixtures import URGENT, Oracle, engine, state

from agentbranch.policy import Earned, Generate, Policy, QuestionKey, Resolver


def store_for(kind: str, target: str, stack: contextlib.ExitStack):
    if kind == "jsonl":
        return target
    if kind == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        store = stack.enter_context(SqliteStore.from_conn_string(target))
    else:
        from langgraph.store.postgres import PostgresStore

        store = stack.enter_context(PostgresStore.from_conn_string(target))
    store.setup()
    return store


def main(kind: str, target: str, start: int, n: int, barrier: str, workers: int) -> None:
    with contextlib.ExitStack() as stack:
        earned = Earned(
            precision=0.8, min_evidence=20, refresh_s=3600, store=store_for(kind, target, stack)
        )
        policy = Policy(take_at=earned, fallbacks=[Generate(Oracle())])
        r = Resolver(engine(), {"urgent": URGENT}, policy)
        for i in range(start, start + n):
            r.resolve(state(i, "yes", 0.99, "yes"))
        done = Path(barrier)
        (done / f"done-{start}").touch()
        deadline = time.monotonic() + 120
        while len(list(done.glob("done-*"))) < workers and time.monotonic() < deadline:
            time.sleep(0.05)
        earned.refresh()
        st = earned.state(QuestionKey("urgent", URGENT, "scripted", "scripted-model"))
        print(json.dumps({"take_at": st.take_at, "trust": st.trust, "records": st.records}))


if __name__ == "__main__":
    kind, target, start, n, barrier, workers = sys.argv[1:]
    main(kind, target, int(start), int(n), barrier, int(workers))
