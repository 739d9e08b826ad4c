"""The demo's stream of labelled support tickets (``ticket_stream``): a day of a support
inbox, built from a few fixed phrasings per answer (like a product's real traffic, which
repeats itself), so the loop the demo shows plays out in a few hundred tickets on the CPU.
The labels are what a careful person would answer; the demo's teacher reads them.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["ticket_stream"]

# (team, urgent, phrasings): each phrasing takes a {thing} and says its problem its way.
_KINDS: list[tuple[str, str, list[str]]] = [
    (
        "billing",
        "no",
        [
            "I was charged twice for {thing} this month, please refund one charge.",
            "My invoice for {thing} shows the wrong amount, can you correct it?",
            "How do I change the credit card you bill for {thing}?",
            "Please send me a receipt for {thing}, I need it for my taxes.",
        ],
    ),
    (
        "outage",
        "yes",
        [
            "{thing} is down for all of our users since this morning, nothing loads.",
            "Every request to {thing} fails with a 500 error, production is broken.",
            "{thing} has been unreachable for an hour and we are losing orders.",
        ],
    ),
    (
        "account_access",
        "no",
        [
            "I can't log in to {thing}, the password reset email never arrives.",
            "My two-factor code for {thing} is rejected and I am locked out.",
            "Please unlock my account for {thing}, I typed the wrong password too often.",
        ],
    ),
    (
        "account_access",
        "yes",
        [
            "Someone else logged in to our {thing} account and changed the owner email!",
        ],
    ),
    (
        "bug",
        "no",
        [
            "The export in {thing} puts the dates in the wrong column.",
            "Sorting by name in {thing} puts lowercase names after uppercase ones.",
            "The chart in {thing} shows last week's totals instead of this week's.",
        ],
    ),
    (
        "feature_request",
        "no",
        [
            "It would be great if {thing} could send a weekly summary by email.",
            "Could you add a dark theme to {thing}?",
            "Please let us schedule reports in {thing} for Monday mornings.",
        ],
    ),
]
_THINGS = [
    "the dashboard",
    "the mobile app",
    "the reports page",
    "the API",
    "the billing portal",
    "our team workspace",
    "the admin console",
    "the checkout",
]
# How often each kind arrives (billing and bugs are the bulk of an inbox).
_WEIGHTS = [5, 2, 3, 1, 4, 3]


def ticket_stream(n: int = 400, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` labelled tickets (``{"ticket", "team", "urgent"}``), numbered (``T-1001: ...``),
    the same for the same arguments."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        team, urgent, phrasings = rng.choices(_KINDS, weights=_WEIGHTS)[0]
        text = rng.choice(phrasings).format(thing=rng.choice(_THINGS))
        # each ticket its own number, as an inbox's are: a text seen before (another
        # thread, other case or spacing) is no new evidence for what learned from it
        ticket = f"T-{1001 + len(out)}: {text[0].upper()}{text[1:]}"
        out.append({"ticket": ticket, "team": team, "urgent": urgent})
    return out
