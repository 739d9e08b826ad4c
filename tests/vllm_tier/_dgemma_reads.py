"""The reads the DiffusionGemma tests build and compare (test_diffusiongemma_vllm.py,
test_diffusiongemma_window.py, test_diffusion_parity.py, test_decisions_api.py): the
questions every one of them asks, a read request of a state and questions, and the gap
between two readers' label log probabilities (``TOL``: what parity allows)."""

from __future__ import annotations

import math
from typing import Any

import agentbranch as ab
from agentbranch.core.questions import to_spec, validate_questions
from agentbranch.core.reads import QuestionSpec, ReadRequest

#: Two readers on the same weights agree on every label log probability within this.
TOL = 1e-5

#: A choice with a described and an undescribed option, a yes/no, a score.
MIXED = {
    "team": ab.choice("Which team should take it?", {"billing": "Invoices", "bugs": None}),
    "urgent": ab.yes_no("Is it urgent?", yes="Needs an answer within the hour"),
    "severity": ab.score("How severe?", ["low", "medium", "high", "critical"]),
}
#: A choice and a yes/no with no descriptions.
BARE = {"pick": ab.choice("Pick one.", ["alpha", "beta", "gamma"]), "ok": ab.yes_no("OK?")}
#: More options than letters (26 tools) and a ten-level score.
WIDE = {
    "route": ab.choice("Route the request.", {f"tool_{i}": f"Tool number {i}" for i in range(26)}),
    "scale": ab.score("Rate it.", [f"level {i}" for i in range(10)]),
}


def specs(questions: dict[str, Any]) -> tuple[QuestionSpec, ...]:
    return tuple(to_spec(k, q) for k, q in validate_questions(questions).items())


def make_read(state: str, questions: dict[str, Any], **kw: Any) -> ReadRequest:
    return ReadRequest(state=state, questions=specs(questions), **kw)


def max_logprob_gap(ours: list, theirs: list) -> float:
    """The largest difference of any label log probability (and label mass) between two
    ``read`` results; the read structure and the argmax flags must be the same."""
    gap = 0.0
    assert len(ours) == len(theirs)
    for our_req, their_req in zip(ours, theirs):
        assert len(our_req) == len(their_req)
        for our, their in zip(our_req, their_req):
            assert len(our.logprobs) == len(their.logprobs)
            for a, b in zip(our.logprobs, their.logprobs):
                assert math.isfinite(a) and a <= 0.0
                gap = max(gap, abs(a - b))
            gap = max(gap, abs(our.label_mass - their.label_mass))
            assert our.argmax_is_label == their.argmax_is_label
    return gap
