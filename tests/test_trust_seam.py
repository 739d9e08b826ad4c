"""The trust seam (``agentbranch.policy.trust``): a policy reaches the source of its
threshold only through ``TrustSource``, so a source written outside agentbranch works
like ``Earned`` does: its threshold bands the decisions, its decisions carry an
identity, the labels the fallback and the audits obtain reach it, and each due audit
is reported to it. A fixed ``take_at`` is the trivial source (``Fixed``)."""

from __future__ import annotations

from typing import Any

import pytest
from _earned_fixtures import URGENT, Oracle, engine, state

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError
from agentbranch.policy import Earned, Generate, GotoNode, Policy, QuestionKey, Resolver, Threshold
from agentbranch.policy.trust import Asked, Fixed, TrustSource


class Counting(TrustSource):
    """A source of its own: takes at ``take_at`` (trust ``"earned"``), keeps every label
    and every audit outcome it is given."""

    def __init__(self, take_at: float) -> None:
        self.take_at = take_at
        self.labels: list[tuple[str, str, str, str | None]] = []
        self.audits: list[tuple[str, str]] = []

    def in_force(self, key) -> Threshold:
        return Threshold(self.take_at, "earned")

    def observe_label(self, question_id, question, banded, label):
        self.labels.append((question_id, label.source, label.label, banded.get("decision_id")))

    def audit_arrived(self, question_id, reader, model) -> None:
        self.audits.append((question_id, "arrived"))


def test_a_source_of_its_own_bands_decisions_and_gets_the_fallbacks_labels():
    source = Counting(0.5)  # (the scripted read's confidence is 0.92 at p=0.99, 0.03 at 0.6)
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=source, fallbacks=[Generate(Oracle())])
    )
    taken = r.resolve(state(1, "yes", 0.99, "yes"))["urgent"]
    labelled = r.resolve(state(2, "yes", 0.6, "no"))["urgent"]
    assert (taken["decided_by"], taken["take_at"], taken["trust"]) == ("engine", 0.5, "earned")
    assert (labelled["decided_by"], labelled["label"]) == ("fallback", "no")
    # the label of the decision below the threshold, with that decision's identity
    assert source.labels == [("urgent", "fallback", "no", labelled["decision_id"])]
    assert taken["decision_id"] and labelled["decision_id"] != taken["decision_id"]


def test_audits_report_to_the_source_and_their_labels_reach_it():
    source = Counting(0.5)
    audit = ab.Audit(model=Oracle(), rate=1.0, seed=0)
    policy = Policy(take_at=source, fallbacks=[GotoNode("human")], audit=audit)
    r = Resolver(engine(), {"urgent": URGENT}, policy)
    rec = r.resolve(state(1, "yes", 0.99, "no"))["urgent"]
    assert audit.flush(timeout=30)
    assert rec["decided_by"] == "engine"
    assert source.audits == [("urgent", "arrived")]
    assert source.labels == [("urgent", "audit", "no", rec["decision_id"])]


def test_a_fixed_take_at_is_the_trivial_source():
    policy = Policy(take_at=0.7, fallbacks=[GotoNode("human")])
    assert isinstance(policy.trust, Fixed) and policy.earned is None
    assert policy.trust.in_force(QuestionKey("q", URGENT, "r", "m")) == Threshold(0.7, "fixed")
    assert Policy(take_at=Fixed(0.7), fallbacks=[GotoNode("human")]).take_at == 0.7
    earned = Earned()
    teacher = Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    assert teacher.trust is earned and teacher.earned is earned
    # a source learns nothing by default: it is asked nothing else
    assert Fixed(0.5).asked(None, {"q": URGENT}, "text") == {}
    assert Fixed(0.5).suspended_take_at(QuestionKey("q", URGENT)) is None


def test_a_source_must_say_its_threshold_and_needs_a_label_source():
    class Silent(TrustSource):
        pass

    with pytest.raises(TypeError, match="in_force"):
        Silent()
    with pytest.raises(ConfigurationError, match="no way to get them"):
        Policy(take_at=Counting(0.9), fallbacks=[GotoNode("human")])


def test_a_learning_earned_answers_what_is_asked_through_the_seam(tmp_path):
    # Earned(learn=True) asks versions (off the event loop); before any is fitted the
    # question as written is asked, at version 0, and the record says so.
    earned = Earned(learn=True, store=str(tmp_path / "e.jsonl"))
    assert earned.asks_versions and not Earned().asks_versions
    got = earned.asked(engine(), {"urgent": URGENT}, state(1, "yes", 0.9, "yes"))
    assert got == {"urgent": Asked(URGENT, URGENT, 0)}
    record: dict[str, Any] = {"engine_label": "yes", "confidence": 0.9}
    record["probabilities"] = {"yes": 0.9, "no": 0.1}
    earned.mark(record, got["urgent"])
    assert record["reader_version"] == 0 and record["probability"] == 0.9
